#include "core/ExplorationCandidates.h"

#include "core/Pipeline.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <limits>
#include <map>
#include <set>
#include <tuple>

namespace morpheus::core {

VersionSettings candidateSettings(const ExplorationCandidate &candidate,
                                  const VersionSettings &model) {
  VersionSettings settings = model;
  if (candidate.inlineLimit)
    settings.inlineLimit = std::min(model.inlineLimit, *candidate.inlineLimit);
  const std::vector<std::string> &leftOut = candidate.leftOut;
  if (leftOut.empty())
    return settings;
  if (!model.tablePasses)
    settings.tablePasses = tablePassesWithout(leftOut);
  else {
    std::vector<std::string> kept;
    for (const std::string &pass : *model.tablePasses)
      if (std::find(leftOut.begin(), leftOut.end(), pass) == leftOut.end())
        kept.push_back(pass);
    settings.tablePasses = kept;
  }
  return settings;
}

namespace {

// Per compare chain length inline-small-table built (the tables it
// inlined whole, which the model does not price), the version with an
// inline limit one below it: those tables keep their lookups, smaller
// ones are still inlined. The longest chains first.
std::vector<ExplorationCandidate> unpricedChains(const SpecializationLog &log) {
  std::map<size_t, std::vector<std::string>, std::greater<>> tablesByLength;
  for (const SiteDecision &decision : log.decisions) {
    if (!decision.applied || decision.choice ||
        decision.decider != Decider::InlineSmallTablePass)
      continue;
    auto inlined = log.inlined.find(decision.table);
    if (inlined == log.inlined.end() || inlined->second.empty())
      continue;
    std::vector<std::string> &tables = tablesByLength[inlined->second.size()];
    if (!llvm::is_contained(tables, decision.table))
      tables.push_back(decision.table);
  }
  std::vector<ExplorationCandidate> chains;
  for (const auto &[length, tables] : tablesByLength) {
    std::string names;
    for (const std::string &table : tables)
      names += (names.empty() ? "'" : ", '") + table + "'";
    ExplorationCandidate candidate;
    candidate.inlineLimit = uint32_t(length - 1);
    candidate.description =
        llvm::formatv("inline limit {0}: {1} ({2} entries) kept as the lookup, not a compare "
                      "chain (unpriced)",
                      length - 1, names, length)
            .str();
    chains.push_back(std::move(candidate));
  }
  return chains;
}

} // namespace

std::vector<ExplorationCandidate> explorationCandidates(const SpecializationLog &log,
                                                        size_t trials,
                                                        ExplorationMargin margin) {
  std::vector<ExplorationCandidate> candidates{
      ExplorationCandidate{.description = "the model's choice"}};
  // Per set of passes left out, the closest of the sites it changes.
  std::map<std::vector<std::string>, ExplorationCandidate> bySet;
  for (const SiteDecision &decision : log.decisions) {
    if (!decision.applied || !decision.choice)
      continue;
    const RepresentationChoice &choice = *decision.choice;
    std::string pass = passOf(choice.chosen);
    if (pass.empty())
      continue;
    // Each other representation the site allows, in the model's order
    // (cheapest first; the map's lookup last): the site gets it once the
    // passes of those before it are left out too, so the second one is two
    // passes away (the routes' search behind the derived table and the
    // derived hashes). One whose pass is already left out cannot be built.
    std::vector<std::string> leftOut{pass};
    for (const CandidateCost &next : choice.candidates) {
      if (next.representation == choice.chosen)
        continue;
      std::string nextPass = passOf(next.representation);
      if (llvm::is_contained(leftOut, nextPass))
        continue;
      double gap = next.ns - choice.predictedNs;
      bool close = gap <= std::max(margin.ns, margin.fraction * choice.predictedNs) ||
                   (leftOut.size() == 1 && !choice.memoryDeclined.empty());
      if (close) {
        std::string passes;
        for (const std::string &out : leftOut)
          passes += (passes.empty() ? "" : " and ") + out;
        std::string description =
            llvm::formatv("without {0}: {1} {2:f1} ns predicted, then {3} {4:f1} ns (table "
                          "'{5}'{6})",
                          passes, representationName(choice.chosen), choice.predictedNs,
                          representationName(next.representation), next.ns, decision.table,
                          choice.memoryDeclined.empty() ? "" : "; " + choice.memoryDeclined)
                .str();
        std::vector<std::string> key = leftOut;
        std::sort(key.begin(), key.end());
        ExplorationCandidate candidate{
            .leftOut = key, .description = description, .predictedGapNs = gap};
        auto [kept, added] = bySet.try_emplace(key, candidate);
        if (!added && gap < kept->second.predictedGapNs)
          kept->second = std::move(candidate);
      }
      if (nextPass.empty())
        break; // the map's lookup: nothing after it
      leftOut.push_back(nextPass);
    }
  }
  std::vector<ExplorationCandidate> alternatives;
  for (auto &[passes, candidate] : bySet)
    alternatives.push_back(std::move(candidate));
  std::sort(alternatives.begin(), alternatives.end(), [](const auto &a, const auto &b) {
    return std::tie(a.predictedGapNs, a.leftOut) < std::tie(b.predictedGapNs, b.leftOut);
  });
  for (ExplorationCandidate &chain : unpricedChains(log))
    alternatives.push_back(std::move(chain));
  size_t room = std::max<size_t>(trials, 1) - 1;
  if (alternatives.size() > room)
    alternatives.resize(room);
  candidates.insert(candidates.end(), alternatives.begin(), alternatives.end());
  return candidates;
}

std::vector<ExplorationCandidate>
widenedCandidates(const SpecializationLog &log, size_t trials,
                  const std::vector<ExplorationCandidate> &tried) {
  ExplorationMargin everything{std::numeric_limits<double>::infinity(), 0};
  std::vector<ExplorationCandidate> widened;
  for (ExplorationCandidate &candidate :
       explorationCandidates(log, std::numeric_limits<size_t>::max(), everything)) {
    bool triedAlready = llvm::any_of(
        tried, [&](const ExplorationCandidate &t) { return t.sameVersion(candidate); });
    if (!triedAlready && widened.size() + 1 < std::max<size_t>(trials, 1))
      widened.push_back(std::move(candidate));
  }
  return widened;
}

double predictedSavingNs(const SpecializationLog &log) {
  double saving = 0;
  for (const SiteDecision &decision : log.decisions) {
    if (!decision.applied || !decision.choice)
      continue;
    std::optional<double> map = decision.choice->predictionFor(Representation::OriginalMap);
    if (map)
      saving += *map - decision.choice->predictedNs;
  }
  return saving;
}

bool gainFallsShort(double predictedNs, double genericNs, double modelNs,
                    ShortfallThreshold threshold) {
  if (threshold.fraction <= 0 || predictedNs <= 0)
    return false;
  double measured = genericNs - modelNs;
  return measured + threshold.noiseNs < threshold.fraction * predictedNs;
}

bool hotKeysMoved(const std::map<unsigned, std::vector<Bytes>> &before,
                  const std::map<unsigned, std::vector<Bytes>> &after) {
  std::set<unsigned> sites;
  for (const auto &[site, keys] : before)
    if (!keys.empty())
      sites.insert(site);
  for (const auto &[site, keys] : after)
    if (!keys.empty())
      sites.insert(site);
  static const std::vector<Bytes> none;
  for (unsigned site : sites) {
    auto was = before.find(site), is = after.find(site);
    const std::vector<Bytes> &old = was == before.end() ? none : was->second;
    const std::vector<Bytes> &now = is == after.end() ? none : is->second;
    size_t kept =
        llvm::count_if(now, [&](const Bytes &key) { return llvm::is_contained(old, key); });
    size_t larger = std::max(old.size(), now.size());
    if (2 * kept < larger)
      return true;
  }
  return false;
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
  // Each round serves the generic program first (it is never dropped):
  // its last slice is this round's.
  std::optional<double> generic = median(0);
  if (slot != 0 && generic && nsPerRun > *generic && nsPerRun > slots[0].ns.back())
    slots[slot].dropped = true;
  advance();
}

void ExplorationSchedule::skip(size_t slot) {
  slots.at(slot).dropped = true;
  advance();
}

void ExplorationSchedule::extend(size_t more) {
  slots.resize(slots.size() + more);
  round = 0;
  position = 0; // the generic program, never dropped
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
