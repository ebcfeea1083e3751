// Choosing by measurement on the kernel (`morpheus run --explore`): after
// the cost model's version is installed, the versions that differ from it
// by one close or unpriced decision (core/ExplorationCandidates) and the
// generic program take turns on the live ports, one slice each, in
// interleaved rounds (with no such decision, the model's version alone is
// measured against the generic program, to see whether it saves what the
// model predicts; when it saves much less, the versions the model was not
// close on join the same exploration's rounds); the kernel's bpf_stats
// (enabled through a scoped descriptor while measuring) give each slice's
// ns per run of the program the hook ran, and the candidate with the
// lowest median that is not slower than the generic program's is kept.
// Every candidate is an ordinary cycle of the optimizer with its table
// passes and inline limit (built, loaded, shadow-validated and
// swapped in atomically as any version), so nothing served was not
// validated, and a swap loses no packet. A version is built once: the
// optimizer keeps it loaded while the exploration runs and installs it
// again for its later slices as long as nothing it was built from changed
// (Optimizer::keepReplacedVersions).
//
// Driven by the daemon: step(now) at due() ends the slice that is due and
// serves the next; the daemon keeps its other work (ports, pins, the
// status line) and abandons the exploration for a change.
#pragma once

#include "backend/bpf/BpfObject.h"
#include "core/ExplorationCandidates.h"
#include "runtime/Optimizer.h"
#include "support/FileDescriptor.h"
#include "support/Log.h"

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::runtime {

struct ExploreOptions {
  // Specialized versions tried, the model's included; 0: no exploration.
  unsigned trials = 0;
  unsigned rounds = 3;                       // slices per version (the median kept)
  std::chrono::milliseconds slice{200};      // one version's turn
  uint64_t minRuns = 1000;                   // a slice lasts until the program ran this often
  std::chrono::milliseconds budget{30000};   // from the first slice to the choice
  core::ExplorationMargin margin;
  // When the model's version, measured against the generic program, saves
  // much less than predicted, the versions it was not close on are tried
  // too (core::gainFallsShort); fraction 0: never.
  core::ShortfallThreshold shortfall;
  // Explore again this long after the last exploration began; 0: only when
  // the traffic's hot keys move (core::hotKeysMoved) or, after the generic
  // program was chosen, on a change. Off by default: each exploration
  // serves the generic program for a slice a round and builds a version a
  // slice, which a stable workload does not pay back.
  std::chrono::milliseconds every{0};
};

class Exploration {
public:
  using Clock = std::chrono::steady_clock;

  // `charged`: the program the kernel charges for the hook's packets now
  // (Daemon::chargedFd). `candidates`: explorationCandidates' (the model's
  // version first), built from `model` (the settings the model's version
  // was built with). Records go to `log`. `widened`: the versions tried
  // after the rounds when the model's version (the first candidate) saved
  // less than options.shortfall asks of `predictedSavingNs`
  // (core::widenedCandidates, core::predictedSavingNs); a `candidates` of
  // the model's version alone then checks its gain.
  Exploration(Optimizer &optimizer, std::function<int()> charged, Log &log,
              ExploreOptions options, std::vector<core::ExplorationCandidate> candidates,
              std::vector<core::ExplorationCandidate> widened, double predictedSavingNs,
              core::VersionSettings model, Clock::time_point now);

  // When step() has something to do.
  Clock::time_point due() const { return sliceEnd; }
  // Ends the slice due at `now` and serves the next one; at the end (the
  // rounds done, the budget spent) serves the choice.
  void step(Clock::time_point now);
  bool finished() const { return over; }
  // Whether the generic program was chosen (no candidate measured faster).
  bool choseGeneric() const { return over && chosen == 0; }
  // Stops at once (`why`: a change arrived): the model's settings again;
  // the next cycle builds its version.
  void abandon(const std::string &why);

  const core::ExplorationSchedule &schedule() const { return rounds; }

private:
  // The settings of candidate slot `slot` (1 and up).
  core::VersionSettings settingsOf(size_t slot) const;
  std::string nameOf(size_t slot) const;
  // Makes `slot` the running program; false when it cannot (said, and the
  // slot dropped).
  bool serve(size_t slot);
  // Serves the next slot the schedule gives (skipping those that cannot be
  // served), or the choice.
  void serveNext(Clock::time_point now);
  void finish(const std::string &why);
  // After the rounds: when the model's version measured short of its
  // predicted saving, adds the widened versions to the schedule (true).
  bool widen();

  Optimizer &opt;
  std::function<int()> charged;
  Log &log;
  ExploreOptions options;
  std::vector<core::ExplorationCandidate> candidates;
  std::vector<core::ExplorationCandidate> widened;
  double predictedSaving;
  core::VersionSettings model;
  core::ExplorationSchedule rounds;
  FileDescriptor stats; // bpf_stats on while this exploration measures
  Clock::time_point started, sliceStart, sliceEnd;
  size_t serving = 0;   // the slot the running slice serves
  std::optional<size_t> installedSlot; // the candidate slot whose version is installed
  // The cycle that built the version serving now, when a later one
  // installed it again (Optimizer::keepReplacedVersions).
  std::optional<uint64_t> keptFrom;
  bpf::ProgramRunStats base;
  size_t chosen = 0;
  bool over = false;
};

} // namespace morpheus::runtime
