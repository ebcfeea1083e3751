#include "runtime/Agent.h"

#include "backend/bpf/BpfObject.h"
#include "runtime/AgentMetrics.h"
#include "runtime/Handover.h"
#include "support/Excerpt.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <ctime>
#include <exception>
#include <set>

#include <unistd.h>

namespace morpheus::runtime {

namespace {

using nlohmann::json;

// A program that failed to start waits 2^n seconds before the next try,
// up to 64: a source that does not compile costs a compile a minute.
constexpr unsigned MaxRetryShift = 6;
// The longest a reload asked through the socket waits for the loop (it
// compiles the programs it starts).
constexpr std::chrono::minutes ReloadReplyLimit{5};
// The budget saves up at most this much wall time's worth.
constexpr double BudgetWindowSeconds = 1.0;

double threadCpuSeconds() {
  timespec now{};
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

// The longest the next agent waits for the one it takes over from to
// stop its programs and release the socket.
constexpr std::chrono::seconds HandoverLimit{60};

// The agent's socket, taken over from the agent serving it if told so.
Expected<TakenOver> claimSocket(const AgentOptions &options) {
  if (options.takeOver)
    return takeOverControlSocket(options.socketPath, HandoverLimit);
  auto claimed = ControlSocketClaim::claim(options.socketPath);
  if (!claimed)
    return claimed.takeError();
  return TakenOver{std::move(*claimed), 0};
}

// `at` on the loop's clock as Unix seconds (the history's times).
double unixSeconds(Agent::Clock::time_point at) {
  auto wall =
      std::chrono::system_clock::now() +
      std::chrono::duration_cast<std::chrono::system_clock::duration>(at - Agent::Clock::now());
  return std::chrono::duration<double>(wall.time_since_epoch()).count();
}

json cycleJson(const core::CycleReport &cycle) {
  return {{"cycle", cycle.cycle},
          {"outcome", core::outcomeName(cycle.outcome)},
          {"detail", cycle.detail},
          {"version", cycle.version},
          {"instructions", cycle.instructions},
          {"t1_ms", cycle.times.analysisMs},
          {"t2_ms", cycle.times.codegenMs},
          {"validation_ms", cycle.times.validationMs},
          {"injection_ms", cycle.times.injectionMs}};
}

} // namespace

const char *agentStateName(AgentProgramState::State state) {
  switch (state) {
  case AgentProgramState::State::Serving:
    return "serving";
  case AgentProgramState::State::Failed:
    return "failed";
  case AgentProgramState::State::Stopped:
    return "stopped";
  }
  return "unknown";
}

json AgentChanges::toJson() const {
  json failures = json::object();
  for (const auto &[name, why] : failed)
    failures[name] = why;
  return {{"started", started},
          {"restarted", restarted},
          {"stopped", stopped},
          {"unchanged", unchanged},
          {"failed", failures}};
}

std::string AgentChanges::describe() const {
  std::vector<std::string> parts;
  auto add = [&parts](const char *what, const std::vector<std::string> &names) {
    if (!names.empty())
      parts.push_back(std::string(what) + " " + llvm::join(names, ", "));
  };
  add("started", started);
  add("restarted", restarted);
  add("stopped", stopped);
  add("unchanged", unchanged);
  for (const auto &[name, why] : failed)
    parts.push_back("'" + name + "' did not start: " + why);
  return parts.empty() ? "no programs" : llvm::join(parts, "; ");
}

json AgentProgramState::toJson() const {
  json cycles = json::object();
  for (const auto &[outcome, count] : cyclesByOutcome)
    cycles[core::outcomeName(outcome)] = count;
  json ns = json::object();
  if (runTime.genericNsPerPacket)
    ns["generic"] = *runTime.genericNsPerPacket;
  if (runTime.specializedNsPerPacket)
    ns["specialized"] = *runTime.specializedNsPerPacket;
  json fields = {{"name", name},
                 {"state", agentStateName(state)},
                 {"detail", detail},
                 {"attached_to", attachedTo},
                 {"installed_version", installedVersion},
                 {"guard_version", guardVersion},
                 {"cycles", cycles},
                 {"cycles_deferred", cyclesDeferred},
                 {"starts", starts},
                 {"ns_per_packet", ns},
                 {"packets_last_period", runTime.packets},
                 {"instructions",
                  {{"original", originalInstructions}, {"specialized", specializedInstructions}}},
                 {"sites", {{"specialized", sitesSpecialized}, {"kept", sitesKept}}},
                 {"guard_bumps", guardBumps},
                 {"kept_generic", keptGeneric}};
  json declines = json::array();
  for (const auto &[why, sites] : keptSiteDeclines)
    declines.push_back({{"pass", core::deciderName(why.first)},
                        {"reason", core::siteOutcomeName(why.second)},
                        {"sites", sites}});
  fields["sites"]["kept_declines"] = std::move(declines);
  json fastPaths = json::array();
  for (const auto &[site, hits] : fastPathHits)
    fastPaths.push_back({{"site", site},
                         {"table", hits.table},
                         {"hit_ratio", hits.ratio()},
                         {"samples", hits.samples}});
  fields["fast_paths"] = std::move(fastPaths);
  if (runTime.genericNsPerPacket && runTime.specializedNsPerPacket &&
      *runTime.specializedNsPerPacket > 0)
    fields["gain"] = *runTime.genericNsPerPacket / *runTime.specializedNsPerPacket;
  if (lastCycle)
    fields["last_cycle"] = cycleJson(*lastCycle);
  return fields;
}

Agent::Agent(AgentOptions options, llvm::raw_ostream &out, llvm::raw_ostream &errors)
    : options(std::move(options)), out(out), errors(errors),
      log(out, errors, this->options.logLevel, this->options.logFormat) {}

Expected<std::unique_ptr<Agent>> Agent::start(AgentOptions options,
                                              std::vector<AgentProgram> programs,
                                              llvm::raw_ostream &out,
                                              llvm::raw_ostream &errors) {
  // The socket first: an agent refused its socket (another agent serves
  // it) starts nothing.
  std::optional<ControlSocketClaim> socket;
  pid_t handedOverBy = 0;
  if (!options.socketPath.empty()) {
    auto claimed = claimSocket(options);
    if (!claimed)
      return claimed.takeError();
    socket.emplace(std::move(claimed->claim));
    handedOverBy = claimed->from;
  }
  std::unique_ptr<Agent> agent(new Agent(std::move(options), out, errors));
  if (handedOverBy)
    agent->log.record("taken_over", {{"from", handedOverBy}},
                      llvm::formatv("agent: process {0} handed over; taking its programs over\n",
                                    handedOverBy)
                          .str());
  if (socket) {
    auto server = ControlServer::start(
        std::move(*socket),
        [raw = agent.get()](const ControlRequest &request) { return raw->answer(request); });
    if (!server)
      return server.takeError();
    agent->server = std::move(*server);
  }
  agent->budgetFilledAt = Clock::now();
  agent->budgetLeft = agent->options.cpuBudget * BudgetWindowSeconds;
  AgentChanges changes = agent->apply(std::move(programs));
  agent->log.record("agent_started", changes.toJson(), "agent: " + changes.describe() + "\n");
  return agent;
}

Agent::~Agent() {
  // Reloads waiting on the server thread are answered first (stopping the
  // server joins that thread), then the socket goes: no request may reach
  // a program going away.
  refuseReloads("reload: the agent is stopping");
  server.reset();
  for (auto &[name, entry] : entries)
    stopEntry(entry);
}

Log Agent::logOf(const Entry &entry) const {
  return Log(out, errors, options.logLevel, options.logFormat, "morpheus", entry.config.name);
}

void Agent::refuseReloads(const std::string &why) {
  std::lock_guard lock(wakeMutex);
  stopping = true;
  for (std::promise<std::string> &reply : reloadReplies)
    reply.set_value(controlFailure(why));
  reloadReplies.clear();
}

bool Agent::handoverAsked() {
  std::lock_guard lock(wakeMutex);
  return handoverRequested;
}

std::string Agent::answerHandover() {
  {
    std::lock_guard lock(wakeMutex);
    if (stopping)
      return controlFailure("handover: the agent is stopping");
    handoverRequested = true;
  }
  wake();
  return controlReply({{"pid", getpid()}});
}

void Agent::handOver() {
  refuseReloads("reload: the agent is handing over to the next");
  // Requests still reach the table meanwhile: a program whose daemon is
  // gone answers that it was handed over.
  for (auto &[name, entry] : entries) {
    if (entry.daemon)
      entry.daemon->handOver();
    stopEntry(entry);
    std::unique_lock lock(tableMutex);
    entry.state.state = AgentProgramState::State::Stopped;
    entry.state.detail = "handed over to the next agent";
  }
  // The claim goes last: the next agent starts once every data plane is
  // left for it to take over.
  server.reset();
}

void Agent::startEntry(Entry &entry, Clock::time_point now) {
  std::string failure;
  std::unique_ptr<Daemon> started;
  // A program's start must not end the agent, whatever it throws.
  try {
    auto daemon = Daemon::start(entry.config.path, entry.config.options, out, errors);
    if (daemon)
      started = std::move(*daemon);
    else
      failure = llvm::toString(daemon.takeError());
  } catch (const std::exception &thrown) {
    failure = std::string("unexpected error: ") + thrown.what();
  }
  std::unique_lock lock(tableMutex);
  AgentProgramState &state = entry.state;
  if (started) {
    entry.daemon = std::move(started);
    entry.startFailures = 0;
    state.state = AgentProgramState::State::Serving;
    state.attachedTo = entry.daemon->attachedTo();
    state.detail = "";
    state.originalInstructions =
        bpf::translatedInstructions(entry.daemon->optimizer().originalFd());
    state.keptGeneric.clear();
    for (const auto &[name, table] : entry.daemon->optimizer().spec().catalog())
      if (table.keptGeneric)
        state.keptGeneric.push_back(name);
    // Bumps count from here (a guard taken over keeps its version).
    state.guardVersion = entry.daemon->optimizer().guard().version();
    entry.periodsSampled = 0;
    ++state.starts;
    if (options.metrics)
      options.metrics->started(entry.config.name);
    return;
  }
  ++entry.startFailures;
  unsigned wait = 1u << std::min(entry.startFailures, MaxRetryShift);
  entry.retryAt = now + std::chrono::seconds(wait);
  state.state = AgentProgramState::State::Failed;
  state.detail = failure;
  lock.unlock();
  logOf(entry).error(llvm::formatv("did not start: {0} (next try in {1} s)", failure, wait).str());
}

void Agent::stopEntry(Entry &entry) {
  std::unique_ptr<Daemon> going;
  {
    std::unique_lock lock(tableMutex);
    going = std::move(entry.daemon);
  }
  if (!going)
    return;
  Daemon::ExitNote leaving = going->exitNote();
  logOf(entry).record("stopping", std::move(leaving.fields), leaving.text);
  going.reset(); // the last swap (to the original) happens here
}

AgentChanges Agent::apply(std::vector<AgentProgram> programs) {
  AgentChanges changes;
  std::map<std::string, AgentProgram> wanted;
  for (AgentProgram &program : programs) {
    std::string name = program.name;
    program.options.name = name;
    wanted.emplace(name, std::move(program));
  }
  // Stopped first: a changed program's new configuration may take over
  // the interface or pins of the old one.
  std::vector<std::string> gone;
  for (auto &[name, entry] : entries) {
    auto next = wanted.find(name);
    if (next != wanted.end() && next->second.fingerprint == entry.config.fingerprint)
      continue;
    stopEntry(entry);
    if (next == wanted.end())
      gone.push_back(name);
  }
  {
    std::unique_lock lock(tableMutex);
    for (const std::string &name : gone)
      entries.erase(name);
  }
  if (options.metrics)
    for (const std::string &name : gone)
      options.metrics->forget(name);
  changes.stopped = gone;
  Clock::time_point now = Clock::now();
  for (auto &[name, program] : wanted) {
    auto existing = entries.find(name);
    if (existing != entries.end() && existing->second.config.fingerprint == program.fingerprint) {
      changes.unchanged.push_back(name);
      continue;
    }
    Entry *entry;
    {
      std::unique_lock lock(tableMutex);
      bool isNew = existing == entries.end();
      (isNew ? changes.started : changes.restarted).push_back(name);
      Entry &slot = entries[name];
      if (isNew)
        slot.history = ProgramHistory(options.historyCapacity);
      slot.config = std::move(program);
      slot.state.name = name;
      slot.state.state = AgentProgramState::State::Failed;
      slot.state.detail = "starting";
      slot.startFailures = 0;
      slot.deferredSince.reset();
      entry = &slot;
    }
    startEntry(*entry, now);
    if (!entry->daemon)
      changes.failed[name] = entry->state.detail;
  }
  return changes;
}

Expected<AgentChanges> Agent::reload() {
  if (!options.loadConfiguration)
    return makeError("this agent has no configuration file to reload");
  auto programs = options.loadConfiguration();
  if (!programs)
    return withContext(programs.takeError(), "reload refused, nothing changed");
  AgentChanges changes = apply(std::move(*programs));
  log.record("reloaded", changes.toJson(), "agent: reloaded: " + changes.describe() + "\n");
  return changes;
}

void Agent::requestReload() {
  {
    std::lock_guard lock(wakeMutex);
    reloadAsked = true;
  }
  wake();
}

void Agent::wake() {
  {
    std::lock_guard lock(wakeMutex);
    woken = true;
  }
  wakeUp.notify_all();
}

bool Agent::budgetAllows(Clock::time_point now) {
  if (options.cpuBudget <= 0)
    return true;
  double elapsed = std::chrono::duration<double>(now - budgetFilledAt).count();
  budgetFilledAt = now;
  budgetLeft = std::min(budgetLeft + elapsed * options.cpuBudget,
                        options.cpuBudget * BudgetWindowSeconds);
  return budgetLeft > 0;
}

void Agent::charge(double cpuSeconds) {
  if (options.cpuBudget > 0)
    budgetLeft -= cpuSeconds;
}

void Agent::record(Entry &entry, const core::CycleReport &cycle, Clock::time_point now) {
  std::unique_lock lock(tableMutex);
  AgentProgramState &state = entry.state;
  state.lastCycle = cycle;
  ++state.cyclesByOutcome[cycle.outcome];
  if (options.metrics)
    options.metrics->observe(entry.config.name, cycle);
  // The hits are of the version installed before this cycle.
  for (const auto &[site, hits] : cycle.fastPathHits)
    state.fastPathHits[site] = hits;
  if (!cycle.installed())
    return;
  entry.history.install({unixSeconds(now), cycle.version});
  state.fastPathHits.clear();
  state.specializedInstructions = cycle.instructions;
  // A site may carry several deciders' decisions: specialized if one
  // applied, else kept for every reason given.
  std::map<unsigned, bool> sites;
  std::map<unsigned, std::set<std::pair<core::Decider, core::SiteOutcome>>> declines;
  for (const core::SiteDecision &site : cycle.log.decisions) {
    bool applied = site.outcome == core::SiteOutcome::Applied;
    sites[site.site] |= applied;
    if (!applied)
      declines[site.site].insert({site.decider, site.outcome});
  }
  state.sitesSpecialized = state.sitesKept = 0;
  state.keptSiteDeclines.clear();
  for (const auto &[site, specialized] : sites) {
    ++(specialized ? state.sitesSpecialized : state.sitesKept);
    if (!specialized)
      for (const auto &why : declines[site])
        ++state.keptSiteDeclines[why];
  }
}

void Agent::readDaemon(Entry &entry, Clock::time_point now) {
  Daemon &daemon = *entry.daemon;
  std::unique_lock lock(tableMutex);
  AgentProgramState &state = entry.state;
  state.installedVersion = daemon.optimizer().installedVersion();
  uint64_t guard = daemon.optimizer().guard().version();
  if (guard > state.guardVersion) {
    state.guardBumps += guard - state.guardVersion;
    if (options.metrics)
      options.metrics->guardBumped(entry.config.name, guard - state.guardVersion);
  }
  state.guardVersion = guard;
  const Daemon::RunTime &ran = daemon.runTime();
  state.runTime = ran;
  if (ran.period == entry.periodsSampled)
    return;
  entry.periodsSampled = ran.period;
  HistorySample sample{unixSeconds(now), ran.packets, ran.specialized, std::nullopt};
  if (ran.packets)
    sample.nsPerPacket = ran.specialized ? ran.specializedNsPerPacket : ran.genericNsPerPacket;
  entry.history.sample(sample);
}

unsigned Agent::step(Clock::time_point now) {
  std::vector<std::promise<std::string>> replies;
  bool reloadNow;
  {
    std::lock_guard lock(wakeMutex);
    woken = false;
    reloadNow = std::exchange(reloadAsked, false) || !reloadReplies.empty();
    replies = std::move(reloadReplies);
    reloadReplies.clear();
  }
  if (reloadNow) {
    auto changes = reload();
    std::string reply;
    if (changes)
      reply = controlReply({{"changes", changes->toJson()}});
    else {
      std::string why = llvm::toString(changes.takeError());
      log.error(why);
      reply = controlFailure(why);
    }
    for (std::promise<std::string> &waiting : replies)
      waiting.set_value(reply);
  }

  for (auto &[name, entry] : entries)
    if (!entry.daemon && entry.state.state == AgentProgramState::State::Failed &&
        entry.retryAt <= now)
      startEntry(entry, now);

  // Due programs: those the budget deferred first, the longest waiting
  // first; then those a change waits for, then the busiest, then the one
  // whose last turn is the oldest (the header says why).
  struct Due {
    Entry *entry;
    Daemon::Work work;
  };
  std::vector<Due> due;
  for (auto &[name, entry] : entries) {
    if (!entry.daemon)
      continue;
    if (Daemon::Work work = entry.daemon->pending(now); work != Daemon::Work::None)
      due.push_back({&entry, work});
  }
  std::stable_sort(due.begin(), due.end(), [](const Due &a, const Due &b) {
    const std::optional<Clock::time_point> &waitedA = a.entry->deferredSince,
                                           &waitedB = b.entry->deferredSince;
    if (waitedA.has_value() != waitedB.has_value())
      return waitedA.has_value();
    if (waitedA && *waitedA != *waitedB)
      return *waitedA < *waitedB;
    if ((a.work == Daemon::Work::Change) != (b.work == Daemon::Work::Change))
      return a.work == Daemon::Work::Change;
    uint64_t packetsA = a.entry->daemon->runTime().packets,
             packetsB = b.entry->daemon->runTime().packets;
    if (packetsA != packetsB)
      return packetsA > packetsB;
    return a.entry->lastTurnAt < b.entry->lastTurnAt;
  });

  unsigned cycles = 0;
  for (Due &item : due) {
    Entry &entry = *item.entry;
    if (!budgetAllows(now)) {
      if (!entry.deferredSince)
        entry.deferredSince = now;
      std::unique_lock lock(tableMutex);
      ++entry.state.cyclesDeferred;
      if (options.metrics)
        options.metrics->deferred(entry.config.name);
      continue;
    }
    double before = threadCpuSeconds();
    std::optional<core::CycleReport> cycle;
    std::string thrown;
    try {
      cycle = entry.daemon->step(now);
    } catch (const std::exception &error) {
      thrown = error.what();
    }
    charge(threadCpuSeconds() - before);
    entry.lastTurnAt = now;
    entry.deferredSince.reset();
    if (!thrown.empty()) {
      // Whatever state the daemon was left in, it is not trusted again:
      // it stops as `run` stops (its pins kept) and starts afresh. The
      // log says why, not only the status.
      std::string why = "unexpected error in a cycle: " + thrown;
      logOf(entry).error(why + "; stopping the program and starting it again");
      stopEntry(entry);
      std::unique_lock lock(tableMutex);
      entry.state.state = AgentProgramState::State::Failed;
      entry.state.detail = why;
      entry.retryAt = now;
      continue;
    }
    if (cycle) {
      ++cycles;
      record(entry, *cycle, now);
    }
    readDaemon(entry, now);
    std::unique_lock lock(tableMutex);
    if (entry.daemon->ownerMovedOn()) {
      lock.unlock();
      stopEntry(entry);
      lock.lock();
      entry.state.state = AgentProgramState::State::Stopped;
      entry.state.detail = "the owner moved on (its program replaced or detached, or its "
                           "tail calls reach the kernel's limit): not adopted any more";
    }
  }
  return cycles;
}

void Agent::waitForWork(std::chrono::milliseconds limit) {
  Clock::time_point until = Clock::now() + limit;
  for (auto &[name, entry] : entries) {
    if (entry.daemon)
      until = std::min(until, entry.daemon->wakeAt());
    else if (entry.state.state == AgentProgramState::State::Failed)
      until = std::min(until, entry.retryAt);
  }
  std::unique_lock lock(wakeMutex);
  wakeUp.wait_until(lock, until, [this] { return woken || reloadAsked; });
}

std::vector<AgentProgramState> Agent::states() const {
  std::shared_lock lock(tableMutex);
  std::vector<AgentProgramState> all;
  for (const auto &[name, entry] : entries)
    all.push_back(entry.state);
  return all;
}

json Agent::status() const {
  json programs = json::array();
  for (const AgentProgramState &state : states())
    programs.push_back(state.toJson());
  return {{"programs", programs}};
}

Daemon *Agent::daemon(const std::string &name) {
  std::shared_lock lock(tableMutex);
  auto found = entries.find(name);
  return found == entries.end() ? nullptr : found->second.daemon.get();
}

std::string Agent::answerStatus(const ControlRequest &request) {
  if (request.program.empty())
    return controlReply({{"status", status()}});
  std::shared_lock lock(tableMutex);
  auto found = entries.find(request.program);
  if (found == entries.end())
    return controlFailure("\"program\": no program '" + excerptForMessage(request.program) +
                          "' in this agent");
  return controlReply({{"status", found->second.state.toJson()}});
}

Expected<json> Agent::history(const std::string &program) const {
  std::shared_lock lock(tableMutex);
  json programs = json::array();
  for (const auto &[name, entry] : entries) {
    if (!program.empty() && name != program)
      continue;
    json one = entry.history.toJson();
    one["name"] = name;
    programs.push_back(std::move(one));
  }
  if (!program.empty() && programs.empty())
    return makeError("\"program\": no program '{0}' in this agent", excerptForMessage(program));
  return json{{"programs", std::move(programs)}};
}

std::string Agent::answerHistory(const ControlRequest &request) {
  auto kept = history(request.program);
  if (!kept)
    return controlFailure(llvm::toString(kept.takeError()));
  return controlReply({{"history", std::move(*kept)}});
}

std::string Agent::answer(const ControlRequest &request) {
  switch (request.op) {
  case ControlOp::Status:
    return answerStatus(request);
  case ControlOp::History:
    return answerHistory(request);
  case ControlOp::Reload: {
    std::future<std::string> reply;
    {
      std::lock_guard lock(wakeMutex);
      if (stopping)
        return controlFailure("reload: the agent is stopping");
      reloadReplies.emplace_back();
      reply = reloadReplies.back().get_future();
    }
    wake();
    if (reply.wait_for(ReloadReplyLimit) != std::future_status::ready)
      return controlFailure("reload: still running after 5 minutes; see the agent's log");
    return reply.get();
  }
  case ControlOp::Handover:
    return answerHandover();
  case ControlOp::Update:
  case ControlOp::Delete:
    break;
  }
  std::shared_lock lock(tableMutex);
  std::vector<std::string> names;
  for (const auto &[name, entry] : entries)
    names.push_back(name);
  if (request.program.empty() && entries.size() != 1)
    return controlFailure("\"program\": missing: this agent serves " +
                          (names.empty() ? std::string("no program")
                                         : "several programs (" + llvm::join(names, ", ") + ")"));
  auto found = request.program.empty() ? entries.begin() : entries.find(request.program);
  if (found == entries.end())
    return controlFailure("\"program\": no program '" + excerptForMessage(request.program) +
                          "' in this agent (it serves " +
                          (names.empty() ? std::string("none") : llvm::join(names, ", ")) + ")");
  Daemon *daemon = found->second.daemon.get();
  if (!daemon)
    return controlFailure("program '" + found->first + "' is " +
                          agentStateName(found->second.state.state) + ": " +
                          found->second.state.detail);
  return applyMapChange(daemon->optimizer(), request, [this, daemon] {
    daemon->notifyChange();
    wake();
  });
}

} // namespace morpheus::runtime
