#include "runtime/AgentMetrics.h"

namespace morpheus::runtime {

namespace {

// From a quarter of a millisecond (a table read) to half a minute (a
// program of production size compiled and verified whole).
const std::vector<double> &phaseBounds() {
  static const std::vector<double> bounds = {0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025,
                                             0.05,    0.1,    0.25,  0.5,    1,     2.5,  5,
                                             10,      30};
  return bounds;
}

template <typename T> Error assign(std::optional<T> &slot, Expected<T> made) {
  if (!made)
    return made.takeError();
  slot.emplace(std::move(*made));
  return Error::success();
}

} // namespace

Expected<std::unique_ptr<AgentMetrics>> AgentMetrics::create() {
  std::unique_ptr<AgentMetrics> made(new AgentMetrics());
  metrics::Registry &r = made->registry;
  const std::vector<std::string> program = {"program"};
  if (Error err = assign(made->cycles, r.counter("morpheus_cycles_total",
                                          "Specialization cycles run, by outcome",
                                          {"program", "outcome"})))
    return std::move(err);
  if (Error err = assign(made->verifierRefusals,
                         r.counter("morpheus_verifier_refusals_total",
                                   "Candidates the kernel's verifier refused (each rebuilt with "
                                   "less in the same cycle)",
                                   program)))
    return std::move(err);
  if (Error err = assign(made->guardBumps,
                         r.counter("morpheus_guard_bumps_total",
                                   "Rises of the program's guard version the agent saw (an "
                                   "update through Morpheus bumps it twice)",
                                   program)))
    return std::move(err);
  if (Error err = assign(made->deferrals,
                  r.counter("morpheus_cycles_deferred_total",
                            "Times a due cycle waited for the agent's CPU budget", program)))
    return std::move(err);
  if (Error err = assign(made->starts, r.counter("morpheus_program_starts_total",
                                          "Times the program was started (restarts included)",
                                          program)))
    return std::move(err);
  if (Error err = assign(made->phases,
                  r.histogram("morpheus_cycle_phase_seconds",
                              "Duration of each phase of a cycle: read (t1), compile (t2), "
                              "validation, injection",
                              {"program", "phase"}, phaseBounds())))
    return std::move(err);
  if (Error err = assign(made->state, r.gauge("morpheus_program_state",
                                       "1 for the program's state: serving, failed, stopped",
                                       {"program", "state"})))
    return std::move(err);
  if (Error err = assign(made->installed, r.gauge("morpheus_installed_version",
                                           "Guard version the installed specialized version "
                                           "was built for (0: none installed)",
                                           program)))
    return std::move(err);
  if (Error err = assign(made->guard, r.gauge("morpheus_guard_version",
                                       "The program's guard version: each bump adds one",
                                       program)))
    return std::move(err);
  if (Error err = assign(made->instructions,
                  r.gauge("morpheus_instructions",
                          "Translated instructions of the original and of the installed "
                          "specialized program",
                          {"program", "version"})))
    return std::move(err);
  if (Error err = assign(made->nsPerPacket,
                  r.gauge("morpheus_ns_per_packet",
                          "Run time per packet over the last status period in which the "
                          "generic or the specialized program ran (kernel bpf_stats)",
                          {"program", "version"})))
    return std::move(err);
  if (Error err = assign(made->packets, r.gauge("morpheus_packets_last_period",
                                         "Packets the program ran in its last status period",
                                         program)))
    return std::move(err);
  if (Error err = assign(made->sites, r.gauge("morpheus_sites",
                                       "Lookup sites of the installed version, specialized "
                                       "or kept generic",
                                       {"program", "decision"})))
    return std::move(err);
  if (Error err = assign(made->siteDeclines,
                         r.gauge("morpheus_site_declines",
                                 "Kept lookup sites of the installed version, by the pass (or "
                                 "analysis) that declined them and its reason; a site several "
                                 "passes declined counts under each",
                                 {"program", "pass", "reason"})))
    return std::move(err);
  const std::vector<std::string> site = {"program", "site", "table"};
  if (Error err = assign(made->fastPathHitRatio,
                         r.gauge("morpheus_fast_path_hit_ratio",
                                 "Share of the lookups sampled at the site in the last cycle "
                                 "that counted samples whose key the installed fast path "
                                 "compares (an estimate from the traffic profile)",
                                 site)))
    return std::move(err);
  if (Error err = assign(made->fastPathSamples,
                         r.gauge("morpheus_fast_path_samples",
                                 "Sampled keys the fast-path hit ratio rests on", site)))
    return std::move(err);
  if (Error err = assign(made->statsEnabled,
                  r.gauge("morpheus_bpf_stats_enabled",
                          "1 while the kernel's bpf_stats measure run time (without it the "
                          "ns/packet figures are absent)")))
    return std::move(err);
  return made;
}

void AgentMetrics::observe(const std::string &program, const core::CycleReport &cycle) {
  cycles->with({program, core::outcomeName(cycle.outcome)}).inc();
  verifierRefusals->with({program}).inc(cycle.refusedByKernel);
  const core::CycleTimes &times = cycle.times;
  for (auto [phase, ms] : {std::pair{"read", times.analysisMs},
                           {"compile", times.codegenMs},
                           {"validation", times.validationMs},
                           {"injection", times.injectionMs}})
    phases->with({program, phase}).observe(ms / 1000);
}

void AgentMetrics::guardBumped(const std::string &program, uint64_t bumps) {
  guardBumps->with({program}).inc(double(bumps));
}

void AgentMetrics::deferred(const std::string &program) { deferrals->with({program}).inc(); }

void AgentMetrics::started(const std::string &program) {
  starts->with({program}).inc();
  // A program's counters are there from its start, at 0 until something
  // is counted (a series appearing late reads as a reset to rate()).
  for (metrics::CounterFamily *family : {&*verifierRefusals, &*deferrals, &*guardBumps})
    family->with({program}).inc(0);
}

void AgentMetrics::forget(const std::string &program) {
  for (metrics::CounterFamily *family :
       {&*cycles, &*verifierRefusals, &*deferrals, &*starts, &*guardBumps})
    family->removeWhere("program", program);
  phases->removeWhere("program", program);
  for (metrics::GaugeFamily *family :
       {&*state, &*installed, &*guard, &*instructions, &*nsPerPacket, &*packets, &*sites,
        &*siteDeclines, &*fastPathHitRatio, &*fastPathSamples})
    family->removeWhere("program", program);
}

std::string AgentMetrics::render(const std::vector<AgentProgramState> &states,
                                 bool statsOn) {
  std::lock_guard lock(renderMutex);
  statsEnabled->with({}).set(statsOn ? 1 : 0);
  for (const AgentProgramState &program : states) {
    const std::string &name = program.name;
    for (auto kind : {AgentProgramState::State::Serving, AgentProgramState::State::Failed,
                      AgentProgramState::State::Stopped})
      state->with({name, agentStateName(kind)}).set(program.state == kind ? 1 : 0);
    installed->with({name}).set(double(program.installedVersion));
    guard->with({name}).set(double(program.guardVersion));
    instructions->with({name, "original"}).set(double(program.originalInstructions));
    instructions->with({name, "specialized"}).set(double(program.specializedInstructions));
    // A version never measured has no figure, not a zero.
    nsPerPacket->removeWhere("program", name);
    if (program.runTime.genericNsPerPacket)
      nsPerPacket->with({name, "generic"}).set(*program.runTime.genericNsPerPacket);
    if (program.runTime.specializedNsPerPacket)
      nsPerPacket->with({name, "specialized"}).set(*program.runTime.specializedNsPerPacket);
    packets->with({name}).set(double(program.runTime.packets));
    sites->with({name, "specialized"}).set(program.sitesSpecialized);
    sites->with({name, "kept"}).set(program.sitesKept);
    // Children of a version no longer installed go with it.
    for (metrics::GaugeFamily *family : {&*siteDeclines, &*fastPathHitRatio, &*fastPathSamples})
      family->removeWhere("program", name);
    for (const auto &[why, count] : program.keptSiteDeclines)
      siteDeclines->with({name, core::deciderName(why.first), core::siteOutcomeName(why.second)})
          .set(count);
    for (const auto &[id, hits] : program.fastPathHits) {
      std::vector<std::string> labels = {name, std::to_string(id), hits.table};
      fastPathHitRatio->with(labels).set(hits.ratio());
      fastPathSamples->with(labels).set(double(hits.samples));
    }
  }
  return registry.exposition();
}

} // namespace morpheus::runtime
