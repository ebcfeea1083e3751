#include "core/CostModel.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/JSON.h>

#include <algorithm>
#include <cmath>

namespace morpheus::core {

namespace {

// A compare among a few (a search's level, a table's bound).
double singleCompareNs(const OperationCosts &costs) { return costs.compareNs.at(1); }

// A compare of a key `keySize` bytes long in a chain of `compares`: one per
// 8-byte word.
double keyCompareNs(const OperationCosts &costs, uint32_t keySize, size_t compares) {
  return costs.compareNs.at(double(compares)) * std::max<uint32_t>(1, (keySize + 7) / 8);
}

// The fields of the calibration file, with the member each fills.
constexpr std::pair<const char *, double OperationCosts::*> Fields[] = {
    {"hash_lookup_ns", &OperationCosts::hashLookupNs},
    {"array_lookup_ns", &OperationCosts::arrayLookupNs},
    {"helper_call_ns", &OperationCosts::helperCallNs},
};
// Its curves: lists of [size, ns].
constexpr std::pair<const char *, SizeCurve OperationCosts::*> Curves[] = {
    {"lpm_lookup_ns", &OperationCosts::lpmLookupNs},
    {"compare_ns", &OperationCosts::compareNs},
    {"search_level_ns", &OperationCosts::searchLevelNs},
    {"derived_load_ns", &OperationCosts::derivedLoadNs},
};

bool validNs(std::optional<double> value) {
  return value && std::isfinite(*value) && *value >= 0;
}

// A curve of at least one point, sizes positive and ascending.
std::optional<SizeCurve> curveFrom(const llvm::json::Array *array) {
  if (!array || array->empty())
    return std::nullopt;
  SizeCurve curve;
  for (const llvm::json::Value &point : *array) {
    const llvm::json::Array *pair = point.getAsArray();
    if (!pair || pair->size() != 2)
      return std::nullopt;
    std::optional<double> size = (*pair)[0].getAsNumber(), ns = (*pair)[1].getAsNumber();
    if (!validNs(size) || *size <= 0 || !validNs(ns) ||
        (!curve.points.empty() && *size <= curve.points.back().first))
      return std::nullopt;
    curve.points.emplace_back(*size, *ns);
  }
  return curve;
}

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
  case Representation::DerivedHash:
    return "derived hash";
  case Representation::DirectIndex:
    return "direct index";
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
  case Representation::DerivedHash:
    return "lpm-as-hash";
  case Representation::DirectIndex:
    return "hash-as-array";
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
  text += llvm::formatv(" (chosen: {0}; {1} costs{2}{3})", representationName(chosen),
                        calibrated ? "calibrated" : "default",
                        memoryDeclined.empty() ? "" : "; ", memoryDeclined)
              .str();
  return text;
}

std::optional<double> RepresentationChoice::predictionFor(Representation representation) const {
  for (const CandidateCost &candidate : candidates)
    if (candidate.representation == representation)
      return candidate.ns;
  return std::nullopt;
}

double SizeCurve::at(double size) const {
  if (points.empty())
    return 0;
  if (size <= points.front().first)
    return points.front().second;
  if (size >= points.back().first)
    return points.back().second;
  auto above = std::upper_bound(points.begin(), points.end(), size,
                                [](double s, const auto &point) { return s < point.first; });
  auto below = std::prev(above);
  double t = (std::log2(size) - std::log2(below->first)) /
             (std::log2(above->first) - std::log2(below->first));
  return below->second + t * (above->second - below->second);
}

double CostModel::lpmLookupNs(size_t prefixes) const {
  return costs.lpmLookupNs.at(double(std::max<size_t>(1, prefixes)));
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
    return double(shape.entries + 1) / 2 * keyCompareNs(costs, shape.keySize, shape.entries);
  case Representation::PrefixSearch:
    // The prefix-length test, then one level per halving of the intervals.
    return singleCompareNs(costs) +
           costs.searchLevelNs.at(double(shape.intervals)) *
               std::ceil(std::log2(double(std::max<size_t>(1, shape.intervals))));
  case Representation::DerivedArray:
    // The prefix-length test, the leading words' compares (one table per
    // word), a load and a chunk test per level on the deepest path, the
    // none test and the entry's bound; a load costs what one costs in
    // tables of this size (their memory's cache misses).
    return (3 + shape.leadingCompares) * singleCompareNs(costs) +
           shape.derivedLoads *
               (costs.derivedLoadNs.at(double(shape.derivedBytes)) + singleCompareNs(costs));
  case Representation::DerivedHash: {
    // The prefix-length test and the entry's bound; per length (a key that
    // matches no longer prefix probes them all: priced so) a multiply per
    // word into the hash and the home slot's bound, then per slot probed a
    // load of its tag (priced as a load from tables of this size) and a
    // compare of it and of each word.
    double ns = 2 * singleCompareNs(costs);
    for (const TableShape::HashLength &length : shape.hashLengths)
      ns += (1 + length.words) * singleCompareNs(costs) +
            length.probes * (costs.derivedLoadNs.at(double(shape.hashBytes)) +
                             (1 + length.words) * singleCompareNs(costs));
    return ns;
  }
  case Representation::DirectIndex:
    // The key less the range's first, its bound, the slot's load (priced
    // as a load from a table of this size), the none test, the entry's
    // bound.
    return 4 * singleCompareNs(costs) + costs.derivedLoadNs.at(double(shape.indexBytes));
  case Representation::FastPath: {
    // Hot key i (from 1) costs i compares; the rest all of them, then the map.
    double compare = keyCompareNs(costs, shape.keySize, shape.hotShares.size()), hits = 0,
           cost = 0;
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

uint64_t CostModel::memoryBytes(Representation representation, const TableShape &shape) {
  switch (representation) {
  case Representation::DerivedArray:
    return shape.derivedBytes;
  case Representation::DerivedHash:
    return shape.hashBytes;
  case Representation::DirectIndex:
    return shape.indexBytes;
  default:
    return 0;
  }
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
  // The cheapest candidate whose memory its saving over the cheapest one
  // without memory pays for (the map is always there); the first one
  // declined for its memory is said.
  const CandidateCost *withoutMemory = nullptr;
  for (const CandidateCost &candidate : choice.candidates)
    if (!memoryBytes(candidate.representation, shape)) {
      withoutMemory = &candidate;
      break;
    }
  const CandidateCost *chosen = withoutMemory;
  for (const CandidateCost &candidate : choice.candidates) {
    uint64_t bytes = memoryBytes(candidate.representation, shape);
    if (!bytes)
      break; // withoutMemory itself: nothing cheaper paid for its memory
    double kib = double(bytes) / 1024, asked = kib * MemoryNsPerKiB;
    double saving = withoutMemory->ns - candidate.ns;
    if (saving >= asked) {
      chosen = &candidate;
      break;
    }
    if (choice.memoryDeclined.empty())
      choice.memoryDeclined =
          llvm::formatv("the {0}'s {1:f0} KiB save {2:f1} ns over the {3}, under the "
                        "{4:f1} ns its memory asks",
                        representationName(candidate.representation), kib, saving,
                        representationName(withoutMemory->representation), asked)
              .str();
  }
  choice.chosen = chosen->representation;
  choice.predictedNs = chosen->ns;
  return choice;
}

FastPathCosts CostModel::fastPathCosts(FastPathCosts base) const {
  // Priced as a chain of the most keys a fast path compares.
  base.compareNs = costs.compareNs.at(double(TrafficProfileOptions().maxFastPath));
  base.compareWordNs = base.compareNs;
  base.exactLookupNs = costs.hashLookupNs;
  // A trie too large to read whole: priced at the read limit's size.
  base.longestPrefixLookupNs = lpmLookupNs(4096);
  base.indexLookupNs = costs.arrayLookupNs;
  return base;
}

std::string CostModel::toJson() const {
  llvm::json::Object object;
  object["source"] = origin;
  object["format"] = CostModel::Format;
  for (auto [name, member] : Fields)
    object[name] = costs.*member;
  for (auto [name, member] : Curves) {
    llvm::json::Array points;
    for (auto [size, ns] : (costs.*member).points)
      points.push_back(llvm::json::Array{size, ns});
    object[name] = std::move(points);
  }
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
  if (object->getInteger("format") != Format)
    return makeError("{0}: not a cost model of format {1} (`morpheus bench calibrate` "
                     "measures this machine again)",
                     file, Format);
  OperationCosts costs;
  for (auto [name, member] : Fields) {
    std::optional<double> value = object->getNumber(name);
    if (!validNs(value))
      return makeError("{0}: '{1}' missing or not a non-negative number of ns", file, name);
    costs.*member = *value;
  }
  for (auto [name, member] : Curves) {
    std::optional<SizeCurve> curve = curveFrom(object->getArray(name));
    if (!curve)
      return makeError("{0}: '{1}' missing or not a list of [size, ns] by ascending size", file,
                       name);
    costs.*member = std::move(*curve);
  }
  std::optional<llvm::StringRef> source = object->getString("source");
  return CostModel(costs, source ? source->str() : ("calibrated (" + file + ")").str());
}

} // namespace morpheus::core
