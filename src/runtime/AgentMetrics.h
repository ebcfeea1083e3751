// What the node agent tells Prometheus (runtime/Metrics), one family per
// quantity, labelled by program:
//
//   morpheus_cycles_total{program,outcome}            counter: installed, unchanged,
//                                                      deferred, superseded, failed,
//                                                      refused (shadow validation
//                                                      found a difference)
//   morpheus_verifier_refusals_total{program}          counter: candidates the kernel's
//                                                      verifier refused (each rebuilt
//                                                      with less in the same cycle)
//   morpheus_cycle_phase_seconds{program,phase}        histogram: read (t1),
//                                                      compile (t2), validation,
//                                                      injection
//   morpheus_cycles_deferred_total{program}            counter: waited for the CPU budget
//   morpheus_program_state{program,state}              gauge: 1 for its state
//                                                      (serving, failed, stopped)
//   morpheus_program_starts_total{program}             counter
//   morpheus_installed_version{program}                gauge (0: none installed)
//   morpheus_guard_version{program}                    gauge: each bump adds one
//   morpheus_guard_bumps_total{program}                counter: the version's rises
//                                                      the agent saw, whoever bumped
//   morpheus_instructions{program,version}             gauge: original, specialized
//   morpheus_ns_per_packet{program,version}            gauge: generic, specialized
//                                                      (kernel bpf_stats, last period)
//   morpheus_packets_last_period{program}              gauge
//   morpheus_sites{program,decision}                   gauge: the installed version's
//                                                      lookup sites, specialized or kept
//   morpheus_site_declines{program,pass,reason}        gauge: its kept sites by who
//                                                      declined them and why (a site
//                                                      several passes declined counts
//                                                      under each): SiteOutcome names
//   morpheus_fast_path_hit_ratio{program,site,table}   gauge: share of the lookups
//                                                      sampled at a site that the
//                                                      installed fast path's chain
//                                                      compares (estimated from the
//                                                      traffic profile's samples:
//                                                      core::FastPathHits)
//   morpheus_fast_path_samples{program,site,table}     gauge: the samples that share
//                                                      rests on
//   morpheus_bpf_stats_enabled                         gauge: 1 while the kernel
//                                                      measures run time
//
// Counters and histograms are recorded as cycles run (observe, guardBumped);
// gauges are read from the agent's program states when the page is
// rendered (refresh), so a scrape shows the state of that moment. A
// program removed from the configuration is dropped from every family
// (forget). The fast-path figures are of the last cycle whose samples
// counted any since the version was installed; a site without (no fast
// path, nothing sampled yet) has none, not a zero.
#pragma once

#include "core/SpecializationCycle.h"
#include "runtime/Agent.h"
#include "runtime/Metrics.h"

#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::runtime {

class AgentMetrics {
public:
  static Expected<std::unique_ptr<AgentMetrics>> create();

  void observe(const std::string &program, const core::CycleReport &cycle);
  void guardBumped(const std::string &program, uint64_t bumps);
  void deferred(const std::string &program);
  void started(const std::string &program);
  void forget(const std::string &program);
  // The page: gauges set from `states` first.
  std::string render(const std::vector<AgentProgramState> &states, bool statsEnabled);

private:
  AgentMetrics() = default;

  std::mutex renderMutex; // one page at a time: render rewrites gauges
  metrics::Registry registry;
  std::optional<metrics::CounterFamily> cycles, verifierRefusals, deferrals, starts, guardBumps;
  std::optional<metrics::HistogramFamily> phases;
  std::optional<metrics::GaugeFamily> state, installed, guard, instructions, nsPerPacket, packets,
      sites, siteDeclines, fastPathHitRatio, fastPathSamples, statsEnabled;
};

} // namespace morpheus::runtime
