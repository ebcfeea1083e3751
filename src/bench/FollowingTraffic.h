// Morpheus following the traffic during a benchmark: the loop variants
// (an optimizer whose program samples lookup keys, and cycles run on each
// trace before it is timed) and the adaptation experiment (cycles between
// the slices of a phased trace as it plays).
#pragma once

#include "Bench.h"
#include "TraceTimer.h"

#include <memory>
#include <string>
#include <vector>

namespace morpheus::bench {

// Morpheus following the traffic: an optimizer whose program records
// lookup keys, and, for the loop variants, cycles run on the trace.
inline constexpr char MorpheusName[] = "morpheus",
                      AdaptiveInstrumentationName[] = "adaptive-instrumentation",
                      NaiveInstrumentationName[] = "naive-instrumentation",
                      SamplingPrefix[] = "sampling-every-",
                      GlobalChainName[] = "morpheus-global-chain";

struct FollowingVariant {
  std::string name;
  std::unique_ptr<runtime::Optimizer> optimizer;
  bool loop; // cycles on each trace before timing
};

// The loop on one trace, as `morpheus run` would run it: the whole trace
// through the running version (which samples it), then a cycle, each of
// `options.trafficCycles` times. Returns one line per cycle.
Expected<std::vector<std::string>> followTrace(TraceDriver &driver,
                                               runtime::Optimizer &optimizer, const Trace &trace,
                                               const BenchOptions &options, uint32_t ingress,
                                               LiveTarget *live);

// The adaptation experiment (the papers' phased traces, issue 11): the
// trace plays in order, slice by slice, each slice timed `rounds` times
// through the baseline and the running version of `optimizer` (and the
// control), interleaved; every `period` slices the loop runs a cycle on
// what the running version sampled so far, as `morpheus run` would each
// period. The optimizer starts instrumented and without fast paths.
Expected<AdaptationResult> adaptToTrace(TraceDriver &driver, runtime::Optimizer &optimizer,
                                        int baselineFd, int emptyFd, const Trace &trace,
                                        const TraceResult &described,
                                        const BenchOptions &options, uint32_t ingress,
                                        LiveTarget *live);

} // namespace morpheus::bench
