// `morpheus run`: load a program, attach it, and keep it specialized.
#include "backend/bpf/BpfObject.h"
#include "cli/RunOptions.h"
#include "core/PhaseClock.h"
#include "runtime/Daemon.h"
#include "support/Log.h"

#include <llvm/Support/FormatVariadic.h>

#include <atomic>
#include <chrono>
#include <csignal>
#include <map>
#include <memory>

namespace morpheus::cli {

namespace {

std::atomic<bool> stopRequested{false};

void requestStop(int) { stopRequested = true; }

// run's own: how many cycles before it stops by itself.
struct RunCommandOptions : RunOptions {
  uint64_t maxCycles = 0;
};

int run(const RunCommandOptions &flags) {
  uint64_t maxCycles = flags.maxCycles;
  configureProcessLog(processLog().threshold(), flags.logFormat, "morpheus");
  std::string costModelSaid;
  auto daemonOptions = daemonOptionsFor(flags, "", /*socket=*/true, costModelSaid);
  if (!daemonOptions)
    return fail(daemonOptions.takeError());
  runtime::DaemonOptions &options = *daemonOptions;
  if (!flags.quiet)
    processLog().info(costModelSaid);
  const std::string &path = flags.program;
  auto daemon = runtime::Daemon::start(path, options, llvm::outs(), llvm::errs());
  if (!daemon)
    return fail(daemon.takeError());
  runtime::Optimizer &opt = (*daemon)->optimizer();
  const char *mode = options.mode == bpf::XdpMode::Native ? "native" : "generic";
  bool servesSocket = options.adopt.empty(); // an adopting run has no socket
  processLog().record("attached",
                      {{"program", path},
                       {"entry", opt.entryName()},
                       {"ifaces", options.ifaces},
                       {"attached_to", (*daemon)->attachedTo()},
                       {"mode", mode},
                       {"pin_dir", options.optimizer.pinDir},
                       {"socket", servesSocket ? options.socketPath : ""},
                       {"startup_ms", opt.startupMs()}},
                      llvm::formatv("{0}: program '{1}' attached ({2}), maps pinned in {3}{4} "
                                    "(startup {5:f1} ms)\n",
                                    path, opt.entryName(), (*daemon)->attachedTo(),
                                    options.optimizer.pinDir,
                                    servesSocket ? ", control socket " + options.socketPath : "",
                                    opt.startupMs())
                          .str());
  if (!flags.quiet)
    processLog().record("startup", {{"phases", runtime::phasesJson(opt.startupPhases())}},
                        "  startup by phase (ms): " + core::phasesText(opt.startupPhases()) +
                            "\n");
  if (!flags.quiet)
    for (const std::string &line : (*daemon)->updateGuarantees())
      processLog().record("guarantee", {{"line", line}}, "  " + line + "\n");

  // Stats stay enabled for as long as this is open (without them, the
  // traffic figures stay zero: not a reason to stop).
  auto stats = bpf::enableRunTimeStats();
  if (!stats)
    llvm::consumeError(stats.takeError());
  std::signal(SIGINT, requestStop);
  std::signal(SIGTERM, requestStop);
  uint64_t cycles = 0;
  while (!stopRequested && !(*daemon)->ownerMovedOn() && (!maxCycles || cycles < maxCycles)) {
    cycles += bool((*daemon)->step(runtime::Daemon::Clock::now()));
    (*daemon)->waitForWork(std::chrono::milliseconds(10));
  }
  if (stats)
    stats->reset();
  runtime::Daemon::ExitNote leaving = (*daemon)->exitNote();
  processLog().record("stopping", std::move(leaving.fields), leaving.text);
  daemon->reset(); // the last swap (to the original) happens here
  return 0;
}

} // namespace

void addRunCommand(CLI::App &morpheus) {
  auto options = std::make_shared<RunCommandOptions>();
  CLI::App &command = commandline::addCommand(
      morpheus, "run", "load, attach and keep specializing a program",
      "Loads PROG unmodified, pins its maps, attaches it with a bpf_link and\n"
      "re-specializes it every period and right after each map update made\n"
      "through Morpheus ('morpheus map', the control socket). Prints one line\n"
      "per cycle (t1 = map reads, t2 = compile, validation = the pre-swap\n"
      "comparison, injection = load + swap) and a status line with the\n"
      "attached program's ns/packet (kernel bpf_stats). A new version that\n"
      "treats a sample packet differently from the original is refused (its\n"
      "reproducer written once per distinct difference); the running program\n"
      "stays. Failed and refused cycles back off: 2, 4, ... up to 64 periods.\n"
      "XDP and TC programs (tcx). The links are pinned in the pin directory:\n"
      "on SIGINT/SIGTERM (and after a crash or kill -9) the program stays\n"
      "attached; a clean exit swaps the original back in and keeps the pins,\n"
      "and the next run takes the links over. --detach-on-exit detaches and\n"
      "removes the pins instead; 'rm DIR/link_*' detaches what a run left.",
      [options](const CLI::App &command) {
        if (options->ifaces.empty() && options->adopt.empty())
          return commandline::usageError(command, "--iface is required (or --adopt)");
        if (!options->ifaces.empty() && !options->adopt.empty())
          return commandline::usageError(
              command, "--iface attaches PROG, --adopt joins a program attached by another "
                       "loader: give one of them");
        return run(*options);
      });
  addProgramArgument(command, options->program);
  command
      .add_option("--iface", options->ifaces,
                  "interface to attach to (repeat for more ports; or --adopt)")
      ->type_name("IF");
  command
      .add_option("--adopt", options->adopt,
                  "join the program another loader attached instead of attaching: TARGET is "
                  "its interface's XDP hook (IFACE, with --netns), a slot of the libxdp "
                  "dispatcher there (IFACE/NAME or IFACE/PRIORITY), its tcx hook "
                  "(IFACE:ingress or IFACE:egress), its program id or its pinned link. Its "
                  "maps are reused by id (matched to PROG's by name and layout), specialized "
                  "versions run through a trampoline on its hook; on exit, crash or kill -9 "
                  "the owner's program serves, and a restart adopts it again")
      ->type_name("TARGET");
  command.add_flag("--accept-one-tail-call-fewer", options->acceptOneTailCallFewer,
                   "with --adopt: adopt even a program whose tail calls can reach the kernel's "
                   "limit (33 in a row); the trampoline's tail call is one of them, so such a "
                   "chain runs one stage fewer, and the log says so (without it such a "
                   "program is not adopted)");
  command
      .add_option("--other-writers", options->otherWriters,
                  "with --adopt, the maps the program shares with its owner, whose updates "
                  "bypass the guard: poll (default) compares what the version read each "
                  "cycle and rebuilds after a change, which holds from then on (up to a "
                  "period plus a cycle late); keep-generic never specializes them, so an "
                  "update holds from the next packet on (and a version with nothing polled "
                  "serves on after Morpheus exits or hands over)")
      ->transform(commandline::oneOf(std::map<std::string, OtherWriters>{
          {"poll", OtherWriters::Poll}, {"keep-generic", OtherWriters::KeepGeneric}}))
      ->type_name("poll|keep-generic");
  addKeepGeneric(command, options->keepGeneric);
  command
      .add_option("--netns", options->netns,
                  "network namespace of the interface (/run/netns/NAME)")
      ->type_name("NAME");
  command
      .add_option("--xdp-mode", options->mode, "XDP attach mode (default native)")
      ->transform(commandline::oneOf(
          std::map<std::string, bpf::XdpMode>{{"native", bpf::XdpMode::Native},
                                              {"generic", bpf::XdpMode::Generic}}))
      ->type_name("native|generic");
  command
      .add_option("--tc-attach", options->tcDirection,
                  "tcx hook for TC programs (default ingress)")
      ->transform(commandline::oneOf(
          std::map<std::string, bpf::TcDirection>{{"ingress", bpf::TcDirection::Ingress},
                                                  {"egress", bpf::TcDirection::Egress}}))
      ->type_name("ingress|egress");
  command.add_flag("--detach-on-exit", options->detachOnExit,
                   "on exit detach the program and remove the pins (default: the original "
                   "stays attached, links and maps pinned)");
  commandline::addDuration(command, "--period", options->periodMs,
                           "re-specialize every DURATION (default 1s)");
  command
      .add_option("--pin-dir", options->pinDir,
                  "pin maps and the guard here (default /sys/fs/bpf/morpheus/<program>)")
      ->type_name("DIR");
  command
      .add_option("--pin-root", options->pinRoot,
                  "where maps declared with pinning = LIBBPF_PIN_BY_NAME are pinned, or re-used "
                  "when already there (default /sys/fs/bpf, as libbpf; an object written for "
                  "iproute2 pins them, and its PIN_GLOBAL_NS maps, in DIR/tc/globals)")
      ->type_name("DIR");
  command
      .add_option("--socket", options->socketPath,
                  "control socket (default /run/morpheus/<program>.sock with the default "
                  "--pin-dir, /run/morpheus/<program>-<hash of the pin dir>.sock with another)")
      ->type_name("PATH");
  command.add_option("--prog", options->entry, "program to attach when the object has several")
      ->type_name("NAME");
  addInlineLimit(command, options->inlineLimit);
  addCostModel(command, options->costModel);
  command
      .add_option("--shadow-packets", options->shadowPackets,
                  "before each swap, compare N sample packets through the new and the original "
                  "program on scratch map copies; 0 turns this off (default 64)")
      ->type_name("N");
  command
      .add_option("--profile", options->profile,
                  "follow the traffic: sample lookup keys of tables too large to inline whole "
                  "and put their heavy hitters in front of the lookup; adaptive: sampling rate "
                  "per site, lower while the heavy hitters hold still; naive: every lookup "
                  "recorded (for comparison); off (default): neither")
      ->transform(commandline::oneOf(std::map<std::string, core::ProfileMode>{
          {"off", core::ProfileMode::Off},
          {"adaptive", core::ProfileMode::Adaptive},
          {"naive", core::ProfileMode::Naive}}))
      ->type_name("off|adaptive|naive");
  command
      .add_option("--no-profile", options->notProfiled,
                  "never instrument lookups in MAP (repeat for more)")
      ->type_name("MAP");
  command
      .add_option("--reproducer-dir", options->reproducerDir,
                  "where a refused swap's reproducer (it holds map contents) is written, "
                  "mode 0600: a directory of ours only we may enter (created 0700; one that "
                  "is a link, another user's or open to others is refused; default "
                  "/var/lib/morpheus/reproducers as root, else ~/.local/state/morpheus/"
                  "reproducers)")
      ->type_name("DIR");
  command
      .add_option("--cycles", options->maxCycles,
                  "stop after N cycles (default: run until SIGINT/SIGTERM)")
      ->type_name("N");
  command.add_flag("--quiet", options->quiet,
                   "print only cycles that install or fail, no status lines");
  command
      .add_option("--log-format", options->logFormat,
                  "text: lines for people (default); json: one JSON object a line (each cycle, "
                  "status line, port change and message; \"event\" says which)")
      ->transform(commandline::oneOf(
          std::map<std::string, LogFormat>{{"text", LogFormat::Text}, {"json", LogFormat::Json}}))
      ->type_name("text|json");
  addExploreOptions(command, *options);
  addCompilerOptions(command, options->compiler);
}

} // namespace morpheus::cli
