// `morpheus run`: load a program, attach it, and keep it specialized.
#include "cli/Commands.h"
#include "runtime/Daemon.h"

#include <bpf/bpf.h>
#include <llvm/Support/FormatVariadic.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <csignal>

namespace morpheus::cli {

namespace {

std::atomic<bool> stopRequested{false};

void requestStop(int) { stopRequested = true; }

} // namespace

int runCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--iface", "IF", "interface to attach to (required; repeat for more ports)", true},
      {"--netns", "NAME", "network namespace of the interface (/run/netns/NAME)"},
      {"--xdp-mode", "native|generic", "XDP attach mode (default native)"},
      {"--period", "DURATION", "re-specialize every DURATION (default 1s)"},
      {"--pin-dir", "DIR",
       "pin maps and the guard here (default /sys/fs/bpf/morpheus/<program>)"},
      {"--pin-root", "DIR",
       "where maps declared with pinning = LIBBPF_PIN_BY_NAME are pinned, or re-used "
       "when already there (default /sys/fs/bpf, as libbpf)"},
      {"--socket", "PATH", "control socket (default /run/morpheus/<program>.sock)"},
      {"--prog", "NAME", "program to attach when the object has several"},
      {"--inline-limit", "N", "inline tables with at most N entries (default 64)"},
      {"--shadow-packets", "N",
       "before each swap, compare N sample packets through the new and the original "
       "program on scratch map copies; 0 turns this off (default 64)"},
      {"--reproducer-dir", "DIR",
       "where a refused swap's reproducer is written (default /tmp)"},
      {"--cycles", "N", "stop after N cycles (default: run until SIGINT/SIGTERM)"},
      {"--quiet", "", "print only cycles that install or fail, no status lines"}};
  for (const OptionSpec &spec : compilerOptions())
    specs.push_back(spec);
  auto args = Args::parse("run", argc, argv, 2, specs);
  if (!args)
    return usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != 1 || !args->has("--iface"))
    return printUsage(
        *args, "morpheus run PROG --iface IF [options]",
        "Loads PROG unmodified, pins its maps, attaches it with a bpf_link and\n"
        "re-specializes it every period and right after each map update made\n"
        "through Morpheus ('morpheus map', the control socket). Prints one line\n"
        "per cycle (t1 = map reads, t2 = compile, validation = the pre-swap\n"
        "comparison, injection = load + swap) and a status line with the\n"
        "attached program's ns/packet (kernel bpf_stats). A new version that\n"
        "treats a sample packet differently from the original is refused (its\n"
        "reproducer written once per distinct difference); the running program\n"
        "stays. Failed and refused cycles back off: 2, 4, ... up to 64 periods.\n"
        "On SIGINT/SIGTERM it detaches and removes its pins.\n",
        specs);

  runtime::DaemonOptions options;
  options.optimizer.frontend = frontendOptions(*args);
  options.optimizer.program = args->get("--prog").value_or("");
  double periodMs = 1000;
  uint64_t maxCycles = 0;
  if (Error err = llvm::joinErrors(
          llvm::joinErrors(args->readUnsigned("--inline-limit", options.optimizer.inlineLimit),
                           args->readDuration("--period", periodMs)),
          llvm::joinErrors(args->readUnsigned("--cycles", maxCycles),
                           args->readUnsigned("--shadow-packets",
                                              options.optimizer.shadowPackets))))
    return usageError(llvm::toString(std::move(err)));
  options.period = std::chrono::microseconds(int64_t(periodMs * 1000));
  if (auto text = args->get("--xdp-mode")) {
    if (*text == "generic")
      options.mode = bpf::XdpMode::Generic;
    else if (*text != "native")
      return usageError("run: --xdp-mode takes native or generic, not '" + *text + "'");
  }
  options.reproducerDir = args->get("--reproducer-dir").value_or("/tmp");
  options.quiet = args->has("--quiet");
  options.ifaces = args->all("--iface");
  options.netns = args->get("--netns").value_or("");
  const std::string path = args->positional()[0];
  std::string program = bpf::objectNameFor(path);
  options.optimizer.pinDir = args->get("--pin-dir").value_or("/sys/fs/bpf/morpheus/" + program);
  options.optimizer.pinRoot = args->get("--pin-root").value_or("");
  options.socketPath = args->get("--socket").value_or("/run/morpheus/" + program + ".sock");
  if (Error err = bpf::ensureBpffs(options.optimizer.pinDir))
    return fail(std::move(err));

  auto daemon = runtime::Daemon::start(path, options, llvm::outs(), llvm::errs());
  if (!daemon)
    return fail(daemon.takeError());
  runtime::Optimizer &opt = (*daemon)->optimizer();
  std::string ifaces;
  for (const std::string &iface : options.ifaces)
    ifaces += (ifaces.empty() ? "" : ", ") + iface;
  llvm::outs() << llvm::formatv("{0}: program '{1}' attached to {2} ({3} mode), maps pinned "
                                "in {4} (startup {5:f1} ms)\n",
                                path, opt.entryName(), ifaces,
                                options.mode == bpf::XdpMode::Native ? "native" : "generic",
                                options.optimizer.pinDir, opt.startupMs());
  llvm::outs().flush();

  // Stats stay enabled for as long as this fd is open.
  int statsFd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  std::signal(SIGINT, requestStop);
  std::signal(SIGTERM, requestStop);
  uint64_t cycles = 0;
  while (!stopRequested && (!maxCycles || cycles < maxCycles)) {
    cycles += bool((*daemon)->step(runtime::Daemon::Clock::now()));
    (*daemon)->waitForWork(std::chrono::milliseconds(10));
  }
  if (statsFd >= 0)
    close(statsFd);
  llvm::outs() << "stopping: detaching and removing pins\n";
  return 0;
}

} // namespace morpheus::cli
