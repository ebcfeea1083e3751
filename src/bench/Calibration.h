// `morpheus bench calibrate`: the cost model's unit costs measured on this
// machine (src/bench/calibrate.bpf.c, one program per operation, each run
// by BPF_PROG_TEST_RUN interleaved round by round with a control that does
// everything else they do), fitted into a core::CostModel that `run` and
// `bench` load from the cache (runtime/CostCalibration.h).
#pragma once

#include "Bench.h"
#include "core/CostModel.h"

#include <functional>
#include <string>
#include <vector>

namespace morpheus::bench {

struct CalibrationOptions {
  uint32_t rounds = 15;  // rounds, programs interleaved
  uint32_t runs = 20000; // BPF_PROG_TEST_RUN repetitions per program and round
  int cpu = -1;          // measuring CPU; -1 = the last one
  std::function<void(const std::string &)> progress;
};

// One measured operation: ns per operation, per round (the program less
// the control, over its operation count).
struct MeasuredOperation {
  std::string name; // "hash lookup (1,024 keys)"
  Series ns;
};

struct CalibrationResult {
  core::CostModel model;
  std::vector<MeasuredOperation> operations;
  double loadAverage = 0; // the 1-minute load average when it started
};

Expected<CalibrationResult> calibrate(const CalibrationOptions &options);

// What `morpheus bench calibrate` prints.
std::string formatCalibration(const CalibrationResult &result);

} // namespace morpheus::bench
