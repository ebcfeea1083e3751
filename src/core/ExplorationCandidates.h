// Which specialized versions a measured exploration tries (`morpheus run
// --explore`, runtime/Exploration): the version the cost model chose, and
// the versions that differ from it by one decision where the model was
// close. A decision is a table pass that rewrote a site into the
// representation the model priced cheapest (RepresentationChoice in the
// specialization log); its alternatives are the same pipeline without that
// pass, where the model then takes the next cheapest representation the
// site allows (the trie passes and inline-small-table consult the enabled
// passes), or the map's own lookup, and without the passes of every
// representation priced before a later one, which the site then gets (the
// third cheapest is two passes away). The model is close where an
// alternative is predicted within the margin, or where it set aside a cheaper
// representation for its memory (a judgement it cannot measure). A
// decision the model does not price (a small table inlined as a compare
// chain) is a candidate of its own kind: the version with the inline limit
// just under the chain's length, where the table keeps its lookup. When
// the model's version, measured, saves much less than the model predicts
// (gainFallsShort), the decisions it was not close on are tried too
// (widenedCandidates).
//
// Kept apart from the measuring so the choice of candidates and the budget
// are checked without a kernel.
#pragma once

#include "core/SpecializationLog.h"

#include <cstddef>
#include <map>
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

// What a version is built with that an exploration varies: the table
// passes (unset: all of them) and the inline limit (the largest table
// inlined whole).
struct VersionSettings {
  std::optional<std::vector<std::string>> tablePasses;
  uint32_t inlineLimit = 64;
  bool operator==(const VersionSettings &) const = default;
};

// One version to try: the passes it leaves out of those the model's
// version ran, and a lower inline limit (none of either: the model's
// version).
struct ExplorationCandidate {
  std::vector<std::string> leftOut;
  // Set for a decision the model does not price: a table inline-small-table
  // made a compare chain of, kept as its lookup by an inline limit just
  // below its entries (smaller tables are still inlined).
  std::optional<uint32_t> inlineLimit;
  // For people: "the model's choice", "without lpm-as-code: search 4.4 ns
  // predicted, next derived 9.2 ns (table 'routes')".
  std::string description;
  // How much slower the model predicts the alternative (the smallest over
  // the sites the pass rewrote); 0 for the model's version and for an
  // unpriced decision.
  double predictedGapNs = 0;

  // Whether the two build the same settings from the same model's.
  bool sameVersion(const ExplorationCandidate &other) const {
    return leftOut == other.leftOut && inlineLimit == other.inlineLimit;
  }
};

// What `candidate` is built with: `model` (the model's version's
// settings) without the passes it leaves out, at its inline limit if it
// has one.
VersionSettings candidateSettings(const ExplorationCandidate &candidate,
                                  const VersionSettings &model);

// The model's version first, then at most `trials - 1` alternatives: the
// closest predictions first (one per set of passes left out: a pass that
// rewrote several sites is left out at all of them), then the decisions
// the model does not price, the largest compare chain first (one inline
// limit per chain length: every table of that length or more keeps its
// lookup). An
// unpriced decision is always tried: nothing says the model was right.
// `trials` below 1 counts as 1.
std::vector<ExplorationCandidate> explorationCandidates(const SpecializationLog &log,
                                                        size_t trials,
                                                        ExplorationMargin margin = {});

// The versions to try once the model's measured gain fell short of its
// prediction (gainFallsShort): those explorationCandidates set aside as
// not close (every priced decision with an alternative), leaving out the
// ones in `tried`, the closest first, at most `trials - 1`.
std::vector<ExplorationCandidate> widenedCandidates(const SpecializationLog &log, size_t trials,
                                                    const std::vector<ExplorationCandidate> &tried);

// What the model predicts its version saves per lookup over the generic
// program: at every site a table pass rewrote, the map's own lookup as the
// model priced it less the chosen representation's prediction, summed. A
// per-packet figure when every such site is on every packet's path (the
// router's and the programs explored here); an upper bound otherwise.
double predictedSavingNs(const SpecializationLog &log);

// When the measured saving falls short of the predicted one: it is less
// than `fraction` of the prediction by more than `noiseNs`. Why half and
// 5 ns: the model erred by 5.5 ns and by factors on small lookups where
// it was measured (ExplorationMargin), so a version that keeps half its
// predicted saving is not evidence against the model; and live-frames
// slices differ by up to ~5 ns between versions that compile alike
// (docs/benchmarks.md), which no measurement can tell from noise.
// fraction 0: never short (the trigger off).
struct ShortfallThreshold {
  double fraction = 0.5;
  double noiseNs = 5;
};

// Whether the model's version, measured at `modelNs` per packet against
// the generic program's `genericNs`, saves less than `threshold` asks of
// `predictedNs` (predictedSavingNs). A prediction of no saving is never
// short.
bool gainFallsShort(double predictedNs, double genericNs, double modelNs,
                    ShortfallThreshold threshold = {});

// Whether the traffic moved under a version: at some site the hot keys the
// traffic decided `after` share fewer than half of their keys with those
// decided `before` (a site that gained or lost its fast path counts). One
// key swapping in or out of a larger hot set is the profile's ordinary
// churn; half the set replaced is another workload, on which the versions
// an exploration measured may rank otherwise.
bool hotKeysMoved(const std::map<unsigned, std::vector<Bytes>> &before,
                  const std::map<unsigned, std::vector<Bytes>> &after);

// What is served in which slice of an exploration, and what it chose.
// Slot 0 is the generic program (the reference), slot i the candidate
// i - 1. Rounds interleave (generic, first candidate, second, ...; again),
// so drift and noise fall on every slot alike; each slot's figure is the
// median of its slices. A candidate measured slower than the generic
// program's median so far and than the generic program's slice of the
// same round is dropped at once: it serves no second slice and is never
// chosen. Why both: on a loaded machine one slice may run 40 % slow (an
// l2switch round measured the generic program at 286 ns against 202 and
// 205 before it, and dropped the model's version at 243); a version truly
// slower is slower than its round's generic slice too, so the pairing
// keeps drift from dropping it and does not keep one that is slower. So
// is one that could not be built or installed.
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
  // Adds `more` candidate slots after the last and serves the rounds again
  // from the first: every slot not dropped (the generic program too) gets
  // `rounds` more slices, interleaved with the new ones; a dropped slot
  // stays dropped, so a version measured slower than the generic program
  // never serves a second slice.
  void extend(size_t more);

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
