// Which specialized versions a measured exploration tries (`morpheus run
// --explore`, runtime/Exploration): the version the cost model chose, and
// the versions that differ from it by one decision where the model was
// close. A decision is a table pass that rewrote a site into the
// representation the model priced cheapest (RepresentationChoice in the
// specialization log); its alternative is the same pipeline without that
// pass, where the model then takes the next cheapest representation the
// site allows (the trie passes and inline-small-table consult the enabled
// passes), or the map's own lookup. The model is close where the next
// cheapest is predicted within the margin, or where it set aside a cheaper
// representation for its memory (a judgement it cannot measure).
//
// Kept apart from the measuring so the choice of candidates and the budget
// are checked without a kernel.
#pragma once

#include "core/SpecializationLog.h"

#include <cstddef>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// When the model's pick and the next cheapest are close enough to measure:
// the next is predicted at most `ns` or `fraction` of the pick's prediction
// more expensive, whichever is larger. Why 10 ns and a half: between the
// representations where it was measured the model erred by 5.5 ns (the
// router's 20 routes: search and derived table measure alike) and by
// factors on small lookups (the NAT's 2-prefix trie, predicted 5.9 ns
// slower, measures no faster); farther apart than that it was right.
struct ExplorationMargin {
  double ns = 10;
  double fraction = 0.5;
};

// One version to try: the passes it leaves out of those the model's
// version ran (none: the model's version).
struct ExplorationCandidate {
  std::vector<std::string> leftOut;
  // For people: "the model's choice", "without lpm-as-code: search 4.4 ns
  // predicted, next derived 9.2 ns (table 'routes')".
  std::string description;
  // How much slower the model predicts the alternative (the smallest over
  // the sites the pass rewrote); 0 for the model's version.
  double predictedGapNs = 0;
};

// The table passes `candidate` runs: `base` (those the model's version
// ran; unset: all of them) without what it leaves out.
std::optional<std::vector<std::string>>
candidatePasses(const ExplorationCandidate &candidate,
                const std::optional<std::vector<std::string>> &base);

// The model's version first, then at most `trials - 1` alternatives, the
// closest predictions first (one per pass: a pass that rewrote several
// sites is left out at all of them). `trials` below 1 counts as 1.
std::vector<ExplorationCandidate> explorationCandidates(const SpecializationLog &log,
                                                        size_t trials,
                                                        ExplorationMargin margin = {});

// What is served in which slice of an exploration, and what it chose.
// Slot 0 is the generic program (the reference), slot i the candidate
// i - 1. Rounds interleave (generic, first candidate, second, ...; again),
// so drift and noise fall on every slot alike; each slot's figure is the
// median of its slices. A candidate measured slower than the generic
// program's median so far is dropped at once: it serves no second slice
// and is never chosen. So is one that could not be built or installed.
class ExplorationSchedule {
public:
  ExplorationSchedule(size_t candidates, unsigned rounds);

  // The slot the next slice serves; none once every round is done.
  std::optional<size_t> next() const;
  // The slice of `slot` (the one next() gave) measured `nsPerRun`.
  void record(size_t slot, double nsPerRun);
  // The slice of `slot` could not be served: it is dropped, and the
  // schedule moves past it.
  void skip(size_t slot);
  bool dropped(size_t slot) const { return slots.at(slot).dropped; }
  // The median of a slot's slices; none before its first.
  std::optional<double> median(size_t slot) const;
  const std::vector<double> &measured(size_t slot) const { return slots.at(slot).ns; }
  // The candidate slot with the lowest median, measured no slower than the
  // generic program; 0 (the generic program) when none is, or when the
  // generic program was never measured.
  size_t choice() const;
  size_t size() const { return slots.size(); }

private:
  void advance();
  struct Slot {
    std::vector<double> ns;
    bool dropped = false;
  };
  std::vector<Slot> slots;
  unsigned rounds;
  unsigned round = 0;
  size_t position = 0; // the slot next() gives, within `round`
};

} // namespace morpheus::core
