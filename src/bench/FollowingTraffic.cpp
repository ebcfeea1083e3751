#include "FollowingTraffic.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <array>
#include <set>

namespace morpheus::bench {

namespace {

// A cycle of a loop following the traffic, in one line: its outcome, and
// per profiled site what the samples said and became of the hot keys.
std::string describeCycle(const core::CycleReport &report) {
  std::string line = report.describe();
  if (report.installed() && report.verifiedInstructions)
    line += llvm::formatv(" ({0} instructions verified)", *report.verifiedInstructions).str();
  for (const auto &[site, traffic] : report.traffic) {
    line += llvm::formatv("; site #{0}: period {1}, {2}", site, traffic.period, traffic.why).str();
    // What became of the hot keys (a recompiled cycle only): each distinct
    // decision once (per-CPU chains dropped by the budget, then the global
    // chain's; a generic copy's twin says the same).
    std::set<std::pair<bool, std::string>> said;
    for (const core::SiteDecision &decision : report.log.decisions)
      if (decision.site == site && decision.decider == core::Decider::HeavyHitterFastPathPass &&
          said.insert({decision.applied, decision.detail}).second)
        line += (decision.applied ? " -> fast path: " : " -> no fast path: ") + decision.detail;
  }
  return line;
}

// Median speed-up of slices [first, first + count) of `slices`.
double medianSpeedup(const std::vector<AdaptationSlice> &slices, uint32_t first, uint32_t count) {
  Series speedups;
  for (uint32_t i = first; i < first + count; ++i)
    speedups.values.push_back(slices[i].speedup);
  return speedups.median();
}

} // namespace

Expected<std::vector<std::string>> followTrace(TraceDriver &driver,
                                               runtime::Optimizer &optimizer, const Trace &trace,
                                               const BenchOptions &options, uint32_t ingress,
                                               LiveTarget *live) {
  if (Error err = driver.setTrace(trace))
    return err;
  TraceTimer timer(driver, trace, ingress, live, cpuEdges(trace, options));
  std::vector<std::string> lines;
  for (uint32_t cycle = 0; cycle < options.trafficCycles; ++cycle) {
    if (auto pass = timer.time(optimizer.activeFd(), 0, uint32_t(trace.sequence.size())); !pass)
      return pass.takeError();
    core::CycleReport report = optimizer.runCycle();
    if (report.outcome == core::CycleOutcome::Failed ||
        report.outcome == core::CycleOutcome::Refused)
      return makeError("trace {0}: cycle {1} of the loop: {2}", trace.name, cycle + 1,
                       report.describe());
    lines.push_back(llvm::formatv("cycle {0}: {1}", cycle + 1, describeCycle(report)).str());
  }
  return lines;
}

Expected<AdaptationResult> adaptToTrace(TraceDriver &driver, runtime::Optimizer &optimizer,
                                        int baselineFd, int emptyFd, const Trace &trace,
                                        const TraceResult &described,
                                        const BenchOptions &options, uint32_t ingress,
                                        LiveTarget *live) {
  if (Error err = driver.setTrace(trace))
    return err;
  TraceTimer timer(driver, trace, ingress, live, cpuEdges(trace, options));
  uint64_t packets = trace.sequence.size();
  uint32_t segments = described.segments;
  // The data-plane state the baseline's passes brought (learnt addresses,
  // connections), brought through the loop's original program, which
  // shares its maps and samples nothing.
  if (auto warm = timer.time(optimizer.originalFd(), 0, uint32_t(packets)); !warm)
    return warm.takeError();
  AdaptationResult result;
  result.periodSlices = options.adaptPeriod;
  for (llvm::StringRef spec : llvm::split(options.phases, ','))
    result.phases.emplace_back().spec = spec.trim().str();
  for (uint32_t i = 0; i < segments; ++i) {
    AdaptationSlice &slice = result.slices.emplace_back();
    if (i > 0 && i % options.adaptPeriod == 0) {
      core::CycleReport report = optimizer.runCycle();
      if (report.outcome == core::CycleOutcome::Failed ||
          report.outcome == core::CycleOutcome::Refused)
        return makeError("trace {0}: the loop's cycle before slice {1}: {2}", trace.name, i + 1,
                         report.describe());
      slice.cycle = describeCycle(report);
      slice.installed = report.installed();
      if (options.progress)
        options.progress(llvm::formatv("  {0}: adaptation cycle before slice {1}: {2}",
                                       trace.name, i + 1, slice.cycle)
                             .str());
    }
    uint32_t start = uint32_t(packets * i / segments);
    uint32_t count = uint32_t(packets * (i + 1) / segments) - start;
    slice.phase = uint32_t(llvm::count_if(described.phaseEdges,
                                          [&](uint64_t edge) { return edge <= start; }));
    for (uint32_t round = 0; round < options.rounds; ++round) {
      // Rotated like the bench's rounds; the running version is asked for
      // each time (a cycle may have swapped it).
      std::array<int, 3> fds = {baselineFd, optimizer.activeFd(), emptyFd};
      std::array<double, 3> ns{};
      for (uint32_t k = 0; k < fds.size(); ++k) {
        uint32_t which = (k + round) % fds.size();
        auto timing = timer.time(fds[which], start, count);
        if (!timing)
          return timing.takeError();
        ns[which] = timing->ns;
      }
      slice.baselineNet.values.push_back(ns[0] - ns[2]);
      slice.morpheusNet.values.push_back(ns[1] - ns[2]);
    }
    slice.speedup = slice.baselineNet.median() / std::max(slice.morpheusNet.median(), 0.1);
    if (options.progress)
      options.progress(llvm::formatv("  {0}: adaptation slice {1}/{2} (phase {3}){4}: baseline "
                                     "{5:f1} ns, morpheus {6:f1} ns",
                                     trace.name, i + 1, segments, slice.phase + 1,
                                     slice.installed ? ", new version" : "",
                                     slice.baselineNet.median(), slice.morpheusNet.median())
                           .str());
  }
  for (uint32_t p = 0; p < result.phases.size(); ++p) {
    PhaseAdaptation &phase = result.phases[p];
    auto inPhase = [&](const AdaptationSlice &s) { return s.phase == p; };
    auto first = llvm::find_if(result.slices, inPhase);
    phase.firstSlice = uint32_t(first - result.slices.begin());
    phase.slices = uint32_t(llvm::count_if(result.slices, inPhase));
    if (phase.slices == 0)
      continue;
    uint32_t secondHalf = phase.slices / 2;
    phase.steadySpeedup = medianSpeedup(result.slices, phase.firstSlice + secondHalf,
                                        phase.slices - secondHalf);
    double gain = phase.steadySpeedup - 1;
    if (gain < 0.02)
      continue;
    for (uint32_t i = 0; i < phase.slices; ++i)
      if (result.slices[phase.firstSlice + i].speedup - 1 >= 0.9 * gain) {
        phase.slicesTo90 = i;
        break;
      }
  }
  return result;
}

} // namespace morpheus::bench
