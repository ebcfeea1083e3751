#include "core/CostModel.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cmath>

namespace morpheus::core {

namespace {

// A compare of a key `keySize` bytes long: one per 8-byte word.
double keyCompareNs(const OperationCosts &costs, uint32_t keySize) {
  return costs.compareNs * std::max<uint32_t>(1, (keySize + 7) / 8);
}

// The fields of the calibration file, with the member each fills.
constexpr std::pair<const char *, double OperationCosts::*> Fields[] = {
    {"hash_lookup_ns", &OperationCosts::hashLookupNs},
    {"lpm_base_ns", &OperationCosts::lpmBaseNs},
    {"lpm_per_doubling_ns", &OperationCosts::lpmPerDoublingNs},
    {"array_lookup_ns", &OperationCosts::arrayLookupNs},
    {"compare_ns", &OperationCosts::compareNs},
    {"search_level_ns", &OperationCosts::searchLevelNs},
    {"derived_load_ns", &OperationCosts::derivedLoadNs},
    {"helper_call_ns", &OperationCosts::helperCallNs},
};

} // namespace

const char *representationName(Representation representation) {
  switch (representation) {
  case Representation::OriginalMap:
    return "map";
  case Representation::CompareChain:
    return "compare chain";
  case Representation::PrefixSearch:
    return "search";
  case Representation::DerivedArray:
    return "derived table";
  case Representation::FastPath:
    return "fast path";
  }
  return "?";
}

const char *passOf(Representation representation) {
  switch (representation) {
  case Representation::OriginalMap:
    return "";
  case Representation::CompareChain:
    return "inline-small-table";
  case Representation::PrefixSearch:
    return "lpm-as-code";
  case Representation::DerivedArray:
    return "lpm-as-array";
  case Representation::FastPath:
    return "heavy-hitter-fast-path";
  }
  return "";
}

std::string RepresentationChoice::describe() const {
  std::string text = "predicted";
  for (const CandidateCost &candidate : candidates)
    text += llvm::formatv(" {0} {1:f1} ns,", representationName(candidate.representation),
                          candidate.ns)
                .str();
  text.pop_back();
  text += llvm::formatv(" (chosen: {0}; {1} costs)", representationName(chosen),
                        calibrated ? "calibrated" : "default")
              .str();
  return text;
}

std::optional<double> RepresentationChoice::predictionFor(Representation representation) const {
  for (const CandidateCost &candidate : candidates)
    if (candidate.representation == representation)
      return candidate.ns;
  return std::nullopt;
}

Expected<LinearFit> fitLine(const std::vector<std::pair<double, double>> &points) {
  double n = double(points.size()), sx = 0, sy = 0, sxx = 0, sxy = 0;
  for (auto [x, y] : points) {
    sx += x;
    sy += y;
    sxx += x * x;
    sxy += x * y;
  }
  double denominator = n * sxx - sx * sx;
  if (points.size() < 2 || std::fabs(denominator) < 1e-12)
    return makeError("a line needs points at two distinct x at least ({0} given)",
                     points.size());
  LinearFit fit;
  fit.slope = (n * sxy - sx * sy) / denominator;
  fit.intercept = (sy - fit.slope * sx) / n;
  return fit;
}

double CostModel::lpmLookupNs(size_t prefixes) const {
  return costs.lpmBaseNs + costs.lpmPerDoublingNs * std::log2(double(std::max<size_t>(1, prefixes)));
}

double CostModel::originalLookupNs(TableMatch match, size_t entries) const {
  switch (match) {
  case TableMatch::Exact:
    return costs.hashLookupNs;
  case TableMatch::LongestPrefix:
    return lpmLookupNs(entries);
  case TableMatch::Index:
    return costs.arrayLookupNs;
  case TableMatch::Unsupported:
    break;
  }
  return costs.helperCallNs;
}

double CostModel::predictNs(Representation representation, const TableShape &shape) const {
  double original = originalLookupNs(shape.match, shape.entries);
  switch (representation) {
  case Representation::OriginalMap:
    return original;
  case Representation::CompareChain:
    // A key equally likely to be any entry: (n + 1) / 2 compares.
    return double(shape.entries + 1) / 2 * keyCompareNs(costs, shape.keySize);
  case Representation::PrefixSearch:
    // The prefix-length test, then one level per halving of the intervals.
    return costs.compareNs +
           costs.searchLevelNs * std::ceil(std::log2(double(std::max<size_t>(1, shape.intervals))));
  case Representation::DerivedArray:
    // The prefix-length test, the leading words' compares (one table per
    // word), a load and a chunk test per level on the deepest path, the
    // none test and the entry's bound.
    return (3 + shape.leadingCompares) * costs.compareNs +
           shape.derivedLoads * (costs.derivedLoadNs + costs.compareNs);
  case Representation::FastPath: {
    // Hot key i (from 1) costs i compares; the rest all of them, then the map.
    double compare = keyCompareNs(costs, shape.keySize), hits = 0, cost = 0;
    for (size_t i = 0; i < shape.hotShares.size(); ++i) {
      cost += shape.hotShares[i] * double(i + 1) * compare;
      hits += shape.hotShares[i];
    }
    return cost + std::max(0.0, 1 - hits) *
                      (double(shape.hotShares.size()) * compare + original);
  }
  }
  return original;
}

RepresentationChoice CostModel::choose(const TableShape &shape,
                                       std::vector<Representation> eligible) const {
  if (std::find(eligible.begin(), eligible.end(), Representation::OriginalMap) == eligible.end())
    eligible.push_back(Representation::OriginalMap);
  RepresentationChoice choice;
  choice.calibrated = measured;
  for (Representation representation : eligible)
    choice.candidates.push_back({representation, predictNs(representation, shape)});
  std::stable_sort(choice.candidates.begin(), choice.candidates.end(),
                   [](const CandidateCost &a, const CandidateCost &b) { return a.ns < b.ns; });
  choice.chosen = choice.candidates.front().representation;
  choice.predictedNs = choice.candidates.front().ns;
  return choice;
}

FastPathCosts CostModel::fastPathCosts(FastPathCosts base) const {
  base.compareNs = costs.compareNs;
  base.compareWordNs = costs.compareNs;
  base.exactLookupNs = costs.hashLookupNs;
  // A trie too large to read whole: priced at the read limit's size.
  base.longestPrefixLookupNs = lpmLookupNs(4096);
  base.indexLookupNs = costs.arrayLookupNs;
  return base;
}

std::string CostModel::toJson() const {
  llvm::json::Object object;
  object["source"] = origin;
  for (auto [name, member] : Fields)
    object[name] = costs.*member;
  std::string text;
  llvm::raw_string_ostream out(text);
  out << llvm::formatv("{0:2}", llvm::json::Value(std::move(object))) << "\n";
  return text;
}

Expected<CostModel> CostModel::fromJson(llvm::StringRef text, llvm::StringRef file) {
  auto parsed = llvm::json::parse(text);
  if (!parsed)
    return makeError("{0}: not a cost model: {1}", file, llvm::toString(parsed.takeError()));
  const llvm::json::Object *object = parsed->getAsObject();
  if (!object)
    return makeError("{0}: not a cost model: expected a JSON object", file);
  OperationCosts costs;
  for (auto [name, member] : Fields) {
    std::optional<double> value = object->getNumber(name);
    if (!value || !std::isfinite(*value) || *value < 0)
      return makeError("{0}: '{1}' missing or not a non-negative number of ns", file, name);
    costs.*member = *value;
  }
  std::optional<llvm::StringRef> source = object->getString("source");
  return CostModel(costs, source ? source->str() : ("calibrated (" + file + ")").str());
}

} // namespace morpheus::core
