// Timed phases: where building a version (SpecializationLog::phases),
// startup (Optimizer::startupPhases), shadow validation and injection
// (CycleTimes) spent their time, as one list of core::BuildPhase each.
#pragma once

#include "core/SpecializationLog.h"

#include <llvm/Support/FormatVariadic.h>

#include <chrono>
#include <string>
#include <vector>

namespace morpheus::core {

// Times consecutive phases into `into`: each end() closes the phase that
// began at the previous end() (or at construction) and opens the next.
class PhaseClock {
public:
  explicit PhaseClock(std::vector<BuildPhase> &into)
      : phases(&into), start(std::chrono::steady_clock::now()) {}
  void end(std::string phase) {
    auto now = std::chrono::steady_clock::now();
    phases->push_back(
        {std::move(phase), std::chrono::duration<double, std::milli>(now - start).count()});
    start = now;
  }
  // Phases timed elsewhere that ran up to now (the next phase begins now).
  void append(const std::vector<BuildPhase> &done) {
    phases->insert(phases->end(), done.begin(), done.end());
    start = std::chrono::steady_clock::now();
  }

private:
  std::vector<BuildPhase> *phases;
  std::chrono::steady_clock::time_point start;
};

// "clone 1.2; planning 30.5; ..." (ms), in the order the phases ran.
inline std::string phasesText(const std::vector<BuildPhase> &phases) {
  std::string out;
  for (const BuildPhase &phase : phases)
    out += llvm::formatv("{0}{1} {2:f1}", out.empty() ? "" : "; ", phase.phase, phase.ms).str();
  return out;
}

} // namespace morpheus::core
