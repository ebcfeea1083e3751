// What `morpheus run` is told about one program, and the daemon options it
// becomes: one conversion for the command line and the agent's
// configuration file (cli/AgentConfig), so an entry of the file means
// exactly what the same flags of `run` mean.
#pragma once

#include "cli/Commands.h"
#include "runtime/Daemon.h"

#include <string>
#include <vector>

namespace morpheus::cli {

// What becomes of the maps an adopted program shares with its owner, whose
// writes bypass the guard (`--other-writers`, `other_writers:`): polled
// each cycle (a change holds from the cycle after it, up to a period plus
// a cycle late), or never specialized (it holds from the next packet on).
enum class OtherWriters { Poll, KeepGeneric };

struct RunOptions {
  std::string program;
  std::vector<std::string> ifaces;
  std::string netns, pinDir, pinRoot, socketPath, entry, adopt;
  bpf::XdpMode mode = bpf::XdpMode::Native;
  bpf::TcDirection tcDirection = bpf::TcDirection::Ingress;
  bool detachOnExit = false;
  bool acceptOneTailCallFewer = false;
  OtherWriters otherWriters = OtherWriters::Poll;
  std::vector<std::string> keepGeneric; // maps never specialized (--keep-generic)
  double periodMs = 1000;
  uint32_t inlineLimit = runtime::OptimizerOptions().inlineLimit;
  // The table passes to run by name (Passes.def); unset runs them all.
  std::optional<std::vector<std::string>> tablePasses;
  std::string costModel; // a calibration file; "" = this machine's cached one
  uint32_t shadowPackets = runtime::OptimizerOptions().shadowPackets;
  core::ProfileMode profile = core::ProfileMode::Off;
  std::vector<std::string> notProfiled;
  std::string reproducerDir = runtime::DaemonOptions().reproducerDir;
  bool quiet = false;
  LogFormat logFormat = LogFormat::Text;
  CompilerFlags compiler;
  // Choosing by measurement (--explore, runtime::ExploreOptions): off
  // unless `explore`.
  bool explore = false;
  unsigned exploreTrials = 3, exploreRounds = runtime::ExploreOptions().rounds;
  double exploreSliceMs = 200, exploreBudgetMs = 30000;
  uint64_t exploreMinRuns = runtime::ExploreOptions().minRuns;
  double exploreMarginNs = core::ExplorationMargin().ns;
  double exploreShortfall = core::ShortfallThreshold().fraction;
  double exploreEveryMs = 0; // 0: off
};

// --explore and the options that shape it (run's; the agent's file has
// keys of the same names).
void addExploreOptions(CLI::App &command, RunOptions &options);

// The maps `flags` keeps generic: every map with --other-writers
// keep-generic (an adopted program's are all its owner's), and those
// --keep-generic names. Keep-generic for a program that adopts nothing is
// an error: it has no owner, and --keep-generic names the maps others write.
Expected<bpf::KeptGeneric> keptGenericFor(const RunOptions &flags);

// The cost model `run` prices representations with: the calibration file
// `path` (which must exist), or with "" this machine's cached one, else the
// defaults; `said` gets the line saying which.
Expected<core::CostModel> costModelFor(const std::string &path, std::string &said);

// The daemon options for `flags`: the cost model read (`costModelSaid`
// gets the line saying which), the pin directory defaulted to
// /sys/fs/bpf/morpheus/NAME (NAME: `name`, or the program's object name),
// the socket to the default for that directory unless `socket` is false
// (the agent serves one socket for all). Log format and level are the
// process log's.
Expected<runtime::DaemonOptions> daemonOptionsFor(const RunOptions &flags, const std::string &name,
                                                  bool socket, std::string &costModelSaid);

} // namespace morpheus::cli
