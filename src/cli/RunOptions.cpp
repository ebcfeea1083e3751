#include "cli/RunOptions.h"

#include "backend/bpf/BpfObject.h"
#include "runtime/ControlServer.h"
#include "runtime/CostCalibration.h"

#include <llvm/Support/FileSystem.h>

namespace morpheus::cli {

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
  options.optimizer.traffic.mode = flags.profile;
  auto costModel = costModelFor(flags.costModel, costModelSaid);
  if (!costModel)
    return costModel.takeError();
  options.optimizer.costModel = *costModel;
  if (costModel->calibrated())
    options.optimizer.traffic.costs = costModel->fastPathCosts(options.optimizer.traffic.costs);
  options.optimizer.notProfiled.insert(flags.notProfiled.begin(), flags.notProfiled.end());
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

} // namespace morpheus::cli
