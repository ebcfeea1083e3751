// libxdp's multi-program XDP dispatcher, as its protocol describes it
// (xdp-tools, lib/libxdp/protocol.org): how Morpheus reads the programs of
// its slots and swaps in a new revision of it in which one slot holds
// another program, so that libxdp, xdp-loader and whatever else follows
// the protocol keep seeing a dispatcher of their own.
//
// The protocol, as far as it concerns a program in a slot:
// - A dispatcher is an XDP program named `xdp_dispatcher` whose one map is
//   its frozen .rodata: `struct xdp_dispatcher_config` (magic 236, the
//   dispatcher version, how many slots are enabled, whether it runs with
//   fragments, then per slot the chain-call actions, the run priority and
//   the program's flags; version 3 adds whether it is bound to a device).
//   Its main function calls prog0() .. prog(N-1) in order (priority order,
//   decided when the revision was built) and returns a slot's verdict
//   unless that verdict's bit is in the slot's chain-call actions; bit 31,
//   what an empty slot returns, is always among them. A dispatcher with a
//   single slot has its main function replaced instead of prog0.
// - Each slot's program is an extension (freplace) of that function,
//   attached through a link. A revision is never changed in place: a new
//   dispatcher is loaded with the new configuration, every slot's program
//   attached to it as well (an extension may be attached to several
//   targets), and it replaces the old one on the interface atomically
//   (netlink with XDP_FLAGS_REPLACE against the old one, or an update of
//   the XDP link that runs it); then the old revision is dismantled.
// - Pins and lock: under the state directory (bpffs/xdp, LIBXDP_BPFFS
//   overriding bpffs) each revision has `dispatch-IFINDEX-ID/` holding
//   `progN-prog` and `progN-link` per slot; every reader and writer holds an
//   exclusive flock() on the state directory while it reads or changes
//   them. The new revision is pinned before it is attached (a crash in
//   between leaves a complete, unattached revision, never an attached one
//   whose links could go), the old one unpinned after, once every packet
//   that was inside the old one has left it (unpinning detaches its
//   slots' programs, and a packet still in it would then pass over them).
//
// What this file does not decide is how a slot holds its program: libxdp's
// dispatchers bind extensions through links (LibxdpSlots, which needs
// extension programs: Extension.h), and the kernel tests bind plain XDP
// programs into a dispatcher-shaped program of theirs made of tail calls,
// which a kernel that refuses extensions still runs. Both go through the
// same reading, configuration, pinning, locking and swapping here.
//
// Morpheus keeps the configuration as it finds it: slot order, priorities,
// chain-call actions and flags are carried over, so a packet goes through
// the same slots in the same order and stops at the same verdicts; only
// the program of one slot changes.
#pragma once

#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <llvm/ADT/ArrayRef.h>

#include <array>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::bpf {

// Slots a dispatcher has (MAX_DISPATCHER_ACTIONS).
inline constexpr unsigned DispatcherSlots = 10;
// What an empty slot returns; always among a slot's chain-call actions.
inline constexpr unsigned DispatcherContinue = 31;
inline constexpr uint8_t DispatcherMagic = 236;
inline constexpr const char *DispatcherName = "xdp_dispatcher";

// A dispatcher's configuration (its .rodata): versions 2 and 3 of the
// protocol (libxdp 1.2 on), which start with the magic byte.
struct DispatcherConfig {
  uint8_t version = 2;
  uint8_t slotsEnabled = 0;
  bool frags = false;
  bool deviceBound = false; // version 3
  // Per slot: the verdicts (a bit each) that go on to the next slot, the
  // run priority, the program's load flags (BPF_F_XDP_HAS_FRAGS).
  std::array<uint32_t, DispatcherSlots> chainCallActions{}, runPriorities{}, programFlags{};

  // The config map's value, checked: the magic, a version this knows, a
  // size that holds it, at most DispatcherSlots slots.
  static Expected<DispatcherConfig> parse(llvm::ArrayRef<uint8_t> value);
  // The value in this version's layout, zero-padded to `size` bytes (the
  // .rodata of the object a revision is loaded from).
  std::vector<uint8_t> encode(size_t size) const;
  bool operator==(const DispatcherConfig &) const = default;
};

// The function of a dispatcher that slot `slot` replaces when
// `slotsEnabled` slots are: "progN", or the main function when one is.
std::string slotFunction(unsigned slot, unsigned slotsEnabled);

// One slot of a dispatcher revision, as its pins say.
struct DispatcherSlot {
  unsigned index = 0;
  FileDescriptor program; // `progN-prog`
  uint32_t programId = 0;
  std::string name; // the program's, as the kernel holds it
  uint32_t runPriority = 0;
  uint32_t chainCallActions = 0; // without DispatcherContinue
  uint32_t flags = 0;
};

// How a dispatcher's slots hold their programs, and where its pins live.
class SlotBinding {
public:
  virtual ~SlotBinding() = default;
  // The directory of the dispatchers' pins and of the lock.
  virtual std::string stateDirectory() const = 0;
  // Whether a slot's program is an extension of the slot's function
  // (libxdp), rather than a program of the dispatcher's own type.
  virtual bool slotsAreExtensions() const = 0;
  // A new revision configured by `config`, loaded, attached nowhere.
  virtual Expected<FileDescriptor> loadDispatcher(const DispatcherConfig &config) const = 0;
  // Makes slot `slot` of revision `dispatcher` run `program`; returns
  // what keeps it there, pinned as the slot's `progN-link` (libxdp: the
  // extension's link; a dispatcher of tail calls: a reference to its
  // program array, which the kernel empties when the last one goes).
  virtual Expected<FileDescriptor> bind(int dispatcher, const DispatcherConfig &config,
                                        unsigned slot, int program) const = 0;
};

// libxdp's dispatchers: programs bound as extensions through links, each
// revision loaded from libxdp's own dispatcher object (xdp-dispatcher.o,
// found where libxdp looks: LIBXDP_OBJECT_PATH, else the distribution's
// BPF object directories) of the version of the dispatcher it replaces,
// the state directory bpffs/xdp (LIBXDP_BPFFS naming another bpffs).
class LibxdpSlots final : public SlotBinding {
public:
  std::string stateDirectory() const override;
  bool slotsAreExtensions() const override { return true; }
  Expected<FileDescriptor> loadDispatcher(const DispatcherConfig &config) const override;
  Expected<FileDescriptor> bind(int dispatcher, const DispatcherConfig &config, unsigned slot,
                                int program) const override;
};

// The protocol's exclusive lock on a state directory, held while it lives.
class DispatcherLock {
public:
  static Expected<DispatcherLock> take(const std::string &stateDirectory);

private:
  explicit DispatcherLock(FileDescriptor directory) : directory(std::move(directory)) {}
  FileDescriptor directory; // closing it releases the lock
};

// A dispatcher revision an interface runs, and its slots.
struct Dispatcher {
  FileDescriptor program;
  uint32_t id = 0;
  int ifindex = 0;
  DispatcherConfig config;
  std::vector<DispatcherSlot> slots;
  std::string pins; // STATE/dispatch-IFINDEX-ID

  // The slot holding program `programId`, or nullptr.
  const DispatcherSlot *slotHolding(uint32_t programId) const;
  // "slot 1 (priority 20, chain on XDP_PASS): 'xdp_filter' (id 41)", one
  // line per slot.
  std::vector<std::string> describeSlots() const;
};

// Whether program `programId` is a dispatcher of this protocol: its name,
// and one frozen map holding a configuration (its version checked).
Expected<std::optional<DispatcherConfig>> dispatcherConfigOf(uint32_t programId);

// An interface's XDP hook that runs a dispatcher, and the revisions that
// replace one slot's program there.
class DispatcherHook {
public:
  DispatcherHook(std::shared_ptr<const SlotBinding> binding, std::string iface, std::string netns);

  // The dispatcher the interface runs now, its slots read from its pins
  // under the lock; nullopt when the hook runs no dispatcher (nothing, or
  // a single program).
  Expected<std::optional<Dispatcher>> read() const;
  // Builds a revision of the dispatcher the interface runs now in which
  // the slot holding program `fromId` holds `to` and every other slot its
  // program, with the configuration carried over; pins it, swaps it in
  // atomically and unpins the revision it replaced, all under the lock.
  // When another loader changed the dispatcher in between (the atomic
  // replace finds another program), starts again from reading, twice.
  Error replace(uint32_t fromId, int to);
  // Whether some slot of the dispatcher the interface runs holds program
  // `programId`.
  bool runs(uint32_t programId) const;

  const SlotBinding &slots() const { return *binding; }
  const std::string &interface() const { return iface; }
  const std::string &namespaceName() const { return netns; }

private:
  Expected<std::optional<Dispatcher>> readLocked() const;
  Expected<int> ifindex() const;
  Error swap(const Dispatcher &old, int revision) const;

  std::shared_ptr<const SlotBinding> binding;
  std::string iface, netns;
};

} // namespace morpheus::bpf
