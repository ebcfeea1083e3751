#include "core/ExplorationCandidates.h"

#include "core/Pipeline.h"

#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <map>
#include <tuple>

namespace morpheus::core {

std::optional<std::vector<std::string>>
candidatePasses(const ExplorationCandidate &candidate,
                const std::optional<std::vector<std::string>> &base) {
  const std::vector<std::string> &leftOut = candidate.leftOut;
  if (leftOut.empty())
    return base;
  if (!base)
    return tablePassesWithout(leftOut);
  std::vector<std::string> kept;
  for (const std::string &pass : *base)
    if (std::find(leftOut.begin(), leftOut.end(), pass) == leftOut.end())
      kept.push_back(pass);
  return kept;
}

std::vector<ExplorationCandidate> explorationCandidates(const SpecializationLog &log,
                                                        size_t trials,
                                                        ExplorationMargin margin) {
  std::vector<ExplorationCandidate> candidates{{{}, "the model's choice", 0}};
  // Per pass, the closest of the sites it rewrote.
  std::map<std::string, ExplorationCandidate> byPass;
  for (const SiteDecision &decision : log.decisions) {
    if (!decision.applied || !decision.choice)
      continue;
    const RepresentationChoice &choice = *decision.choice;
    std::string pass = passOf(choice.chosen);
    if (pass.empty())
      continue;
    // The next cheapest the site allows (cheapest first), the map's lookup
    // when the choice had no other.
    CandidateCost next{Representation::OriginalMap, 0};
    bool found = false;
    for (const CandidateCost &candidate : choice.candidates)
      if (candidate.representation != choice.chosen) {
        next = candidate;
        found = true;
        break;
      }
    if (!found)
      continue; // nothing priced to compare with
    double gap = next.ns - choice.predictedNs;
    bool close = gap <= std::max(margin.ns, margin.fraction * choice.predictedNs) ||
                 !choice.memoryDeclined.empty();
    if (!close)
      continue;
    std::string description =
        llvm::formatv("without {0}: {1} {2:f1} ns predicted, next {3} {4:f1} ns (table '{5}'{6})",
                      pass, representationName(choice.chosen), choice.predictedNs,
                      representationName(next.representation), next.ns, decision.table,
                      choice.memoryDeclined.empty() ? "" : "; " + choice.memoryDeclined)
            .str();
    auto [kept, added] = byPass.try_emplace(pass, ExplorationCandidate{{pass}, description, gap});
    if (!added && gap < kept->second.predictedGapNs)
      kept->second = ExplorationCandidate{{pass}, description, gap};
  }
  std::vector<ExplorationCandidate> alternatives;
  for (auto &[pass, candidate] : byPass)
    alternatives.push_back(std::move(candidate));
  std::sort(alternatives.begin(), alternatives.end(), [](const auto &a, const auto &b) {
    return std::tie(a.predictedGapNs, a.leftOut) < std::tie(b.predictedGapNs, b.leftOut);
  });
  size_t room = std::max<size_t>(trials, 1) - 1;
  if (alternatives.size() > room)
    alternatives.resize(room);
  candidates.insert(candidates.end(), alternatives.begin(), alternatives.end());
  return candidates;
}

ExplorationSchedule::ExplorationSchedule(size_t candidates, unsigned rounds)
    : slots(candidates + 1), rounds(std::max(1u, rounds)) {}

std::optional<size_t> ExplorationSchedule::next() const {
  if (round >= rounds)
    return std::nullopt;
  return position;
}

void ExplorationSchedule::advance() {
  do {
    if (++position == slots.size()) {
      position = 0;
      ++round;
    }
  } while (round < rounds && slots[position].dropped);
  // Only the generic program left: nothing to compare it with.
  bool anyCandidate = false;
  for (size_t slot = 1; slot < slots.size(); ++slot)
    anyCandidate |= !slots[slot].dropped;
  if (!anyCandidate)
    round = rounds;
}

void ExplorationSchedule::record(size_t slot, double nsPerRun) {
  slots.at(slot).ns.push_back(nsPerRun);
  std::optional<double> generic = median(0);
  if (slot != 0 && generic && nsPerRun > *generic)
    slots[slot].dropped = true;
  advance();
}

void ExplorationSchedule::skip(size_t slot) {
  slots.at(slot).dropped = true;
  advance();
}

std::optional<double> ExplorationSchedule::median(size_t slot) const {
  std::vector<double> ns = slots.at(slot).ns;
  if (ns.empty())
    return std::nullopt;
  std::sort(ns.begin(), ns.end());
  size_t middle = ns.size() / 2;
  return ns.size() % 2 ? ns[middle] : (ns[middle - 1] + ns[middle]) / 2;
}

size_t ExplorationSchedule::choice() const {
  std::optional<double> generic = median(0);
  if (!generic)
    return 0;
  size_t best = 0;
  double bestNs = *generic;
  for (size_t slot = 1; slot < slots.size(); ++slot) {
    std::optional<double> ns = median(slot);
    if (!slots[slot].dropped && ns && (best == 0 ? *ns <= bestNs : *ns < bestNs)) {
      best = slot;
      bestNs = *ns;
    }
  }
  return best;
}

} // namespace morpheus::core
