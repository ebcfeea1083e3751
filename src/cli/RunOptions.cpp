#include "cli/RunOptions.h"

#include "backend/bpf/BpfObject.h"
#include "runtime/ControlServer.h"
#include "runtime/CostCalibration.h"

#include <llvm/Support/FileSystem.h>

#include <algorithm>

namespace morpheus::cli {

Expected<bpf::KeptGeneric> keptGenericFor(const RunOptions &flags) {
  if (flags.otherWriters == OtherWriters::KeepGeneric && flags.adopt.empty())
    return makeError("other writers' maps kept generic (--other-writers, other_writers) are "
                     "those an adopted program shares with its owner, and this program adopts "
                     "none: name the maps other loaders write with --keep-generic MAP "
                     "(keep_generic)");
  bpf::KeptGeneric kept;
  kept.everyMap = flags.otherWriters == OtherWriters::KeepGeneric;
  kept.maps.insert(flags.keepGeneric.begin(), flags.keepGeneric.end());
  return kept;
}

Expected<core::CostModel> costModelFor(const std::string &path, std::string &said) {
  if (!path.empty() && !llvm::sys::fs::exists(path))
    return makeError("{0}: no such calibration file (--cost-model)", path);
  return runtime::costModelFor(path.empty() ? runtime::calibrationPath() : path, said);
}

Expected<runtime::DaemonOptions> daemonOptionsFor(const RunOptions &flags, const std::string &name,
                                                  bool socket, std::string &costModelSaid) {
  runtime::DaemonOptions options;
  options.optimizer.frontend = frontendOptions(flags.compiler);
  options.optimizer.program = flags.entry;
  // The live data plane's load: the only one that honours pins by name
  // ("" = libbpf's default root, /sys/fs/bpf).
  options.optimizer.pinRoot = flags.pinRoot;
  options.optimizer.inlineLimit = flags.inlineLimit;
  options.optimizer.tablePasses = flags.tablePasses;
  options.optimizer.shadowPackets = flags.shadowPackets;
  if (flags.explore) {
    options.explore.trials = std::max(2u, flags.exploreTrials);
    options.explore.rounds = std::max(1u, flags.exploreRounds);
    options.explore.slice = std::chrono::milliseconds(int64_t(flags.exploreSliceMs));
    options.explore.budget = std::chrono::milliseconds(int64_t(flags.exploreBudgetMs));
    options.explore.minRuns = flags.exploreMinRuns;
    options.explore.margin.ns = flags.exploreMarginNs;
    options.explore.shortfall.fraction = std::max(0.0, flags.exploreShortfall);
    options.explore.every = std::chrono::milliseconds(int64_t(flags.exploreEveryMs));
  }
  options.optimizer.traffic.mode = flags.profile;
  auto costModel = costModelFor(flags.costModel, costModelSaid);
  if (!costModel)
    return costModel.takeError();
  options.optimizer.costModel = *costModel;
  if (costModel->calibrated())
    options.optimizer.traffic.costs = costModel->fastPathCosts(options.optimizer.traffic.costs);
  options.optimizer.notProfiled.insert(flags.notProfiled.begin(), flags.notProfiled.end());
  auto kept = keptGenericFor(flags);
  if (!kept)
    return kept.takeError();
  options.optimizer.keptGeneric = std::move(*kept);
  options.period = std::chrono::microseconds(int64_t(flags.periodMs * 1000));
  options.mode = flags.mode;
  options.tcDirection = flags.tcDirection;
  options.onExit = flags.detachOnExit ? runtime::OnExit::Detach : runtime::OnExit::KeepServing;
  options.reproducerDir = flags.reproducerDir;
  options.quiet = flags.quiet;
  options.logFormat = processLog().outputFormat();
  options.logLevel = processLog().threshold();
  options.ifaces = flags.ifaces;
  options.adopt = flags.adopt;
  options.acceptOneTailCallFewer = flags.acceptOneTailCallFewer;
  options.netns = flags.netns;
  std::string program = name.empty() ? bpf::objectNameFor(flags.program) : name;
  options.optimizer.pinDir =
      flags.pinDir.empty() ? "/sys/fs/bpf/morpheus/" + program : flags.pinDir;
  if (socket)
    options.socketPath = flags.socketPath.empty()
                             ? runtime::defaultControlSocket(program, options.optimizer.pinDir)
                             : flags.socketPath;
  if (Error err = bpf::ensureBpffs(options.optimizer.pinDir))
    return std::move(err);
  return options;
}

void addExploreOptions(CLI::App &command, RunOptions &options) {
  command.add_flag("--explore", options.explore,
                   "after the first install, choose by measurement: the model's version, the "
                   "versions without one table pass where the model was close (the next "
                   "representation predicted within --explore-margin ns or half) and the "
                   "generic program take turns on the live ports, one slice each, in "
                   "interleaved rounds; bpf_stats (on while measuring) give each slice's "
                   "ns per run, and the version with the lowest median no slower than the "
                   "generic program is kept (a version measured slower serves no second "
                   "slice). Each trial is printed; again after a change when the generic "
                   "program was chosen");
  command
      .add_option("--explore-trials", options.exploreTrials,
                  "versions tried, the model's included (default 3, at least 2)")
      ->type_name("N");
  command
      .add_option("--explore-rounds", options.exploreRounds,
                  "slices per version, the median kept (default 3)")
      ->type_name("N");
  commandline::addDuration(command, "--explore-slice", options.exploreSliceMs,
                           "one version's turn, at least (default 200ms)");
  command
      .add_option("--explore-min-runs", options.exploreMinRuns,
                  "a slice lasts until the program ran this often (default 1000)")
      ->type_name("N");
  commandline::addDuration(command, "--explore-budget", options.exploreBudgetMs,
                           "the exploration's time from the first slice to the choice, builds "
                           "and validation included; when spent, the best measured so far is "
                           "chosen (default 30s)");
  command
      .add_option("--explore-margin", options.exploreMarginNs,
                  "how close (ns) the model's next representation must be predicted to be "
                  "tried (or within half the chosen one's prediction; default 10)")
      ->type_name("NS");
  command
      .add_option("--explore-shortfall", options.exploreShortfall,
                  "when the model's version, measured against the generic program, saves "
                  "less than this fraction of the saving the model predicts (by more than "
                  "5 ns), the versions it was not close on are tried too, and a version "
                  "with no close decision is measured to find out (default 0.5; 0: only "
                  "close decisions)")
      ->type_name("FRACTION");
  commandline::addDuration(command, "--explore-every", options.exploreEveryMs,
                           "explore again this long after the last exploration began, the "
                           "model's version built afresh (default: off; explorations also "
                           "start again when the traffic's hot keys move)");
}

} // namespace morpheus::cli
