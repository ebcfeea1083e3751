// `morpheus daemon`: the node agent (runtime/Agent) run from its
// configuration file; `morpheus status`: what an agent (or a `run`)
// serves, asked through its control socket, and what the agent kept of
// each program's past (--history, --plot: cli/HistoryPlot).
#include "backend/bpf/BpfObject.h"
#include "cli/AgentConfig.h"
#include "cli/Commands.h"
#include "cli/HistoryPlot.h"
#include "runtime/Agent.h"
#include "runtime/AgentMetrics.h"
#include "runtime/ControlClient.h"
#include "runtime/MetricsServer.h"
#include "support/Files.h"
#include "support/Log.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <atomic>
#include <csignal>
#include <limits>
#include <map>
#include <memory>

namespace morpheus::cli {

namespace {

std::atomic<bool> stopAgent{false};
std::atomic<bool> reloadAgent{false};

void requestAgentStop(int) { stopAgent = true; }
void requestAgentReload(int) { reloadAgent = true; }

struct DaemonCommandOptions {
  std::string config;
  std::optional<std::string> socketPath, metricsAddress;
  LogFormat logFormat = LogFormat::Text;
  bool takeOver = false;
};

// The configuration with the command line's overrides.
Expected<AgentConfig> configuration(const DaemonCommandOptions &flags) {
  auto config = readAgentConfig(flags.config);
  if (!config)
    return config.takeError();
  if (flags.socketPath)
    config->socketPath = *flags.socketPath;
  if (flags.metricsAddress)
    config->metricsAddress = *flags.metricsAddress;
  return config;
}

// The next agent asked for the socket: every program stops leaving its
// data plane as it is, the socket goes last (runtime/Agent::handOver).
int handOver(runtime::Agent &agent) {
  processLog().record("agent_handing_over", {},
                      "agent: handing over to the next agent: the programs stop, their data "
                      "planes left serving as they are\n");
  agent.handOver();
  processLog().record("agent_handed_over", {}, "agent: handed over; exiting\n");
  return 0;
}

int runAgent(const DaemonCommandOptions &flags) {
  configureProcessLog(processLog().threshold(), flags.logFormat, "morpheus");
  auto config = configuration(flags);
  if (!config)
    return fail(config.takeError());
  auto programs = agentPrograms(*config);
  if (!programs)
    return fail(withContext(programs.takeError(), flags.config));
  runtime::AgentOptions options;
  options.socketPath = config->socketPath;
  options.takeOver = flags.takeOver;
  options.cpuBudget = config->cpuBudget;
  options.logFormat = flags.logFormat;
  options.logLevel = processLog().threshold();
  // A reload reads the file again; the socket and metrics address of the
  // running agent stay (they are the agent's, not a program's).
  options.loadConfiguration = [flags]() -> Expected<std::vector<runtime::AgentProgram>> {
    auto reread = configuration(flags);
    if (!reread)
      return reread.takeError();
    return agentPrograms(*reread);
  };
  // Stats stay enabled while this is open: the status's ns/packet.
  auto stats = bpf::enableRunTimeStats();
  if (!stats)
    processLog().warning("kernel bpf_stats cannot be enabled (" +
                         llvm::toString(stats.takeError()) + "): no ns/packet figures");
  // Counted from the first start on; the gauges read at each scrape.
  auto metrics = runtime::AgentMetrics::create();
  if (!metrics)
    return fail(metrics.takeError());
  options.metrics = metrics->get();
  auto agent =
      runtime::Agent::start(std::move(options), std::move(*programs), llvm::outs(), llvm::errs());
  if (!agent)
    return fail(agent.takeError());
  std::unique_ptr<runtime::metrics::Server> metricsServer;
  if (!config->metricsAddress.empty()) {
    auto served = runtime::metrics::Server::start(
        config->metricsAddress, [&agent, &metrics, statsOn = bool(stats)] {
          return (*metrics)->render((*agent)->states(), statsOn);
        });
    if (!served)
      return fail(served.takeError());
    metricsServer = std::move(*served);
    processLog().info("metrics at http://" + metricsServer->address() + "/metrics");
  }
  processLog().record("agent", {{"config", flags.config}, {"socket", config->socketPath}},
                      "agent: configuration " + flags.config + ", control socket " +
                          config->socketPath + "\n");
  std::signal(SIGINT, requestAgentStop);
  std::signal(SIGTERM, requestAgentStop);
  std::signal(SIGHUP, requestAgentReload);
  while (!stopAgent) {
    if ((*agent)->handoverAsked())
      return handOver(**agent);
    if (reloadAgent.exchange(false))
      (*agent)->requestReload();
    (*agent)->step(runtime::Agent::Clock::now());
    (*agent)->waitForWork(std::chrono::milliseconds(10));
  }
  processLog().record("agent_stopping", {}, "agent: stopping\n");
  metricsServer.reset();
  agent->reset(); // each program stops as `run` stops
  return 0;
}

struct StatusOptions {
  std::string socketPath = AgentConfig().socketPath;
  std::string program;
  bool json = false;
  bool history = false;
  std::string plot; // "" = none
};

std::string describeProgram(const nlohmann::json &program) {
  std::string line = llvm::formatv("{0,-16} {1,-8} version {2}", program.value("name", "?"),
                                   program.value("state", "?"),
                                   program.value("installed_version", uint64_t(0)))
                         .str();
  if (auto ns = program.find("ns_per_packet"); ns != program.end() && ns->is_object()) {
    for (const char *kind : {"generic", "specialized"})
      if (ns->contains(kind) && (*ns)[kind].is_number())
        line += llvm::formatv(", {0} {1:f1} ns/packet", kind, (*ns)[kind].get<double>()).str();
  }
  if (program.contains("gain") && program["gain"].is_number())
    line += llvm::formatv(", gain {0:f2}x", program["gain"].get<double>()).str();
  if (auto last = program.find("last_cycle"); last != program.end() && last->is_object())
    line += ", last cycle " + last->value("outcome", std::string("?"));
  std::string attached = program.value("attached_to", "");
  if (!attached.empty())
    line += " [" + attached + "]";
  std::string detail = program.value("detail", "");
  if (!detail.empty())
    line += "\n" + std::string(17, ' ') + detail;
  if (auto kept = program.find("kept_generic");
      kept != program.end() && kept->is_array() && !kept->empty()) {
    std::vector<std::string> maps;
    for (const nlohmann::json &map : *kept)
      if (map.is_string())
        maps.push_back(map.get<std::string>());
    line += "\n" + std::string(17, ' ') + core::KeptGenericReason + ": " + llvm::join(maps, ", ");
  }
  return line + "\n";
}

// The agent's history, each program's read back (runtime/AgentHistory).
Expected<std::vector<PlottedProgram>> readHistory(const nlohmann::json &answer) {
  std::vector<PlottedProgram> programs;
  if (!answer.contains("programs") || !answer["programs"].is_array())
    return makeError("history: no \"programs\" in the agent's answer");
  for (const nlohmann::json &program : answer["programs"]) {
    auto history = runtime::ProgramHistory::fromJson(program);
    if (!history)
      return history.takeError();
    programs.push_back({program.value("name", "?"), std::move(*history)});
  }
  return programs;
}

// Per program, its installs and status periods in time order, one a line
// (times in UTC). A period's time is its end: an install at that moment
// came after it (the period is measured before its cycle runs).
void printHistory(const std::vector<PlottedProgram> &programs) {
  for (const PlottedProgram &program : programs) {
    const auto &samples = program.history.samples();
    const auto &installs = program.history.installs();
    llvm::outs() << program.name << ": " << samples.size() << " status periods, " << installs.size()
                 << " installs\n";
    size_t next = 0;
    // The installs up to `time` (all: infinity), not yet printed.
    auto printInstallsBefore = [&](double time) {
      for (; next < installs.size() && installs[next].time < time; ++next)
        llvm::outs() << "  " << utcTime(installs[next].time) << "  installed version "
                     << installs[next].version << "\n";
    };
    for (const runtime::HistorySample &sample : samples) {
      printInstallsBefore(sample.time);
      llvm::outs() << llvm::formatv("  {0}  {1,-11} {2,10} packets", utcTime(sample.time),
                                    sample.specialized ? "specialized" : "generic", sample.packets);
      if (sample.nsPerPacket)
        llvm::outs() << llvm::formatv(", {0:f1} ns/packet", *sample.nsPerPacket);
      llvm::outs() << "\n";
    }
    printInstallsBefore(std::numeric_limits<double>::infinity());
  }
}

// --history and --plot: what the agent kept of each program's past.
int history(const StatusOptions &flags) {
  nlohmann::json request = {{"op", "history"}};
  if (!flags.program.empty())
    request["program"] = flags.program;
  auto reply = runtime::askControlSocket(flags.socketPath, request, std::chrono::seconds(30));
  if (!reply)
    return fail(reply.takeError());
  const nlohmann::json &answer = (*reply)["history"];
  auto programs = readHistory(answer);
  if (!programs)
    return fail(programs.takeError());
  if (!flags.plot.empty()) {
    if (Error err = writeFile(flags.plot, plotHistory(*programs)))
      return fail(std::move(err));
    processLog().info("plot of " + std::to_string(programs->size()) + " program" +
                      (programs->size() == 1 ? "" : "s") + " written to " + flags.plot);
  }
  if (flags.history) {
    if (flags.json)
      llvm::outs() << answer.dump(2) << "\n";
    else
      printHistory(*programs);
  }
  return 0;
}

int status(const StatusOptions &flags) {
  if (flags.history || !flags.plot.empty())
    return history(flags);
  nlohmann::json request = {{"op", "status"}};
  if (!flags.program.empty())
    request["program"] = flags.program;
  auto reply = runtime::askControlSocket(flags.socketPath, request, std::chrono::seconds(10));
  if (!reply)
    return fail(reply.takeError());
  const nlohmann::json &answer = (*reply)["status"];
  if (flags.json) {
    llvm::outs() << answer.dump(2) << "\n";
    return 0;
  }
  if (answer.contains("programs") && answer["programs"].is_array()) {
    if (answer["programs"].empty())
      llvm::outs() << "no programs\n";
    for (const nlohmann::json &program : answer["programs"])
      llvm::outs() << describeProgram(program);
  } else if (answer.contains("state")) {
    llvm::outs() << describeProgram(answer);
  } else {
    llvm::outs() << answer.dump(2) << "\n"; // a `run`'s socket: its one program
  }
  return 0;
}

} // namespace

void addDaemonCommand(CLI::App &morpheus) {
  auto options = std::make_shared<DaemonCommandOptions>();
  CLI::App &command = commandline::addCommand(
      morpheus, "daemon", "the node agent: keep every program of a configuration specialized",
      "Runs every program the configuration file lists, each as 'morpheus run' would\n"
      "(loaded and attached, or adopted from another loader), in one process with\n"
      "one control socket. A program that fails to start is retried (2, 4, ... 64 s);\n"
      "one whose cycles fail backs off alone; neither stops the others. SIGHUP (or\n"
      "{\"op\":\"reload\"} on the socket) re-reads the file: new programs start,\n"
      "removed ones stop (the original swapped back in, pins kept), changed ones\n"
      "restart, the others are not touched. SIGINT/SIGTERM stop every program as\n"
      "'run' stops; after kill -9 the data planes keep serving and the next agent\n"
      "takes their pinned links over. 'morpheus status' lists the programs.\n"
      "\n"
      "Upgrades: --take-over starts a new agent while the old one runs. It asks the\n"
      "old one over the socket to hand over ({\"op\":\"handover\"}): that one stops\n"
      "every program leaving its data plane exactly as it is (links pinned, the\n"
      "specialized version serving, adopted hooks on their trampoline), releases the\n"
      "socket and exits 0; the new agent then claims the socket (waiting up to 60 s)\n"
      "and its programs take the pinned links and trampolines over. Nothing is\n"
      "detached and no packet is dropped on the way.",
      [options](const CLI::App &) { return runAgent(*options); });
  command.add_option("--config", options->config, "the agent's configuration (YAML)")
      ->required()
      ->type_name("FILE");
  command
      .add_option_function<std::string>(
          "--socket", [options](const std::string &path) { options->socketPath = path; },
          "control socket for every program (default: the file's 'socket', else "
          "/run/morpheus/agent.sock)")
      ->type_name("PATH");
  command
      .add_option_function<std::string>(
          "--metrics-address",
          [options](const std::string &address) { options->metricsAddress = address; },
          "serve Prometheus metrics at http://ADDRESS/metrics (default: the file's "
          "'metrics_address', else none)")
      ->type_name("HOST:PORT");
  command.add_flag("--take-over", options->takeOver,
                   "ask the agent serving the socket to hand over, then take its programs "
                   "over (an upgrade; see above)");
  command
      .add_option("--log-format", options->logFormat,
                  "text: lines for people, each started by [PROGRAM] (default); json: one "
                  "object a line, with \"name\": PROGRAM")
      ->transform(commandline::oneOf(
          std::map<std::string, LogFormat>{{"text", LogFormat::Text}, {"json", LogFormat::Json}}))
      ->type_name("text|json");
}

void addStatusCommand(CLI::App &morpheus) {
  auto options = std::make_shared<StatusOptions>();
  CLI::App &command = commandline::addCommand(
      morpheus, "status", "list what an agent serves: each program's state, version and gain",
      "Asks the agent (or a 'morpheus run') through its control socket: per program its\n"
      "state (serving, failed, stopped), the installed version, ns/packet of the\n"
      "generic and the specialized program (kernel bpf_stats) and the gain, the last\n"
      "cycle's outcome and where it is attached. With --history, what the agent kept\n"
      "of each program's past (ns/packet of every status period, each install);\n"
      "--plot writes it as an SVG: ns/packet of each program over time, installs\n"
      "marked.",
      [options](const CLI::App &) { return status(*options); });
  command
      .add_option("--socket", options->socketPath,
                  "the agent's control socket (default /run/morpheus/agent.sock)")
      ->type_name("PATH");
  command.add_option("--program", options->program, "only this program")->type_name("NAME");
  command.add_flag("--json", options->json, "the status (or the history) as JSON");
  command.add_flag("--history", options->history,
                   "each program's history: every status period's ns/packet and packets, "
                   "every install (the last 3 hours at a 1 s period)");
  command
      .add_option("--plot", options->plot,
                  "write the history as an SVG plot: ns/packet of each program over time, "
                  "its installs marked")
      ->type_name("FILE");
}

} // namespace morpheus::cli
