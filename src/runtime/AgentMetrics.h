// What the node agent tells Prometheus (runtime/Metrics), one family per
// quantity, labelled by program:
//
//   morpheus_cycles_total{program,outcome}            counter
//   morpheus_cycle_phase_seconds{program,phase}        histogram: read (t1),
//                                                      compile (t2), validation,
//                                                      injection
//   morpheus_cycles_deferred_total{program}            counter: waited for the CPU budget
//   morpheus_program_state{program,state}              gauge: 1 for its state
//                                                      (serving, failed, stopped)
//   morpheus_program_starts_total{program}             counter
//   morpheus_installed_version{program}                gauge (0: none installed)
//   morpheus_guard_version{program}                    gauge: each bump adds one
//   morpheus_instructions{program,version}             gauge: original, specialized
//   morpheus_ns_per_packet{program,version}            gauge: generic, specialized
//                                                      (kernel bpf_stats, last period)
//   morpheus_packets_last_period{program}              gauge
//   morpheus_sites{program,decision}                   gauge: the installed version's
//                                                      lookup sites, specialized or kept
//   morpheus_bpf_stats_enabled                         gauge: 1 while the kernel
//                                                      measures run time
//
// Counters and histograms are recorded as cycles run (observe); gauges are
// read from the agent's program states when the page is rendered
// (refresh), so a scrape shows the state of that moment. A program removed
// from the configuration is dropped from every family (forget).
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
  void deferred(const std::string &program);
  void started(const std::string &program);
  void forget(const std::string &program);
  // The page: gauges set from `states` first.
  std::string render(const std::vector<AgentProgramState> &states, bool statsEnabled);

private:
  AgentMetrics() = default;

  std::mutex renderMutex; // one page at a time: render rewrites gauges
  metrics::Registry registry;
  std::optional<metrics::CounterFamily> cycles, deferrals, starts;
  std::optional<metrics::HistogramFamily> phases;
  std::optional<metrics::GaugeFamily> state, installed, guard, instructions, nsPerPacket,
      packets, sites, statsEnabled;
};

} // namespace morpheus::runtime
