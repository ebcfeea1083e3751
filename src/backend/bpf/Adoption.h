// Adopting an XDP or TC program another loader attached (a load balancer's
// own server, xdp-loader, bpftool, a CNI agent through tcx): Morpheus joins
// it instead of replacing it.
//
// The owner's hook (its bpf_link: XDP or tcx; or an XDP netlink attachment)
// is switched once, with BPF_F_REPLACE against the owner's program so that
// a change the owner makes at the same moment is never overwritten, to a
// trampoline of the owner's program type:
//
//   tail call slot 0 of the Morpheus array   (the specialized version)
//   tail call slot 0 of the owner array      (the owner's program)
//   return XDP_ABORTED / TC_ACT_SHOT         (neither could be reached)
//
// A packet the Morpheus array does not take runs the owner's program: the
// last line is reached only if someone empties the pinned owner array by
// hand (a tail call at a program's entry fails for no other reason).
//
// The Morpheus array is held by this process's fd alone while the version
// in it depends on what Morpheus polls (the owner's maps, the stages of its
// program arrays): the kernel empties a program array when its last user
// reference goes (exit, crash, kill -9), so from then on every packet runs
// the owner's program through the owner array, which is pinned in the pin
// directory. The data plane is never detached, and never left on a
// specialized version that nobody guards. A version that depends on
// nothing polled (every map it reads kept generic, no stage of its own:
// Optimizer::installedServesUnattended) needs nobody: the daemon pins the
// array and the fallback array that version falls back through
// (keepServed), so it serves on after kill -9 and across a handover, and
// the next run lets it serve until its own first cycle. A clean exit
// switches the hook back to the owner's program (BPF_F_REPLACE against the
// trampoline) and removes the pins; a restart finds its trampoline on the
// hook (by name, and the owner array pinned where it left it) and takes it
// over again.
//
// The trampoline's tail call is one of the kernel's tail calls per packet
// (MAX_TAIL_CALL_CNT, 33): a chain of the owner's that can make that many
// runs one stage fewer once the hook is taken. What the owner's program
// arrays hold says how long its chains can be (TailCallReach); the daemon
// declines such chains unless told to accept it, and says so.
//
// A program in a slot of libxdp's dispatcher (XdpDispatcher.h) is an
// extension of a function of the dispatcher, and an extension can sit in
// no program array: there the hook is the slot, and the switch is a new
// dispatcher revision in which the slot holds the trampoline, itself an
// extension (it inherits the dispatcher's program type and attach type, so
// its arrays take the XDP versions), every other slot carried over;
// giving the hook back is a revision with the owner's program in the slot
// again. The owner array then holds Morpheus's own build of the source on
// the owner's maps, with the owner's constants (the original every version
// falls back to), which serves after a kill -9 until the next run; the
// owner's program is pinned beside it (owner_slot_program) for that run to
// give back. All of it needs a kernel that loads extensions
// (probeExtensions()), and says why when it does not.
//
// A TC program is adopted only through its tcx link: a classifier attached
// with `tc filter` (cls_bpf, netlink) is refused, because netlink replaces
// a filter whatever program it runs at that moment (no BPF_F_REPLACE), so
// the switch back could overwrite an owner's upgrade made meanwhile.
#pragma once

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/ProgramType.h"
#include "backend/bpf/XdpDispatcher.h"
#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

struct bpf_map_info;

namespace morpheus::bpf {

// The trampoline's program name: what a restart recognises on the hook.
inline constexpr const char *TrampolineName = "morpheus_tramp";

// How many tail calls in a row the adopted program can make, as the
// programs its program arrays hold (when Adoption::adopt looked) say: the
// longest chain through them, or a cycle, which only the kernel's limit
// ends (whether the program's own logic ends it earlier cannot be told
// from outside). Any program a program array holds counts as reachable
// from every program that uses the array (the slot may be computed).
struct TailCallReach {
  bool cycle = false;
  unsigned longest = 0; // tail calls in the longest chain, without a cycle
  // The programs along that chain (or into and once around the cycle), by
  // name, the owner's first.
  std::vector<std::string> chain;
  // Whether a chain can make the kernel's limit of tail calls, so that the
  // trampoline's own tail call leaves its last stage unrun.
  bool reachesLimit() const { return cycle || longest + 1 > KernelTailCallLimit; }
  // "chain_entry -> chain_stage -> chain_stage (a cycle)"
  std::string describe() const;
};

class Adoption {
public:
  // Finds the program at `target`: an interface's XDP hook ("IFACE", in
  // `netns`, "" = ours; when it runs a libxdp dispatcher, its one slot),
  // a slot of the libxdp dispatcher it runs ("IFACE/NAME" by the slot
  // program's name, "IFACE/PRIORITY" by its run priority), its tcx hook
  // ("IFACE:ingress", "IFACE:egress"; an interface name never holds ':' or
  // '/'), a pinned link (a path under bpffs: an XDP or tcx link, or a
  // dispatcher slot's) or a program id run by an XDP or tcx link or held
  // by a libxdp dispatcher's slot (the one way to name one of several
  // programs of a tcx hook; after a killed run, the link or slot running
  // the trampoline it left, whose owner array pinned at `pinDir` holds that
  // program), and collects its maps (and those of the programs its program
  // arrays hold). Nothing is changed yet. When the hook runs a trampoline an
  // earlier run left (its owner array pinned at `pinDir`/owner_program),
  // the owner is the program that array holds (or, in a dispatcher slot,
  // the one pinned at `pinDir`/owner_slot_program). The trampoline is
  // loaded (not yet on the hook), which tells the owner's expected attach
  // type. `slots` says how a dispatcher's slots hold their programs and
  // where their pins are (LibxdpSlots, but for a test's own dispatcher).
  static Expected<std::unique_ptr<Adoption>> adopt(const std::string &target,
                                                   const std::string &netns,
                                                   const std::string &pinDir,
                                                   std::shared_ptr<const SlotBinding> slots);
  // Finds the slot of the dispatcher `hook` runs that holds program
  // `programId` (or, after a killed run, the trampoline it left in the
  // slot of that program), as adopt() does for a libxdp dispatcher.
  static Expected<std::unique_ptr<Adoption>>
  adoptSlot(std::unique_ptr<DispatcherHook> hook, uint32_t programId, const std::string &pinDir);
  ~Adoption(); // the Morpheus array goes with its fd unless kept: the owner serves

  // The owner's maps under the names `declared` (the source's maps) gives
  // them, matched by name (a kernel name is the declared one cut to 15
  // characters; internal maps carry the owner's object name before the
  // section, `lb_obj.rodata`). A declared map the owner does not have is
  // refused by name; layouts are checked field by field by the load that
  // uses them (LoadOptions::maps).
  Expected<std::map<std::string, int>>
  mapsFor(const std::map<std::string, MapLayout> &declared) const;

  // Switches the hook to the trampoline (BPF_F_REPLACE against the owner's
  // program), the owner array pinned first; nothing to do on a re-adoption.
  // `standIn` is what the owner array holds when the owner's program cannot
  // be tail-called (ownerIsExtension()): Morpheus's original, loaded on
  // the owner's maps.
  Error takeHook(int standIn = -1);
  // Whether the owner's program is an extension in a dispatcher slot,
  // which no program array takes.
  bool ownerIsExtension() const;

  // The owner program's expected attach type, which every program Morpheus
  // puts in a program array beside it must have (LoadOptions::
  // expectedAttachType), and its kernel program type (BPF_PROG_TYPE_*).
  uint32_t ownerAttachType() const { return ownerAttach; }
  uint32_t kernelProgramType() const;

  ProgramType programType() const { return type; }
  int ownerProgramFd() const { return ownerProgram; }
  uint32_t ownerProgramId() const { return ownerId; }
  // The specialized version every packet now runs (slot 0 of the Morpheus
  // array); -1 empties the slot (the owner's program serves).
  Error serve(int programFd);
  // The program the Morpheus array holds now (0: none, the owner serves).
  uint32_t servedProgramId() const;
  // The version in the Morpheus array serves on after this process (exit,
  // crash, kill -9, a handover): the array is pinned in the pin directory,
  // with `fallbackFd`, the program array that version falls back through.
  // Only for a version whose answers depend on nothing Morpheus polls: no
  // one polls for it any more (Optimizer::installedServesUnattended).
  Error keepServed(int fallbackFd);
  // The Morpheus array goes with this process again (its pin removed; the
  // fallback array's stays until replaced or restore()): called before
  // anything else is served in it.
  void releaseServed();
  bool servedKept() const { return keptServing; }
  // A re-adoption that found the version an earlier run kept serving
  // (keepServed) still in the Morpheus array: the array it falls back
  // through, opened (the caller holds it while that version may serve;
  // this run's keepServed replaces its pin). Invalid otherwise: the
  // re-adoption emptied the array and the owner's program serves.
  FileDescriptor takeEarlierFallback() { return std::move(earlierFallback); }
  // The hook no longer runs the trampoline: the owner replaced or detached
  // its program (or the interface went away). Morpheus must stop.
  bool ownerMovedOn() const;
  // Hook back to the owner's program (BPF_F_REPLACE against the
  // trampoline) and the pins removed (owner array, a version kept
  // serving). The hook is not touched when the owner moved on.
  Error restore();
  // "XDP link on eth0 in namespace ns1, program 'lb' (id 40)",
  // "tcx ingress link on eth0, program 'classify' (id 41)",
  // "slot 1 (priority 20) of the XDP dispatcher on eth0, program 'fw' (id 42)"
  std::string describe() const;
  bool readopted() const { return restarted; }
  // How far the owner's tail calls could go when adopt() looked, and as
  // its program arrays hold now (the owner may put other programs there).
  const TailCallReach &tailCalls() const { return reach; }
  Expected<TailCallReach> tailCallsNow() const;
  uint32_t trampolineId() const;
  // The trampoline on the hook: what the kernel's run-time statistics
  // charge for every packet (tail-call targets are never charged).
  int trampolineFd() const { return trampoline; }
  const std::string &ownerArrayPin() const { return ownerPin; }

private:
  Adoption() = default;
  Error findHook(const std::string &target, const std::string &pinDir);
  Error findTcxHook(const std::string &target, const std::string &direction);
  // The slot of the dispatcher `hook` runs that `choose` picks (from the
  // dispatcher read), its program the hook's.
  Error findSlot(std::unique_ptr<DispatcherHook> hook, const std::string &pinDir,
                 llvm::function_ref<Expected<const DispatcherSlot *>(const Dispatcher &)> choose);
  Error findSlotById(uint32_t programId, const std::string &pinDir);
  // The hook of the dispatcher interface `name` (in `netns`) runs.
  std::unique_ptr<DispatcherHook> dispatcherHookOn(const std::string &name) const;
  Error collectMaps();
  // Walks the owner's program and every program its program arrays hold,
  // transitively, handing `keepMap` each map one of them uses, with an fd
  // it keeps (true) or leaves to be closed; says how far the chains of
  // tail calls through them go.
  Expected<TailCallReach>
  walkPrograms(llvm::function_ref<bool(int mapFd, const bpf_map_info &info)> keepMap) const;
  // What adopt() does once the hook is found: the owner recognised, its
  // maps collected, the trampoline loaded.
  Error prepare(const std::string &pinDir);
  Error recogniseOwner(const std::string &pinDir);
  Error prepareTrampoline();
  Expected<int> loadTrampoline(); // on the two arrays; sets ownerAttach
  // The expected attach type of the programs the Morpheus array (empty)
  // takes: the trampoline's, an extension's inherited from its target.
  Expected<uint32_t> arrayAttachType() const;
  Error switchHook(int from, int to);
  uint32_t hookProgramId() const;
  // Re-adoption: whether the earlier run kept the version in our Morpheus
  // array serving (its pin holds this array, and the fallback array's pin
  // opens: earlierFallback).
  bool earlierVersionKept();
  // Removes the pins of a version kept serving (and its fallback array).
  void unpinServed();

  std::string netns;
  ProgramType type = ProgramType::Xdp;
  uint32_t tcxAttach = 0; // TC: the tcx link's attach type (its direction)
  int ifindex = 0;
  std::string iface;      // as given, or "ifindex N"
  int link = -1;          // the owner's link; -1: a netlink attachment
  uint32_t xdpFlags = 0;  // netlink attachments: the mode it was attached in
  int ownerProgram = -1;
  uint32_t ownerId = 0;
  std::string ownerName;
  int hookProgram = -1;   // what the hook ran when found (owner, or our trampoline)
  // How dispatchers' slots hold their programs (adopt()'s `slots`; none
  // for adoptSlot(), whose hook has its own).
  std::shared_ptr<const SlotBinding> dispatcherSlots;
  // A dispatcher slot: the hook, and the slot as found (for describe()).
  std::unique_ptr<DispatcherHook> slotHook;
  unsigned slotIndex = 0, slotPriority = 0;
  std::string ownerSlotPin;             // the owner's extension, pinned while adopted
  std::map<std::string, int> ownerMaps; // kernel name -> fd
  int trampoline = -1, morpheusArray = -1, ownerArray = -1;
  std::string ownerPin;
  std::string servedPin, servedFallbackPin; // keepServed's
  bool keptServing = false;
  FileDescriptor earlierFallback;
  uint32_t ownerAttach = 0;
  TailCallReach reach;
  bool restarted = false;
  bool hookTaken = false;
  bool restored = false;
};

} // namespace morpheus::bpf
