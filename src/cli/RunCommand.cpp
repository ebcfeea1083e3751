// `morpheus run`: load a program, attach it, and keep it specialized.
#include "backend/bpf/XdpLink.h"
#include "cli/Commands.h"
#include "cli/Reports.h"
#include "runtime/ControlServer.h"
#include "runtime/Optimizer.h"

#include <bpf/bpf.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <csignal>
#include <cstdio>
#include <mutex>
#include <optional>
#include <thread>

namespace morpheus::cli {

namespace {

std::atomic<bool> stopRequested{false};

void requestStop(int) { stopRequested = true; }

void printCycle(const runtime::CycleReport &report, bool verbose) {
  std::printf("cycle %llu: %s (version %llu; t1 %.2f ms, t2 %.1f ms, validation %.1f ms, "
              "injection %.2f ms",
              (unsigned long long)report.cycle, report.outcome.c_str(),
              (unsigned long long)report.version, report.times.analysisMs,
              report.times.codegenMs, report.times.validationMs, report.times.injectionMs);
  if (report.installed)
    std::printf(", %zu instructions", report.instructions);
  std::printf(")\n");
  if (report.installed && verbose)
    std::fputs(logToText(report.log).c_str(), stdout);
  std::fflush(stdout);
}

// One --iface port. `link` is empty while the interface is gone: deleting an
// interface detaches its XDP link for good, so the port is re-attached (to
// the program running elsewhere) when an interface of that name reappears.
// An interface that is merely down keeps its link and needs nothing.
struct Port {
  std::string iface;
  std::optional<bpf::XdpLink> link;
  std::string attachError; // the last re-attach failure, reported once
};

void reportLost(Port &lost, const std::vector<Port> &ports) {
  lost.link.reset();
  std::string serving;
  for (const Port &port : ports)
    if (port.link)
      serving += (serving.empty() ? "" : ", ") + port.iface;
  std::printf("interface '%s' disappeared: the kernel detached the program from it; "
              "still serving %s; re-attaching if it comes back\n",
              lost.iface.c_str(), serving.empty() ? "no interface" : serving.c_str());
  std::fflush(stdout);
}

// Notices deleted interfaces and re-attaches `programFd` to those back.
void tendPorts(std::vector<Port> &ports, int programFd, bpf::XdpMode mode,
               const std::string &netns) {
  for (Port &port : ports) {
    if (port.link) {
      if (!port.link->attached())
        reportLost(port, ports);
      continue;
    }
    auto link = bpf::XdpLink::attach(programFd, port.iface, mode, netns);
    if (!link) {
      std::string message = llvm::toString(link.takeError());
      // "No such interface" is the expected state until it comes back.
      if (message != port.attachError && message.find("no interface") == std::string::npos)
        std::fprintf(stderr, "morpheus: interface '%s': %s\n", port.iface.c_str(),
                     message.c_str());
      port.attachError = std::move(message);
      continue;
    }
    port.link.emplace(std::move(*link));
    port.attachError.clear();
    std::printf("interface '%s' is back: program attached\n", port.iface.c_str());
    std::fflush(stdout);
  }
}

} // namespace

int runCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--iface", "IF", "interface to attach to (required; repeat for more ports)", true},
      {"--netns", "NAME", "network namespace of the interface (/run/netns/NAME)"},
      {"--xdp-mode", "native|generic", "XDP attach mode (default native)"},
      {"--period", "DURATION", "re-specialize every DURATION (default 1s)"},
      {"--pin-dir", "DIR",
       "pin maps and the guard here (default /sys/fs/bpf/morpheus/<program>)"},
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
        "treats a sample packet differently from the original is refused and a\n"
        "reproducer written; the running program stays.\n"
        "On SIGINT/SIGTERM it detaches and removes its pins.\n",
        specs);

  runtime::OptimizerOptions options;
  options.frontend = frontendOptions(*args);
  options.program = args->get("--prog").value_or("");
  double periodMs = 1000;
  uint64_t maxCycles = 0;
  if (Error err = llvm::joinErrors(
          llvm::joinErrors(args->readUnsigned("--inline-limit", options.inlineLimit),
                           args->readDuration("--period", periodMs)),
          llvm::joinErrors(args->readUnsigned("--cycles", maxCycles),
                           args->readUnsigned("--shadow-packets", options.shadowPackets))))
    return usageError(llvm::toString(std::move(err)));
  bpf::XdpMode mode = bpf::XdpMode::Native;
  if (auto text = args->get("--xdp-mode")) {
    if (*text == "generic")
      mode = bpf::XdpMode::Generic;
    else if (*text != "native")
      return usageError("run: --xdp-mode takes native or generic, not '" + *text + "'");
  }
  options.reproducerDir = args->get("--reproducer-dir").value_or("/tmp");
  bool quiet = args->has("--quiet");
  const std::string path = args->positional()[0];
  std::string program = bpf::objectNameFor(path);
  options.pinDir = args->get("--pin-dir").value_or("/sys/fs/bpf/morpheus/" + program);
  if (Error err = bpf::ensureBpffs(options.pinDir))
    return fail(std::move(err));

  auto optimizer = runtime::Optimizer::create(path, options);
  if (!optimizer)
    return fail(optimizer.takeError());
  runtime::Optimizer &opt = **optimizer;
  // One program, one set of maps, every port: a multi-port function (a
  // router, a switch) runs as one instance behind one guard.
  std::vector<Port> ports;
  std::string ifaces;
  std::string netns = args->get("--netns").value_or("");
  for (const std::string &iface : args->all("--iface")) {
    auto link = bpf::XdpLink::attach(opt.originalFd(), iface, mode, netns);
    if (!link)
      return fail(link.takeError());
    ports.push_back(Port{iface, std::move(*link), ""});
    ifaces += (ifaces.empty() ? "" : ", ") + iface;
  }
  opt.install = [&](int fd) -> Error {
    for (Port &port : ports) {
      if (!port.link)
        continue;
      if (Error err = port.link->replace(fd)) {
        if (port.link->attached())
          return withContext(std::move(err), "interface '" + port.iface + "'");
        llvm::consumeError(std::move(err));
        reportLost(port, ports);
      }
    }
    return Error::success();
  };
  std::printf("%s: program '%s' attached to %s (%s mode), maps pinned in %s "
              "(startup %.1f ms)\n",
              path.c_str(), opt.entryName().c_str(), ifaces.c_str(),
              mode == bpf::XdpMode::Native ? "native" : "generic", options.pinDir.c_str(),
              opt.startupMs());
  std::fflush(stdout);

  // Stats stay enabled for as long as this fd is open.
  int statsFd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  std::mutex mutex;
  std::condition_variable wake;
  std::atomic<bool> changed{false};
  auto notify = [&] {
    changed = true;
    wake.notify_all();
  };
  std::string socketPath = args->get("--socket").value_or("/run/morpheus/" + program + ".sock");
  auto server = runtime::ControlServer::start(
      socketPath, opt, notify, [&] {
        return nlohmann::json({{"program", opt.entryName()},
                               {"guard_version", opt.guard().version()},
                               {"specialized_version", opt.installedVersion()}})
            .dump();
      });
  if (!server)
    return fail(server.takeError());

  std::signal(SIGINT, requestStop);
  std::signal(SIGTERM, requestStop);
  using Clock = std::chrono::steady_clock;
  uint64_t cycles = 0;
  bpf::ProgramRunStats last = bpf::programRunStats(opt.activeFd());
  int lastFd = opt.activeFd();
  auto nextCycle = Clock::now();
  auto retryAt = nextCycle; // after failures, triggers wait until then too
  unsigned failures = 0;
  std::vector<std::string> pinNotes;
  while (!stopRequested && (!maxCycles || cycles < maxCycles)) {
    // A bump of the guard (by 'morpheus map' from another process, or the
    // socket) means packets are on the generic path: re-specialize now.
    bool invalidated = opt.installedVersion() != 0 &&
                       opt.guard().version() != opt.installedVersion();
    auto now = Clock::now();
    bool periodic = now >= nextCycle;
    if (periodic || ((invalidated || changed) && now >= retryAt)) {
      changed = false;
      if (periodic) {
        tendPorts(ports, opt.activeFd(), mode, netns);
        // A note that persists (a pin path taken by another object) is
        // printed once, not every period.
        std::vector<std::string> notes = opt.repairPins();
        if (notes != pinNotes)
          for (const std::string &note : notes)
            std::fprintf(stderr, "morpheus: %s\n", note.c_str());
        pinNotes = std::move(notes);
      }
      runtime::CycleReport report = opt.runCycle();
      ++cycles;
      // Back off exponentially while cycles fail (up to 64 periods), so a
      // program the verifier keeps rejecting does not burn a core.
      failures = report.outcome.starts_with("failed") ? failures + 1 : 0;
      auto delay = std::chrono::microseconds(
          int64_t(periodMs * 1000) << std::min(failures, 6u));
      // Unchanged cycles, and those deferred while a control-plane change
      // is in progress (every 10 ms during a long one), only show in the
      // periodic status line.
      if (report.installed || report.outcome.starts_with("failed") ||
          (!quiet && report.outcome.starts_with("superseded")))
        printCycle(report, !quiet);
      if (!quiet && statsFd >= 0 && periodic) {
        bpf::ProgramRunStats current = bpf::programRunStats(lastFd);
        uint64_t packets = current.runCount - last.runCount;
        if (packets)
          std::printf("status: cycle %llu, %s program, %llu packets, %.1f ns/packet\n",
                      (unsigned long long)report.cycle,
                      opt.installedVersion() == opt.guard().version() ? "specialized"
                                                                       : "generic",
                      (unsigned long long)packets,
                      double(current.runTimeNs - last.runTimeNs) / packets);
        lastFd = opt.activeFd();
        last = bpf::programRunStats(lastFd);
        std::fflush(stdout);
      }
      nextCycle = Clock::now() + delay;
      retryAt = failures ? nextCycle : Clock::now();
    }
    std::unique_lock lock(mutex);
    wake.wait_for(lock, std::chrono::milliseconds(10));
  }
  if (statsFd >= 0)
    close(statsFd);
  std::printf("stopping: detaching and removing pins\n");
  return 0;
}

} // namespace morpheus::cli
