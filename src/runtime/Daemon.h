// The daemon behind `morpheus run`: one program attached to its ports and
// kept specialized. The loop itself is the caller's; each step(now) does
// what is due at `now`, so the policy (periods, back-off, what is printed,
// reproducers) is testable with a clock of the test's choosing.
//
// Policy:
// - every period: ports are tended (a deleted interface is reported and
//   dropped, re-attached when it comes back), removed pins are made again,
//   a cycle runs and a status line reports the running program's
//   ns/packet;
// - between periods, a cycle runs at once when an update arrived through
//   the control socket or the guard moved (an update from another process);
// - a cycle that fails or is refused by shadow validation backs off: the
//   next cycle waits 2, 4, ... up to 64 periods, so a program the verifier
//   keeps rejecting, or a pass that keeps producing a wrong candidate, does
//   not burn a core or flood the disk;
// - a refused candidate's reproducer is written once per distinct
//   difference, not once per period;
// - on exit (OnExit): keep serving (the default of `morpheus run`): every
//   link is pinned in the pin directory from the moment it is attached, so
//   the data plane outlives the process (also a crash or kill -9); a clean
//   exit swaps the original back in (correct whatever the maps hold, with
//   nobody left to bump the guard on polled changes) and leaves maps and
//   guard pinned for the control plane; a restart with the same pin
//   directory takes over the pinned links (one program per hook, never
//   two). The object's programs attached where their sections say (a
//   tracepoint feeding the entry's maps) are pinned and taken over alike,
//   so they run while the entry does, once per event. Or detach: links
//   detached, every pin this run made removed. Or, when the next Morpheus
//   is about to take over (handOver), leave the data plane exactly as it
//   is: no swap at all.
#pragma once

#include "backend/bpf/ProgramLink.h"
#include "backend/bpf/XdpDispatcher.h"
#include "runtime/ControlServer.h"
#include "runtime/Exploration.h"
#include "runtime/Optimizer.h"
#include "support/CacheDirectory.h"
#include "support/FileDescriptor.h"
#include "support/Log.h"

#include <llvm/Support/raw_ostream.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::runtime {

// Timed phases for the JSON log: [{"phase": ..., "ms": ...}, ...] in order.
nlohmann::json phasesJson(const std::vector<core::BuildPhase> &phases);

// What becomes of the data plane when the daemon goes away.
enum class OnExit {
  KeepServing, // links pinned; the original left attached; pins kept
  Detach,      // links detached; the pins this run made removed
  // KeepServing for a successor (`morpheus daemon --take-over`): links and
  // pins kept, the running version left attached (an adopted program's
  // trampoline left on the hook), so the data plane is not slowed while
  // the next Morpheus starts and takes the pinned links over.
  HandOver,
};

struct DaemonOptions {
  // The program's name when one process runs several (`morpheus daemon`):
  // every log line carries it. "" for `morpheus run`.
  std::string name;
  OptimizerOptions optimizer;
  std::vector<std::string> ifaces; // at least one, unless adopting
  // Adopt the XDP or TC program another loader attached here (an
  // interface's XDP hook or IFACE:ingress|egress for tcx, in `netns`; a
  // program id; a pinned link: bpf::Adoption) instead of
  // attaching to `ifaces`. On exit (either OnExit) the hook goes back to
  // the owner's program; a crash or kill -9 leaves the owner's program
  // serving through the trampoline, and a restart adopts it again.
  std::string adopt;
  // Adopt even a program whose tail calls can reach the kernel's limit
  // (bpf::TailCallReach): the trampoline's tail call then leaves such a
  // chain one stage fewer, which the log says. Off: such a program is
  // not adopted, and when the owner's program arrays come to hold such a
  // chain later (checked every period), the hook goes back to the owner's
  // program and the daemon stops.
  bool acceptOneTailCallFewer = false;
  // How the slots of an XDP dispatcher hold their programs, and where its
  // pins are, for adopting a program in one (bpf::SlotBinding): libxdp's.
  // Test-only otherwise: the kernel tests' dispatcher of tail calls, on a
  // kernel that refuses libxdp's extensions.
  std::shared_ptr<const bpf::SlotBinding> dispatcherSlots =
      std::make_shared<const bpf::LibxdpSlots>();
  std::string netns;               // of the interfaces; "" = ours
  bpf::XdpMode mode = bpf::XdpMode::Native;             // XDP programs
  bpf::TcDirection tcDirection = bpf::TcDirection::Ingress; // TC programs
  // KeepServing needs optimizer.pinDir (the links are pinned there).
  OnExit onExit = OnExit::Detach;
  std::chrono::microseconds period = std::chrono::seconds(1);
  std::string socketPath;            // control socket; "" = none
  // Refused candidates' reproducers (they hold map contents): a private
  // directory (support/Files: created 0700; one open to others, or not
  // ours, is refused at start), each file 0600.
  std::string reproducerDir = stateDirectory() + "/reproducers";
  bool quiet = false; // print only installs, failures and refusals
  // Text lines for people, or one JSON object a line (`run --log-format`).
  LogFormat logFormat = LogFormat::Text;
  LogLevel logLevel = LogLevel::Info; // `morpheus -v/--quiet`
  // Choosing by measurement (`run --explore`): after the first install,
  // the versions the model was close on take turns with the generic
  // program on the live ports and the measured best is kept
  // (runtime/Exploration). Again after a change when the generic program
  // was chosen, when a cycle's traffic moved the hot keys the explored
  // version was built for (core::hotKeysMoved), and every explore.every:
  // the model's version built afresh, then explored. trials 0: off.
  ExploreOptions explore;
};

class Daemon {
public:
  using Clock = std::chrono::steady_clock;

  // Claims the control socket (a run refused its socket loads and attaches
  // nothing), loads the program, attaches it to every interface, serves the
  // socket.
  // Records (cycles, status, ports) go to `out`, problems to `errors`, in
  // options.logFormat.
  static Expected<std::unique_ptr<Daemon>> start(const std::string &path,
                                                 DaemonOptions options,
                                                 llvm::raw_ostream &out,
                                                 llvm::raw_ostream &errors);
  ~Daemon();

  // What a step at `now` would do, for a caller that schedules several
  // daemons: nothing, the periodic work (tending ports, maybe a cycle), or
  // a cycle for a change (an update through Morpheus, a bumped guard; with
  // the periodic work when the period is due as well).
  enum class Work { None, Periodic, Change };
  Work pending(Clock::time_point now);
  // When pending() next becomes more than None (a guard bumped by another
  // process shows only when polled).
  Clock::time_point wakeAt();
  // Does what is due at `now`; returns the report of the cycle it ran.
  std::optional<core::CycleReport> step(Clock::time_point now);
  // Sleeps until the next period or a notifyChange(), at most `limit`.
  void waitForWork(std::chrono::milliseconds limit);
  // Asks for a cycle as soon as the back-off allows (thread-safe).
  void notifyChange();

  Optimizer &optimizer() { return *opt; }
  // "XDP (native) on eth0, XDP (native) on eth1", "tcx ingress on eth0"
  std::string attachedTo() const;
  // Per map, one line for operators saying which guarantee holds for its
  // updates: what the program writes is never specialized (always live;
  // the other keys and bytes of a map it writes only in part may be);
  // for one it only reads, updates through Morpheus (the guard) are seen
  // by the next packet, other writers' within a period plus a cycle; one
  // kept generic by policy is never specialized, so every writer's update
  // is seen by the next packet.
  std::vector<std::string> updateGuarantees() const;
  // The adopted program's owner replaced or detached it (the hook is left
  // as the owner set it), or its program arrays now hold a chain of tail
  // calls the trampoline would cut (the hook was given back): nothing more
  // to do, the caller exits.
  bool ownerMovedOn() const { return ownerGone; }
  // What this process leaves behind if it exits now, for the operator's
  // last line: under KeepServing checked against the pins as they are (a
  // pin removed, or the bpffs under the pin directory unmounted, is said:
  // a link no pin holds detaches as the process exits).
  struct ExitNote {
    nlohmann::json fields; // the "stopping" record's
    std::string text;      // one line
  };
  ExitNote exitNote() const;
  // From now on the exit leaves the data plane as it is for the next
  // Morpheus (OnExit::HandOver). A daemon that detaches on exit keeps
  // doing so: none of its links is pinned, so none can be taken over.
  void handOver();
  // The running program's cost over the last status period (kernel
  // bpf_stats), and the last figure of each version kind: the generic
  // program's and the specialized one's.
  struct RunTime {
    uint64_t period = 0;           // status periods measured so far (0: none yet)
    uint64_t packets = 0;          // in the last period
    bool specialized = false;      // what served at the end of the last period
    std::optional<double> genericNsPerPacket, specializedNsPerPacket;
  };
  const RunTime &runTime() const { return lastRunTime; }
  bool adopted() const { return adoption != nullptr; }
  // Cycles in a row that failed or were refused (0 after a good one).
  unsigned consecutiveFailures() const { return failures; }
  // The earliest a cycle may run (later than now while backing off).
  Clock::time_point nextCycleAt() const { return nextCycle; }
  // Whether an exploration (DaemonOptions::explore) is under way; whether
  // the last one chose the generic program, which then serves with no
  // cycle until a change arrives.
  bool exploring() const { return exploration.has_value(); }
  bool servesGenericByChoice() const { return genericChosen; }

private:
  // One --iface port; `link` is empty while the interface is gone (deleting
  // an interface detaches its link for good).
  struct Port {
    std::string iface;
    std::optional<bpf::ProgramLink> link;
    std::string attachError; // the last re-attach failure, reported once
  };

  Daemon(DaemonOptions options, llvm::raw_ostream &out, llvm::raw_ostream &errors)
      : options(std::move(options)), log(out, errors, this->options.logLevel,
                                         this->options.logFormat, "morpheus", this->options.name) {}
  Error installOnPorts(int programFd);
  bpf::AttachPoint attachPoint(const std::string &iface) const;
  // Where the link of `iface` is pinned (KeepServing), or where an earlier
  // run left it; "" without a pin directory.
  std::string linkPin(const std::string &iface) const;
  // Attaches the running program to `iface`, or takes over the link an
  // earlier run pinned there (under Detach, unpinned so it goes with us);
  // pins a new link under KeepServing.
  Expected<bpf::ProgramLink> attachPort(const std::string &iface, int programFd);
  void reportLost(Port &lost);
  void tendPorts();
  void repairPins();
  void report(const core::CycleReport &cycle);
  // The program the kernel charges for this program's packets (bpf_stats
  // count only the program a hook runs, never a tail call's target): ours
  // when attached directly; an adopted program's trampoline, whose run time
  // is the version's plus one tail call.
  int chargedFd() const;
  // After the first cycle: the version an earlier run left serving (kept
  // by attachPort, or by an adopted program's trampoline) has been replaced
  // by ours, or, when the cycle installed nothing, gives way to our
  // original (the owner's program when adopted: this run cannot tell when
  // that version's tables go stale); its fallback array is let go.
  void endEarlierVersion(const core::CycleReport &cycle);
  // An adopted program's installed version serves on after this process
  // exactly while it depends on nothing polled
  // (Optimizer::installedServesUnattended, bpf::Adoption::keepServed).
  void syncServedPin();
  // Measures the period's cost (runTime) and prints it unless quiet.
  void printStatus();
  // An update arrived through Morpheus, or the guard moved under the
  // installed version.
  bool changeArrived();
  // After `cycle` installed the model's version: explores the versions it
  // was close on, if there are any (DaemonOptions::explore).
  void startExploration(const core::CycleReport &cycle, Clock::time_point now);
  // The exploration's work at `now`; ends it when it is over.
  void stepExploration(Clock::time_point now);
  // The file holding the reproducer of this difference, written if new.
  std::string keepReproducer(const core::CycleReport &cycle);

  // Attaches the object's other programs where their sections say (a
  // tracepoint feeding the entry's maps), as the object's own loader
  // would: they run the original's code, on the maps every version shares,
  // for as long as the entry is attached: their links are pinned as the
  // ports' are (not under Detach), and a link an earlier run pinned is
  // taken over (takeOverSectionLink). Says which, and which other programs
  // it leaves to the user (their sections do not say where, and no
  // program array of the source holds them).
  Error attachBySection();
  // Where the link of `program`, attached by its section, is pinned; ""
  // without a pin directory.
  std::string sectionLinkPin(const std::string &program) const;
  // Takes over the link an earlier run pinned for `program` (true) when it
  // runs the same code on the same maps (SectionLink::runs), so each event
  // still runs it once; under Detach unpinned, so it goes with us. One
  // running other code or maps is detached and unpinned (false: the
  // caller attaches ours), as is nothing pinned (false).
  Expected<bool> takeOverSectionLink(const std::string &program, const std::string &type);
  Error startAdoption(const std::string &path);
  // Whether the adopted program's chains of tail calls, as its arrays hold
  // them now, can reach the kernel's limit; if so the hook goes back to
  // the owner's program and the daemon stops (ownerGone), saying why.
  bool chainReachesTheLimit();

  DaemonOptions options;
  Log log; // on the caller's streams
  std::unique_ptr<bpf::Adoption> adoption; // outlives the optimizer using it
  bool ownerGone = false;
  std::unique_ptr<Optimizer> opt;
  std::vector<Port> ports;
  // attachBySection's, by program.
  std::vector<std::pair<std::string, bpf::SectionLink>> sectionLinks;
  bpf::ProgramType programType = bpf::ProgramType::Xdp;
  std::unique_ptr<ControlServer> server;
  // The fallback array an earlier run pinned (opened before our optimizer
  // pins its own there, so the kernel keeps its slots), while a version
  // that run left serving may still serve (Optimizer::canServeOn): until
  // the first cycle ends. `earlierVersionServes`: some port kept it.
  FileDescriptor earlierFallback;
  bool earlierVersionServes = false;

  std::mutex mutex;
  std::condition_variable wake;
  bool changed = false; // under `mutex`

  Clock::time_point nextPeriod, nextCycle;
  unsigned failures = 0;
  uint64_t lastCycle = 0;
  std::vector<std::string> pinNotes; // printed when they change
  std::set<std::string> reproducers; // written this run, by difference key
  // Run counters of the program running at the last status line.
  bpf::ProgramRunStats statsBase;
  RunTime lastRunTime;
  std::optional<Exploration> exploration;
  bool explored = false;     // the model's version was explored (or had nothing to explore)
  // When the last exploration began, and the hot keys its version was
  // built for (per profiled site): a cycle whose traffic moved them
  // (core::hotKeysMoved), or ExploreOptions::every, sets `reexploreWhy`,
  // and the next cycle builds the model's version again and explores it.
  Clock::time_point lastExploration;
  std::map<unsigned, std::vector<core::Bytes>> exploredHotKeys;
  std::string reexploreWhy;
  bool genericChosen = false; // the exploration chose the generic program
};

// Daemon::updateGuarantees for `spec` run with `period`, adopted (the
// owner writes its maps) or not.
std::vector<std::string> updateGuarantees(const bpf::ProgramSpec &spec,
                                          std::chrono::nanoseconds period, bool adopted);

} // namespace morpheus::runtime
