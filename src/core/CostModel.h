// What a table lookup costs in each representation the table passes can
// give it, predicted from per-operation costs measured on this machine
// (`morpheus bench calibrate`, cached per machine and kernel) or, without a
// calibration, from defaults that say so. In the spirit of the P4C
// performance model (shared/papers/p4c-batching-prefetching-perf-model.txt):
// a lookup's cost is a sum of measured unit costs times how many of each the
// representation executes for one key.
//
// The model prices the lookup only: what inlined values let LLVM fold after
// it (constants, dead code) is not in it, so it chooses between
// representations of the same answer (an LPM trie as the trie, a search, a
// derived table or a derived hash per prefix length; a hash as a
// chain yielding an index, which folds nothing, a direct index or the
// map), never whether to inline values at all.
#pragma once

#include "core/Tables.h"
#include "core/TrafficProfile.h"
#include "support/Error.h"

#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace morpheus::core {

// A cost measured at a few sizes (prefixes, intervals, bytes), between them
// linear in log2 of the size, outside them flat at the nearest measured
// point. Why not a line fitted over all the points: what grows with the
// size is a depth (a trie's, a search's) or a cache level, so the cost is
// a curve in log2 of the size, convex where the data leaves a cache level
// (the trie: 20, 44, 109 ns at 16, 256 and 4,096 prefixes), and a line
// through such points misses every one of them, small sizes most. Flat
// outside: beyond the measured sizes nothing says how it bends, and the
// calibration measures the smallest and largest sizes the passes build.
struct SizeCurve {
  std::vector<std::pair<double, double>> points; // (size, ns), sizes ascending
  double at(double size) const;                  // 0 without points
  bool operator==(const SizeCurve &) const = default;
};

// Unit costs, in ns, each measured against a control that does the rest.
struct OperationCosts {
  double hashLookupNs = 29;        // a hash map lookup (helper call included)
  // An LPM trie lookup of a whole address, by prefixes in the trie.
  SizeCurve lpmLookupNs = {{{2, 22}, {4096, 44}}};
  double arrayLookupNs = 0.6;      // an ARRAY lookup the verifier inlines
  // One compare and branch that rarely fails, by the compares in a row (a
  // chain's length): a chain long enough leaves the instruction cache, and
  // each compare then costs its fetch too.
  SizeCurve compareNs = {{{64, 0.4}}};
  // One level of lpm-as-code's binary search, by intervals searched, keys
  // a packet's address from memory among a thousand flows.
  SizeCurve searchLevelNs = {{{2, 0.5}}};
  // One dependent load from a derived table, by the table's bytes: what
  // its memory costs at run time (the cache misses of a larger table).
  SizeCurve derivedLoadNs = {{{4096, 3}}};
  double helperCallNs = 8;         // a helper call doing next to nothing

  bool operator==(const OperationCosts &) const = default;
};

// The ways the table passes can serve a lookup.
enum class Representation {
  OriginalMap,  // the map's own lookup
  CompareChain, // inline-small-table: one compare per entry
  PrefixSearch, // lpm-as-code: a binary search over address intervals
  DerivedArray, // lpm-as-array: loads from a derived 16-8-8 table
  DerivedHash,  // lpm-as-hash: the masked address probed in a derived hash table
  DirectIndex,  // hash-as-array: a hash's key indexing a derived array of its range
  FastPath,     // heavy-hitter-fast-path: hot keys compared, then the map
};

const char *representationName(Representation representation);
// The table pass that builds `representation` ("" for the original map).
const char *passOf(Representation representation);

// What the model needs to know of a table to price a representation.
struct TableShape {
  TableMatch match = TableMatch::Exact;
  size_t entries = 0;       // prefixes or entries
  uint32_t keySize = 0;
  size_t intervals = 0;     // PrefixSearch: address intervals searched
  unsigned derivedLoads = 0; // DerivedArray: loads on the deepest path
  unsigned leadingCompares = 0; // DerivedArray: leading words compared first
  uint64_t derivedBytes = 0;  // DerivedArray: the table's size
  // DerivedHash: per prefix length (a hash each, probed longest first),
  // the masked key's 32-bit words and the slots a present key probes on
  // average; and the tables' size together.
  struct HashLength {
    unsigned words = 0;
    double probes = 0;
  };
  std::vector<HashLength> hashLengths = {};
  uint64_t hashBytes = 0;
  uint64_t indexBytes = 0; // DirectIndex: the array's size
  // FastPath: the hot keys' shares of the traffic, hottest first.
  std::vector<double> hotShares = {};
};

// What a representation's memory must buy: a derived table (lpm-as-array's
// levels, lpm-as-hash's hash, hash-as-array's index) is taken only
// when it is predicted to save at least this many ns per KiB of it over
// the cheapest representation that holds no memory (a search or a chain
// is code; the map is there anyway); otherwise the next cheaper one whose
// memory pays for itself is, or that one, and the choice says why. The
// table's own cache misses are already in its prediction (derivedLoadNs by
// its bytes); the price stands for what the
// model does not see: its own error between representations, and what
// the table's lines evict of the program's other data and of the other
// programs on the core. Why 1 ns per 16 KiB: the smallest table
// lpm-as-array builds (its 128 KiB first level) must then save 8 ns,
// more than the model's error where it was measured (router-20routes:
// the search and the derived table measure alike, predicted 5.5 ns
// apart; nat's 2-prefix table, predicted 5.9 ns under the trie, measures
// no faster), and a 1 MiB table 64 ns; the 500-route trie's 216 KiB (13.5
// ns asked) save ~45 ns predicted, ~100 measured.
constexpr double MemoryNsPerKiB = 1.0 / 16;

// One representation's predicted cost for a table.
struct CandidateCost {
  Representation representation;
  double ns;
};

// What the model chose for one table site, among the eligible candidates.
struct RepresentationChoice {
  Representation chosen = Representation::OriginalMap;
  double predictedNs = 0;
  std::vector<CandidateCost> candidates; // eligible ones, cheapest first
  bool calibrated = false;               // the model's costs were measured
  // Set when a cheaper candidate's memory was not worth its saving over the
  // cheapest candidate without memory (the first such, why): the next one
  // whose memory its saving pays for was chosen, or that one.
  std::string memoryDeclined;
  // "map 41.2 ns, search 4.4 ns, derived 9.2 ns (chosen: search; defaults)"
  std::string describe() const;
  // The prediction for `representation`, when it was a candidate.
  std::optional<double> predictionFor(Representation representation) const;
};

class CostModel {
public:
  CostModel() = default; // the defaults, stated as such by `source`
  CostModel(OperationCosts costs, std::string source)
      : costs(costs), origin(std::move(source)), measured(true) {}

  const OperationCosts &operations() const { return costs; }
  // Where the costs come from: "defaults (not calibrated)", or the
  // calibration's machine, kernel and date.
  const std::string &source() const { return origin; }
  bool calibrated() const { return measured; }

  double lpmLookupNs(size_t prefixes) const;
  // The map's own lookup for a table of `match` with `entries`.
  double originalLookupNs(TableMatch match, size_t entries) const;
  // The bytes `representation` adds for `shape` (a derived table's).
  static uint64_t memoryBytes(Representation representation, const TableShape &shape);
  // Predicted ns per lookup of `representation` for `shape`.
  double predictNs(Representation representation, const TableShape &shape) const;
  // The cheapest of `eligible` (the original map is always eligible and
  // added when missing) whose memory, if it holds any, saves at least
  // MemoryNsPerKiB per KiB over the cheapest without; ties go to the
  // earlier candidate in `eligible`.
  RepresentationChoice choose(const TableShape &shape,
                              std::vector<Representation> eligible) const;
  // The costs heavy-hitter-fast-path sizes fast paths with.
  FastPathCosts fastPathCosts(FastPathCosts base = {}) const;

  // The calibration file's format (JSON, its "format" this number: a file
  // of another is measured again), and back; errors name `file`.
  static constexpr int Format = 3;
  std::string toJson() const;
  static Expected<CostModel> fromJson(llvm::StringRef text, llvm::StringRef file);

private:
  OperationCosts costs;
  std::string origin = "defaults (not calibrated)";
  bool measured = false;
};

} // namespace morpheus::core
