#include "backend/bpf/PinDirectory.h"

#include "backend/bpf/PinnedObject.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>
#include <unistd.h>

#include <algorithm>

namespace morpheus::bpf {

uint32_t objectId(int fd) {
  // Every BPF object's info starts with its type and id.
  struct {
    uint32_t type, id;
    uint8_t rest[256];
  } info = {};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(fd, &info, &length) ? 0 : info.id;
}

std::string PinDirectory::pathOf(const std::string &name) const {
  llvm::SmallString<128> path(directory);
  std::string file = name;
  std::replace(file.begin(), file.end(), '.', '_');
  llvm::sys::path::append(path, file);
  return path.str().str();
}

Error PinDirectory::create() const {
  if (std::error_code ec = llvm::sys::fs::create_directories(directory))
    return makeSystemError(ec.value(), "pin directory '{0}'", directory);
  return Error::success();
}

Expected<std::optional<int>> PinDirectory::openMap(const std::string &name) const {
  std::string path = pathOf(name);
  if (::access(path.c_str(), F_OK) != 0)
    return std::nullopt;
  auto fd = openPinnedMap(path);
  if (!fd)
    return withContext(fd.takeError(), "map '" + name + "': cannot reuse the pin");
  return std::optional<int>(*fd);
}

Error PinDirectory::pin(const std::string &name, int fd, bool replace) {
  std::string path = pathOf(name);
  if (replace)
    unlink(path.c_str());
  if (bpf_obj_pin(fd, path.c_str()))
    return makeSystemError(errno, "map '{0}': cannot pin at {1}", name, path);
  made.push_back(path);
  return Error::success();
}

std::vector<std::string>
PinDirectory::unpinned(const std::vector<std::pair<std::string, int>> &objects) const {
  std::vector<std::string> names;
  for (const auto &[name, fd] : objects) {
    int pinned = bpf_obj_get(pathOf(name).c_str());
    if (pinned < 0 || objectId(pinned) != objectId(fd))
      names.push_back(name);
    if (pinned >= 0)
      close(pinned);
  }
  return names;
}

std::vector<std::string>
PinDirectory::repair(const std::vector<std::pair<std::string, int>> &objects) {
  std::vector<std::string> notes;
  for (const auto &[name, fd] : objects) {
    std::string path = pathOf(name);
    int pinned = bpf_obj_get(path.c_str());
    if (pinned >= 0) {
      bool ours = objectId(pinned) == objectId(fd);
      close(pinned);
      if (!ours)
        notes.push_back(llvm::formatv("map '{0}': {1} now holds another object; "
                                      "changes made through it do not reach the program",
                                      name, path)
                            .str());
      continue;
    }
    if (errno != ENOENT) {
      notes.push_back(llvm::toString(
          makeSystemError(errno, "map '{0}': cannot check its pin {1}", name, path)));
      continue;
    }
    std::error_code ec = llvm::sys::fs::create_directories(directory);
    if (ec || bpf_obj_pin(fd, path.c_str()))
      notes.push_back(llvm::toString(makeSystemError(
          ec ? ec.value() : errno, "map '{0}': its pin {1} disappeared and cannot be made again",
          name, path)));
    else
      notes.push_back(
          llvm::formatv("map '{0}': its pin {1} had disappeared; pinned again", name, path)
              .str());
  }
  return notes;
}

void PinDirectory::removeMade() {
  for (const std::string &path : made)
    unlink(path.c_str());
  made.clear();
  rmdir(directory.c_str()); // only succeeds when nothing else is pinned
}

} // namespace morpheus::bpf
