#include "backend/bpf/ProgramLink.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/PinnedObject.h"

#include "support/Netns.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <linux/magic.h>
#include <linux/membarrier.h>
#include <llvm/Support/FormatVariadic.h>
#include <net/if.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <thread>

namespace morpheus::bpf {

namespace {

// From kernel 6.6's uapi, which libbpf 1.1's and Debian 12's headers
// predate.
constexpr unsigned AttachTcxIngress = 46, AttachTcxEgress = 47;
constexpr unsigned LinkTypeXdp = 6, LinkTypeTcx = 11;

// The interface's index, as seen in its namespace: call it there.
Expected<uint32_t> ifindexHere(const AttachPoint &point) {
  uint32_t ifindex = if_nametoindex(point.iface.c_str());
  if (!ifindex)
    return makeSystemError(errno, "no interface '{0}'{1}", point.iface,
                           point.netns.empty()
                               ? ""
                               : " in network namespace '" + point.netns + "'");
  return ifindex;
}

Expected<uint32_t> ifindexOf(const AttachPoint &point) {
  uint32_t ifindex = 0;
  // On a helper thread in the namespace: the daemon's own threads never
  // change namespace.
  Error err = netns::runInNetns(point.netns, [&]() -> Error {
    auto found = ifindexHere(point);
    if (!found)
      return found.takeError();
    ifindex = *found;
    return Error::success();
  });
  if (err)
    return err;
  return ifindex;
}

} // namespace

FileDescriptor findLink(llvm::function_ref<bool(const LinkFacts &)> wanted) {
  uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    FileDescriptor fd(bpf_link_get_fd_by_id(id));
    if (!fd.valid())
      continue;
    std::optional<LinkFacts> facts = linkFacts(fd.get());
    if (facts && facts->ifindex && (facts->type == LinkTypeXdp || facts->type == LinkTypeTcx) &&
        wanted(*facts))
      return fd;
  }
  return FileDescriptor();
}

Expected<AttachedXdp> attachedXdpProgram(int ifindex, const std::string &netns) {
  AttachedXdp attached;
  Error asked = netns::runInNetns(netns, [&]() -> Error {
    bpf_xdp_query_opts query = {};
    query.sz = sizeof(query);
    if (int err = bpf_xdp_query(ifindex, 0, &query))
      return makeSystemError(-err, "interface {0}: cannot query its XDP program", ifindex);
    attached = {query.prog_id, query.attach_mode};
    return Error::success();
  });
  if (asked)
    return std::move(asked);
  return attached;
}

Expected<bool> replaceAttachedXdp(int ifindex, const std::string &netns, int from, int to) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(from, &info, &length))
    return makeSystemError(errno, "cannot read the replaced program's info");
  uint32_t fromId = info.id;
  FileDescriptor link = findLink([&](const LinkFacts &facts) {
    return facts.type == LinkTypeXdp && facts.programId == fromId &&
           facts.ifindex == uint32_t(ifindex);
  });
  if (link.valid()) {
    LIBBPF_OPTS(bpf_link_update_opts, opts, .flags = BPF_F_REPLACE, .old_prog_fd = uint32_t(from));
    if (bpf_link_update(link.get(), to, &opts) == 0)
      return true;
    if (errno == EPERM) // the link runs another program by now
      return false;
    return makeSystemError(errno, "cannot update the XDP link of interface {0}", ifindex);
  }
  auto attached = attachedXdpProgram(ifindex, netns);
  if (!attached)
    return attached.takeError();
  if (attached->programId != fromId)
    return false;
  uint32_t mode = attached->mode == XDP_ATTACHED_DRV   ? XDP_FLAGS_DRV_MODE
                  : attached->mode == XDP_ATTACHED_SKB ? XDP_FLAGS_SKB_MODE
                  : attached->mode == XDP_ATTACHED_HW  ? XDP_FLAGS_HW_MODE
                                                       : 0;
  if (!mode)
    return makeError("interface {0}: its XDP programs are attached in several modes", ifindex);
  bool replaced = false;
  Error done = netns::runInNetns(netns, [&]() -> Error {
    LIBBPF_OPTS(bpf_xdp_attach_opts, opts, .old_prog_fd = from);
    int err = bpf_xdp_attach(ifindex, to, mode | XDP_FLAGS_REPLACE, &opts);
    if (err == -EEXIST) // the interface runs another program by now
      return Error::success();
    if (err)
      return makeSystemError(-err, "cannot replace the XDP program of interface {0}", ifindex);
    replaced = true;
    return Error::success();
  });
  if (done)
    return std::move(done);
  return replaced;
}

unsigned linkTypeOf(ProgramType type) {
  return type == ProgramType::Tc ? LinkTypeTcx : LinkTypeXdp;
}

unsigned tcxAttachType(TcDirection direction) {
  return direction == TcDirection::Ingress ? AttachTcxIngress : AttachTcxEgress;
}

std::optional<LinkFacts> linkFacts(int linkFd) {
  bpf_link_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(linkFd, &info, &length))
    return std::nullopt;
  // The tcx member of the union ({ifindex, attach_type}) postdates these
  // headers: its attach type is the word after the index.
  uint32_t attachType = 0;
  if (info.type == LinkTypeTcx)
    std::memcpy(&attachType, reinterpret_cast<const char *>(&info.xdp.ifindex) + 4, 4);
  return LinkFacts{info.type, info.prog_id, info.xdp.ifindex, attachType, info.id};
}

std::string AttachPoint::describe() const {
  std::string where = type == ProgramType::Tc
                          ? std::string("tcx ") +
                                (tcDirection == TcDirection::Ingress ? "ingress" : "egress")
                          : std::string("XDP (") +
                                (xdpMode == XdpMode::Native ? "native" : "generic") + ")";
  where += " on " + iface;
  if (!netns.empty())
    where += " in namespace " + netns;
  return where;
}

Expected<ProgramLink> ProgramLink::attach(int programFd, const AttachPoint &point) {
  if (point.type == ProgramType::Other)
    return makeError("cannot attach to {0}: Morpheus attaches XDP and TC programs only",
                     point.iface);
  int linkFd = -1, code = 0;
  uint32_t ifindex = 0;
  // The kernel reads the index in the caller's namespace: the link is made
  // in the interface's, on a helper thread (runInNetns).
  Error err = netns::runInNetns(point.netns, [&]() -> Error {
    auto found = ifindexHere(point);
    if (!found)
      return found.takeError();
    ifindex = *found;
    if (point.type == ProgramType::Xdp) {
      LIBBPF_OPTS(bpf_link_create_opts, options,
                  .flags = point.xdpMode == XdpMode::Native ? XDP_FLAGS_DRV_MODE
                                                            : XDP_FLAGS_SKB_MODE);
      linkFd = bpf_link_create(programFd, ifindex, BPF_XDP, &options);
    } else {
      linkFd = bpf_link_create(programFd, ifindex,
                               bpf_attach_type(tcxAttachType(point.tcDirection)), nullptr);
    }
    code = errno;
    return Error::success();
  });
  if (err)
    return err;
  if (linkFd < 0) {
    std::string hint;
    if (point.type == ProgramType::Xdp && code == EBUSY)
      hint = " (another XDP program is attached)";
    else if (point.type == ProgramType::Xdp && code == EOPNOTSUPP &&
             point.xdpMode == XdpMode::Native)
      hint = " (no native XDP in this driver; try --xdp-mode generic)";
    else if (point.type == ProgramType::Tc && code == EINVAL)
      hint = " (this kernel has no tcx: Linux 6.6 or later is needed)";
    return makeSystemError(code, "cannot attach {0}{1}", point.describe(), hint);
  }
  return ProgramLink(linkFd, ifindex);
}

Expected<std::optional<ProgramLink>> ProgramLink::openPinned(const std::string &path,
                                                             const AttachPoint &point) {
  if (::access(path.c_str(), F_OK) != 0)
    return std::nullopt;
  int fd = bpf_obj_get(path.c_str());
  if (fd < 0)
    return makeSystemError(errno, "cannot open the link pinned at {0}", path);
  std::optional<LinkFacts> facts = linkFacts(fd);
  if (!facts || facts->type != linkTypeOf(point.type)) {
    close(fd);
    return makeError("{0} holds no {1} link; remove it or choose another --pin-dir", path,
                     programTypeName(point.type));
  }
  if (!facts->ifindex) {
    // Its interface was deleted: the link serves nothing any more.
    close(fd);
    unlink(path.c_str());
    return std::nullopt;
  }
  auto ifindex = ifindexOf(point);
  if (!ifindex || *ifindex != facts->ifindex) {
    llvm::consumeError(ifindex.takeError());
    close(fd);
    return makeError("{0} holds a link on another interface than {1}; remove it or choose "
                     "another --pin-dir",
                     path, point.iface);
  }
  ProgramLink link(fd, facts->ifindex);
  link.pinnedAt = path;
  return std::optional<ProgramLink>(std::move(link));
}

ProgramLink::ProgramLink(ProgramLink &&other) noexcept
    : linkFd(std::exchange(other.linkFd, -1)), index(other.index),
      pinnedAt(std::move(other.pinnedAt)) {}

ProgramLink &ProgramLink::operator=(ProgramLink &&other) noexcept {
  if (this != &other) {
    if (linkFd >= 0)
      close(linkFd);
    linkFd = std::exchange(other.linkFd, -1);
    index = other.index;
    pinnedAt = std::move(other.pinnedAt);
  }
  return *this;
}

ProgramLink::~ProgramLink() {
  if (linkFd < 0)
    return;
  if (pinnedAt.empty())
    bpf_link_detach(linkFd);
  close(linkFd);
}

Error ProgramLink::replace(int programFd) {
  if (bpf_link_update(linkFd, programFd, nullptr))
    return makeSystemError(errno, "cannot swap the program (link {0})", linkFd);
  return Error::success();
}

bool ProgramLink::attached() const {
  std::optional<LinkFacts> facts = linkFacts(linkFd);
  return facts && facts->ifindex != 0;
}

Error ProgramLink::pin(const std::string &path) {
  if (bpf_obj_pin(linkFd, path.c_str()))
    return makeSystemError(errno, "cannot pin the link at {0}", path);
  pinnedAt = path;
  return Error::success();
}

void ProgramLink::unpin() {
  if (!pinnedAt.empty())
    unlink(pinnedAt.c_str());
  pinnedAt.clear();
}

bool ProgramLink::stillPinned() const {
  if (pinnedAt.empty())
    return false;
  int pinned = bpf_obj_get(pinnedAt.c_str());
  if (pinned < 0)
    return false;
  std::optional<LinkFacts> there = linkFacts(pinned), ours = linkFacts(linkFd);
  close(pinned);
  return there && ours && there->id == ours->id;
}

uint32_t ProgramLink::programId() const {
  std::optional<LinkFacts> facts = linkFacts(linkFd);
  return facts ? facts->programId : 0;
}

namespace {

// libbpf reads a tracepoint's id under /sys/kernel/debug/tracing when that
// exists (debugfs mounts tracefs there), else under /sys/kernel/tracing.
Error ensureTracefs(const std::string &user) {
  constexpr const char *Tracefs = "/sys/kernel/tracing";
  struct statfs fs = {};
  if ((statfs(Tracefs, &fs) == 0 && fs.f_type == TRACEFS_MAGIC) ||
      access("/sys/kernel/debug/tracing", F_OK) == 0)
    return Error::success();
  if (mount("tracefs", Tracefs, "tracefs", 0, nullptr))
    return makeSystemError(errno, "cannot mount tracefs at {0} (needed for {1})", Tracefs, user);
  return Error::success();
}

} // namespace

Expected<std::optional<SectionLink>> SectionLink::attach(const LoadedObject &object,
                                                         const std::string &name) {
  bpf_program *program = bpf_object__find_program_by_name(object.object(), name.c_str());
  if (!program || bpf_program__fd(program) < 0)
    return makeError("object '{0}': program '{1}' is not loaded", object.name(), name);
  llvm::StringRef section = bpf_program__section_name(program);
  std::string what = llvm::formatv("program '{0}' (section '{1}')", name, section).str();
  if (section.starts_with("tracepoint/") || section.starts_with("tp/"))
    if (Error err = ensureTracefs(what))
      return std::move(err);
  bpf_link *link = bpf_program__attach(program); // libbpf 1.x: NULL and errno
  if (!link && errno == EOPNOTSUPP)
    return std::nullopt; // the section says nothing of where
  if (!link)
    return makeSystemError(errno, "{0}: cannot attach it where its section says", what);
  return std::optional<SectionLink>(SectionLink(link));
}

Expected<std::optional<SectionLink>> SectionLink::openPinned(const std::string &path) {
  if (::access(path.c_str(), F_OK) != 0)
    return std::nullopt;
  bpf_link *link = bpf_link__open(path.c_str()); // libbpf 1.x: NULL and errno
  if (!link)
    return makeSystemError(errno, "cannot open the link pinned at {0}", path);
  int fd = bpf_link__fd(link);
  if (objectKind(fd) != ObjectKind::Link) {
    bpf_link__disconnect(link); // closes nothing, unpins nothing
    bpf_link__destroy(link);
    close(fd);
    return makeError("{0} holds no link; remove it or choose another --pin-dir", path);
  }
  return std::optional<SectionLink>(SectionLink(link));
}

bool SectionLink::runs(const LoadedObject &object, const std::string &program) const {
  std::optional<LinkFacts> facts = linkFacts(bpf_link__fd(link));
  int ours = object.programFd(program);
  if (!facts || ours < 0)
    return false;
  auto running = liveProgramById(facts->programId);
  auto loaded = liveProgram(ours);
  if (!running || !loaded) {
    llvm::consumeError(running.takeError());
    llvm::consumeError(loaded.takeError());
    return false;
  }
  std::sort(running->mapIds.begin(), running->mapIds.end());
  std::sort(loaded->mapIds.begin(), loaded->mapIds.end());
  return running->tag == loaded->tag && running->mapIds == loaded->mapIds;
}

Error SectionLink::pin(const std::string &path) {
  if (int err = bpf_link__pin(link, path.c_str()))
    return makeSystemError(-err, "cannot pin the link at {0}", path);
  return Error::success();
}

void SectionLink::unpin() {
  if (bpf_link__pin_path(link))
    bpf_link__unpin(link);
}

std::string SectionLink::pinPath() const {
  const char *path = link ? bpf_link__pin_path(link) : nullptr;
  return path ? path : "";
}

bool SectionLink::stillPinned() const {
  std::string path = pinPath();
  if (path.empty())
    return false;
  FileDescriptor pinned(bpf_obj_get(path.c_str()));
  if (!pinned.valid())
    return false;
  std::optional<LinkFacts> there = linkFacts(pinned.get()), ours = linkFacts(bpf_link__fd(link));
  return there && ours && there->id == ours->id;
}

SectionLink &SectionLink::operator=(SectionLink &&other) noexcept {
  if (this != &other) {
    SectionLink gone(std::exchange(link, std::exchange(other.link, nullptr)));
  }
  return *this;
}

SectionLink::~SectionLink() {
  if (!link)
    return;
  if (!bpf_link__pin_path(link)) {
    bpf_link__destroy(link);
    return;
  }
  // Pinned: the pin keeps it attached. libbpf's detach of a perf-event link
  // (tracepoint, kprobe) would first disable the event, which the pinned
  // link still runs on: disconnected, only the link's descriptor is closed.
  // The perf event's own descriptor, which libbpf keeps to itself, stays
  // open until the process exits (a link pinned as this one goes is left
  // for after it).
  int fd = bpf_link__fd(link);
  bpf_link__disconnect(link);
  bpf_link__destroy(link);
  close(fd);
}

void waitForPacketsInFlight() {
  if (syscall(__NR_membarrier, MEMBARRIER_CMD_GLOBAL, 0, 0) != 0)
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
}

} // namespace morpheus::bpf
