#include "backend/bpf/PinnedObject.h"

#include "backend/bpf/ProgramLink.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <climits>

namespace morpheus::bpf {

ObjectKind objectKind(int fd) {
  char target[PATH_MAX];
  std::string link = "/proc/self/fd/" + std::to_string(fd);
  ssize_t length = readlink(link.c_str(), target, sizeof(target) - 1);
  if (length < 0)
    return ObjectKind::Other;
  std::string name(target, size_t(length));
  if (name == "anon_inode:bpf-map")
    return ObjectKind::Map;
  if (name == "anon_inode:bpf-prog")
    return ObjectKind::Program;
  // A link made by attaching is "bpf_link"; one opened from a pin "bpf-link".
  if (name == "anon_inode:bpf_link" || name == "anon_inode:bpf-link")
    return ObjectKind::Link;
  return ObjectKind::Other;
}

namespace {

// "program 'router' (id 42)", or "program id 42" when it cannot be read.
std::string programNamed(uint32_t id) {
  int fd = bpf_prog_get_fd_by_id(id);
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  bool named = fd >= 0 && bpf_obj_get_info_by_fd(fd, &info, &length) == 0;
  if (fd >= 0)
    close(fd);
  return named ? "program '" + std::string(info.name) + "' (id " + std::to_string(id) + ")"
               : "program id " + std::to_string(id);
}

} // namespace

Expected<int> openPinnedMap(const std::string &path) {
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0)
    return makeSystemError(errno, "map '{0}': cannot open the pinned map", path);
  ObjectKind kind = objectKind(fd);
  if (kind == ObjectKind::Map)
    return fd;
  std::string holds;
  if (kind == ObjectKind::Link) {
    std::optional<LinkFacts> facts = linkFacts(fd);
    holds = !facts ? "a pinned link"
            : facts->programId
                ? "a pinned link, attaching " + programNamed(facts->programId)
                : "a pinned link (detached: its interface is gone)";
  } else if (kind == ObjectKind::Program) {
    bpf_prog_info info = {};
    uint32_t length = sizeof(info);
    holds = bpf_obj_get_info_by_fd(fd, &info, &length) ? "a pinned program"
                                                      : "a pinned " + programNamed(info.id);
  } else {
    holds = "no BPF map";
  }
  close(fd);
  return makeError("map '{0}': {1}, not a map ('morpheus map' changes the maps a run pins "
                   "beside it)",
                   path, holds);
}

} // namespace morpheus::bpf
