// Where a program runs, attached through a bpf_link: an interface's XDP hook
// or its tcx ingress/egress hook (TC). Through the link a new program
// version replaces the running one atomically (bpf_link_update): every
// packet is processed by exactly one version, and none is dropped during
// the swap. XDP and tcx links differ only in how they are made; replacing,
// checking and pinning are the same.
#pragma once

#include "backend/bpf/ProgramType.h"
#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <optional>
#include <string>
#include <utility>

struct bpf_link;

namespace morpheus::bpf {

enum class XdpMode { Native, Generic };
enum class TcDirection { Ingress, Egress };

// An interface's hook for a program of `type`.
struct AttachPoint {
  ProgramType type = ProgramType::Xdp;
  std::string iface;
  std::string netns; // of the interface (the name under /run/netns); "" = ours
  XdpMode xdpMode = XdpMode::Native;            // XDP
  TcDirection tcDirection = TcDirection::Ingress; // TC

  // "XDP (native) on eth0", "tcx ingress on eth0 in namespace ns1"
  std::string describe() const;
};

// The kind of link (bpf_link_info's type) a program of `type` attaches
// with: an XDP link, or a tcx link for TC.
unsigned linkTypeOf(ProgramType type);

// The attach type of a tcx link in `direction` (BPF_TCX_INGRESS/EGRESS).
unsigned tcxAttachType(TcDirection direction);

// What the kernel says of the link behind `linkFd`: its type, the program
// it runs and its interface (0 once detached; XDP's and tcx's link info
// both start with the interface index), and for tcx its attach type (the
// word after the index; 0 for XDP). nullopt if `linkFd` is no link.
struct LinkFacts {
  uint32_t type = 0, programId = 0, ifindex = 0, attachType = 0;
  uint32_t id = 0; // the link's own
};
std::optional<LinkFacts> linkFacts(int linkFd);

// The first XDP or tcx link on an interface that `wanted` accepts; an
// invalid descriptor when there is none.
FileDescriptor findLink(llvm::function_ref<bool(const LinkFacts &)> wanted);

// What an interface's XDP hook runs, asked in its namespace: the program
// (0: none) and how it is attached (XDP_ATTACHED_*).
struct AttachedXdp {
  uint32_t programId = 0;
  uint8_t mode = 0;
};
Expected<AttachedXdp> attachedXdpProgram(int ifindex, const std::string &netns);

// Replaces program `from` on the XDP hook of interface `ifindex` (in
// `netns`) with `to`, atomically and only while the hook still runs
// `from`: through the XDP link that runs it (bpf_link_update with
// BPF_F_REPLACE), else through netlink with XDP_FLAGS_REPLACE in the mode
// `from` was attached in. False, with nothing changed, when the hook runs
// another program by then.
Expected<bool> replaceAttachedXdp(int ifindex, const std::string &netns, int from, int to);

class ProgramLink {
public:
  // Attaches `programFd` at `point`; the caller's namespace is unchanged.
  // TC programs attach through tcx (kernel 6.6 and later), which runs them
  // in attach order beside other tcx programs.
  static Expected<ProgramLink> attach(int programFd, const AttachPoint &point);
  // The link pinned at `path` (left by an earlier run) when it is still
  // attached; nullopt when there is no pin, or the kernel detached the link
  // (its interface was deleted: the stale pin is removed). A pin holding
  // anything but a link of `point`'s kind on its interface is an error
  // naming the path.
  static Expected<std::optional<ProgramLink>> openPinned(const std::string &path,
                                                         const AttachPoint &point);

  ProgramLink(ProgramLink &&other) noexcept;
  ProgramLink &operator=(ProgramLink &&other) noexcept;
  // Detaches, unless the link is pinned (then the pin keeps it attached:
  // the program outlives this process).
  ~ProgramLink();

  // Fails with ENOLINK once the link is detached (see attached()).
  Error replace(int programFd);
  // False once the kernel has detached the link: its interface was deleted
  // (a link on an interface that is merely down stays attached).
  bool attached() const;
  // Pins the link at `path`, so it stays attached after this process exits
  // (crash and kill -9 included); unpin() removes the pin.
  Error pin(const std::string &path);
  void unpin();
  const std::string &pinPath() const { return pinnedAt; }
  // Whether pinPath() still holds this very link, checked now: false when
  // it is not pinned, or its pin was removed or replaced, or the bpffs under
  // it unmounted. A link no pin holds detaches when this process exits.
  bool stillPinned() const;
  // The id of the program the link runs now.
  uint32_t programId() const;
  int fd() const { return linkFd; }
  int ifindex() const { return index; }

private:
  ProgramLink(int fd, int ifindex) : linkFd(fd), index(ifindex) {}
  int linkFd = -1;
  int index = 0;
  std::string pinnedAt;
};

class LoadedObject;

// A program of a loaded object attached where its section says, as the
// object's own loader attaches it (libbpf's auto-attach, a skeleton's
// attach(): tracepoint/CATEGORY/NAME, kprobe/FUNCTION, fentry/FUNCTION,
// ...); detached when this goes, unless it is pinned: then the pin keeps it
// attached after this process (kill -9 included), as ProgramLink's pin
// keeps the entry. XDP and TC sections name no interface: they say nothing
// of where.
class SectionLink {
public:
  // nullopt when `program`'s section does not say where to attach it. A
  // tracepoint's id is read from tracefs, mounted at /sys/kernel/tracing
  // first when it is not mounted anywhere libbpf looks. Errors name the
  // program and its section.
  static Expected<std::optional<SectionLink>> attach(const LoadedObject &object,
                                                     const std::string &program);
  // The link an earlier run pinned at `path`, still attached (the pin keeps
  // it so); nullopt when nothing is pinned there. A pin holding anything
  // but a link is an error naming the path.
  static Expected<std::optional<SectionLink>> openPinned(const std::string &path);

  SectionLink(SectionLink &&other) noexcept : link(std::exchange(other.link, nullptr)) {}
  SectionLink &operator=(SectionLink &&other) noexcept;
  // Detaches, unless the link is pinned.
  ~SectionLink();

  // Whether the link runs `program` of `object` as it is loaded: the same
  // code (the kernel's tag: instructions with map references masked) on
  // the same maps (their kernel ids). Such a link, left by an earlier run
  // on the maps this run reuses, counts each event as the program would:
  // attaching the program beside it would count each event twice.
  bool runs(const LoadedObject &object, const std::string &program) const;
  // Pins the link at `path` (keeping it attached past this process);
  // unpin() removes the pin, so it detaches when this goes.
  Error pin(const std::string &path);
  void unpin();
  // Where it is pinned; "" when it is not.
  std::string pinPath() const;
  // Whether pinPath() still holds this very link (as ProgramLink's).
  bool stillPinned() const;

private:
  explicit SectionLink(bpf_link *link) : link(link) {}
  bpf_link *link = nullptr;
};

// Returns once every packet that was inside a program when it was called
// has left it: XDP and TC programs run inside RCU read-side sections, and
// membarrier(MEMBARRIER_CMD_GLOBAL) waits for an RCU grace period. Called
// after a swap and before closing what the replaced program reaches (its
// program arrays, the guard's fallback array): the kernel empties a program
// array when its last reference goes, and a packet still running the old
// version would then find its tail call's target gone. Where the kernel
// refuses that call (nohz_full), it sleeps 100 ms instead, far longer than
// any packet runs.
void waitForPacketsInFlight();

} // namespace morpheus::bpf
