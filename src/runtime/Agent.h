// The node agent behind `morpheus daemon`: every program of a node, each a
// Daemon of its own (its pins, links or adoption, its period and back-off),
// driven by one loop thread and served by one control socket.
//
// Why one process for all: a node runs tens of programs, and the operator
// wants one thing to deploy, restart and scrape. Why each program still a
// Daemon: what `morpheus run` guarantees for one program (pins that outlive
// the process, take-over after kill -9, adoption handed back on exit,
// back-off of failing cycles) then holds for each, with no second copy of
// that policy.
//
// Isolation: a program whose start fails (source that does not compile, a
// vanished interface, a verifier refusal) stays in the table as failed and
// is retried with back-off (2, 4, ... up to 64 s); a cycle that fails costs
// that program the cycle (the compile runs under LLVM's crash recovery,
// bpf::compileToObject), never the agent or another program.
//
// Changes: apply() brings the running set to a new configuration; programs
// whose configuration is unchanged are not touched (same Daemon, same
// links), removed ones stop as `run` stops (the original swapped back in,
// pins kept; an adopted program's hook given back), changed ones stop and
// start again from their pins.
//
// Handover (an upgrade, `morpheus daemon --take-over`): the next agent asks
// over the socket ({"op":"handover"}); the loop sees handoverAsked() and
// calls handOver(), which stops every program leaving its data plane
// exactly as it is (Daemon::handOver: pinned links keep the running
// version, adopted hooks keep the trampoline), and only then releases the
// socket, whose claim the next agent waits for (runtime/Handover).
//
// History: per program, a sample of its ns/packet at every status period
// and each install (runtime/AgentHistory), kept across its restarts and
// dropped with it, served by the socket's "history" op.
//
// Budget: cycles of all programs share `cpuBudget` of one core (measured as
// the loop thread's CPU time): when it is spent, due programs wait. Who
// goes first: a program the budget deferred, before any that was not (the
// longest waiting first), so that none starves: once deferred, a program
// waits for at most one turn of each program deferred before it, however
// busy or often changed the others are. Among the rest, those with a
// change waiting (an update, a bumped guard) first, then the busiest
// (packets in their last status period), then the one whose last turn was
// the longest ago (so that programs alike take turns).
#pragma once

#include "runtime/AgentHistory.h"
#include "runtime/ControlServer.h"
#include "runtime/Daemon.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <shared_mutex>
#include <string>
#include <vector>

namespace morpheus::runtime {

// One program as the configuration gives it.
struct AgentProgram {
  std::string name; // unique in the agent: requests, log lines, metrics
  std::string path; // its source, as `morpheus run` takes it
  DaemonOptions options;
  // What the configuration said of it, so that a reload restarts exactly
  // the programs whose entry changed.
  std::string fingerprint;
};

// What apply() did, by program name.
struct AgentChanges {
  std::vector<std::string> started, restarted, stopped, unchanged;
  // Programs that did not start (kept, retried with back-off), with why.
  std::map<std::string, std::string> failed;
  nlohmann::json toJson() const;
  std::string describe() const; // one line
};

struct AgentOptions {
  std::string socketPath; // the control socket; "" = none
  // Ask the agent serving socketPath to hand over, and claim the socket
  // once it has (takeOverControlSocket); off: such a socket is refused.
  bool takeOver = false;
  // Share of one core the cycles of all programs may take (0 = no limit).
  double cpuBudget = 0;
  // Re-reads the configuration, for {"op":"reload"} and SIGHUP.
  std::function<Expected<std::vector<AgentProgram>>()> loadConfiguration;
  LogFormat logFormat = LogFormat::Text;
  LogLevel logLevel = LogLevel::Info;
  // Status periods each program's history keeps.
  size_t historyCapacity = ProgramHistory::DefaultCapacity;
  // Where cycles, starts, guard bumps and budget waits are counted, from
  // the first start on (`morpheus daemon --metrics-address`); it outlives
  // the agent. None: not counted.
  class AgentMetrics *metrics = nullptr;
};

// A program's state for status and metrics.
struct AgentProgramState {
  std::string name;
  enum class State { Serving, Failed, Stopped } state = State::Failed;
  std::string detail;     // why it failed or stopped; where it is attached
  std::string attachedTo; // "XDP (native) on eth0", "adopted ..."
  uint64_t installedVersion = 0;
  uint64_t guardVersion = 0;
  // Bumps of the guard seen since the agent started the program (the
  // version's rises, whoever bumped it: this agent's socket, the client
  // library, a poll that found an owner's write).
  uint64_t guardBumps = 0;
  std::optional<core::CycleReport> lastCycle;
  std::map<core::CycleOutcome, uint64_t> cyclesByOutcome;
  uint64_t cyclesDeferred = 0; // waited for the CPU budget
  uint64_t starts = 0;         // successful starts (restarts after failure count)
  Daemon::RunTime runTime;
  // Translated instructions of the original, and of the installed version
  // with its lookup sites specialized or kept (as of its install).
  uint64_t originalInstructions = 0, specializedInstructions = 0;
  unsigned sitesSpecialized = 0, sitesKept = 0;
  // The maps policy keeps generic (core::KeptGenericReason), as started.
  std::vector<std::string> keptGeneric;
  // The kept sites by who declined them and why (a site several deciders
  // declined counts once under each).
  std::map<std::pair<core::Decider, core::SiteOutcome>, unsigned> keptSiteDeclines;
  // Per site with a fast path in the installed version, its hits over the
  // last cycle whose samples counted any (none since the install: absent).
  std::map<unsigned, core::FastPathHits> fastPathHits;
  nlohmann::json toJson() const;
};

const char *agentStateName(AgentProgramState::State state);

class Agent {
public:
  using Clock = Daemon::Clock;

  // Claims and serves the socket (nothing is started before it is ours),
  // then starts `programs`.
  static Expected<std::unique_ptr<Agent>> start(AgentOptions options,
                                                std::vector<AgentProgram> programs,
                                                llvm::raw_ostream &out, llvm::raw_ostream &errors);
  ~Agent(); // stops the socket, then every program as `run` stops

  // Brings the running programs to `programs` (see the header comment).
  AgentChanges apply(std::vector<AgentProgram> programs);
  // Re-reads the configuration and applies it; on a configuration that
  // does not load, nothing changes and the error is returned.
  Expected<AgentChanges> reload();
  // Asks the loop for a reload (thread-safe; SIGHUP's path).
  void requestReload();

  // Does what is due at `now`: a pending reload, failed programs' retries,
  // each program's step within the CPU budget. Returns the cycles run.
  unsigned step(Clock::time_point now);
  // Sleeps until some program has work or a request arrives, at most `limit`.
  void waitForWork(std::chrono::milliseconds limit);

  // Whether the next agent asked this one to hand over (thread-safe).
  bool handoverAsked();
  // Stops every program leaving its data plane as it is, then the socket
  // (see the header comment); the agent serves nothing afterwards.
  void handOver();

  std::vector<AgentProgramState> states() const;
  nlohmann::json status() const;
  // {"programs": [{"name", "samples", "installs"}...]} (AgentHistory.h),
  // every program's or the one named; an unknown name is an error.
  Expected<nlohmann::json> history(const std::string &program = "") const;
  // The daemon of a serving program (tests, and the loop's own use).
  Daemon *daemon(const std::string &name);

private:
  struct Entry {
    AgentProgram config;
    std::unique_ptr<Daemon> daemon; // empty while failed or stopped
    AgentProgramState state;
    unsigned startFailures = 0;
    Clock::time_point retryAt;
    Clock::time_point lastTurnAt; // when it last got the budget; never: the epoch
    // Since when the budget has deferred it (due, passed over); none once
    // it gets its turn.
    std::optional<Clock::time_point> deferredSince;
    ProgramHistory history;
    uint64_t periodsSampled = 0; // of the running daemon, in `history`
  };

  Agent(AgentOptions options, llvm::raw_ostream &out, llvm::raw_ostream &errors);
  std::string answer(const ControlRequest &request);
  std::string answerStatus(const ControlRequest &request);
  std::string answerHistory(const ControlRequest &request);
  std::string answerHandover();
  // Answers the reloads waiting and refuses those to come, saying `why`.
  void refuseReloads(const std::string &why);
  // Starts `entry`'s daemon; on failure records it and when to retry.
  void startEntry(Entry &entry, Clock::time_point now);
  void stopEntry(Entry &entry);
  // Lines about one program: they carry its name.
  Log logOf(const Entry &entry) const;
  void record(Entry &entry, const core::CycleReport &cycle, Clock::time_point now);
  // What the daemon's step left to read: versions, guard bumps, run time,
  // a history sample when a status period ended.
  void readDaemon(Entry &entry, Clock::time_point now);
  // Whether the budget lets a cycle run now.
  bool budgetAllows(Clock::time_point now);
  void charge(double cpuSeconds);
  void wake();

  AgentOptions options;
  llvm::raw_ostream &out, &errors;
  Log log;
  // The programs by name. The loop thread alone adds, removes and steps
  // them, holding `tableMutex` exclusively to change the table or a state
  // and shared to read; the server thread reads under a shared lock.
  mutable std::shared_mutex tableMutex;
  std::map<std::string, Entry> entries;
  std::unique_ptr<ControlServer> server;

  std::mutex wakeMutex;
  std::condition_variable wakeUp;
  bool woken = false; // under wakeMutex
  // Reloads asked by the socket (each answered when done) or SIGHUP.
  std::vector<std::promise<std::string>> reloadReplies; // under wakeMutex
  bool reloadAsked = false;                              // under wakeMutex
  bool stopping = false; // under wakeMutex: reloads are refused
  bool handoverRequested = false; // under wakeMutex

  // The budget: CPU seconds the loop may still spend (refilled with wall
  // time times cpuBudget, at most one second's worth).
  double budgetLeft = 0;
  Clock::time_point budgetFilledAt;
};

} // namespace morpheus::runtime
