// What one specialization decided: per access site, which pass did what or
// why nothing was done; per function the kernel can call, how its guard
// falls back; and the exact (key, value) pairs inlined per table, which is
// what change detection compares between cycles.
#pragma once

#include "core/CostModel.h"
#include "core/Globals.h"
#include "core/Tables.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

struct AccessSite;

// Who decided at a site: the pipeline's planning before the table passes
// run (Analysis), or a table pass (Passes.def, named by its class).
enum class Decider : uint8_t {
  Analysis,
#define MORPHEUS_TABLE_PASS(NAME, CLASS) CLASS,
#include "core/Passes.def"
};

// "analysis", or the pass's Passes.def name.
const char *deciderName(Decider decider);

// What a decider did at a site, or the kind of reason it left the site
// alone: what code decides on (SiteDecision::detail says it to people).
enum class SiteOutcome : uint8_t {
  Applied,
  // Whether the site is one to take:
  NotReplaceable,       // no pass may replace the lookup (whyNotInlinable)
  NotEligible,          // not one this pass takes (another pass's, or its own rules)
  InnerTableUnresolved, // the outer map's contents do not name one table of the program
  Unguarded,            // its code may run with no guard in front of it
  // Limits:
  TableNotRead,         // the snapshot holds nothing of the table
  NotReadWhole,         // the table was not read whole (over its read limit)
  OverInlineLimit,      // more entries than the inline limit
  OverVerifierBudget,   // the verifier's path budget (SpecializationOptions::verifierPathBudget)
  CompareChainsOff,     // SpecializationOptions::noCompareChains
  RegionsOff,           // SpecializationOptions::noRegions
  // What the snapshot holds:
  PerCpuValuesDiffer,
  KeyNotInSnapshot,     // the constant key's value is not known
  KeyPresent,           // the table holds the constant key: the lookup answers
  NothingToFold,        // no load reads bytes that fold
  NoHotKey,             // the traffic gave no hot key (or tuple) the pass can serve
  WriteCountsNotRead,   // the write counters of hot keys were not read
  WritesNotCounted,     // a fallback runs code whose writes are not counted
  // What the table or the code is like:
  NoRepresentation,     // the pass's representation cannot hold the table's keys or contents
  NoFlow,               // flow-fast-path: no flow of lookups here
  RegionNotTabulable,   // region-as-table: the code cannot become a table
  NotCheaper,           // the cost model prefers another representation or the lookup
  // Profiling:
  NotProfiled,          // excluded by the operator, or nothing to learn
  NoProfileSlot,        // the profile map has no slot for it (key too long, id too high)
};

// The outcome in snake case ("applied", "over_inline_limit"): a label
// value for metrics and a key for scripts.
const char *siteOutcomeName(SiteOutcome outcome);

// Why a pass leaves a site alone: the kind, and the words.
struct SiteDecline {
  SiteOutcome outcome;
  std::string detail;
};

struct SiteDecision {
  unsigned site = 0;
  std::string table;
  std::string function;
  std::string location;
  Decider decider = Decider::Analysis;
  SiteOutcome outcome = SiteOutcome::Applied;
  // decider and outcome as the views print them: deciderName(decider), and
  // outcome == Applied.
  std::string pass;
  bool applied = false;
  std::string detail; // what was done, or why not, for people
  // Where the cost model chose the representation: its prediction.
  std::optional<RepresentationChoice> choice;
};

// How a guarded function gets back to generic code when its version is
// stale (core/passes/ProgramGuard.cpp).
enum class Fallback {
  InProgram, // calls a generic copy of itself kept in the same program
  TailCall,  // tail-calls the original program (entries with a ctx only)
  None,      // cannot be guarded: nothing it reaches is specialized
};

const char *fallbackName(Fallback fallback);

struct GuardDecision {
  std::string function; // a program entry or a callback the kernel calls
  bool callback = false;
  Fallback fallback = Fallback::None;
  unsigned slot = 0;  // TailCall: the fallback array's slot
  uint32_t failureVerdict = 0; // TailCall: returned when the original cannot be reached
  std::string detail; // why this fallback (or none)
  std::optional<unsigned> versionSlot; // EntryFallback::versionSlot
};

// A site whose lookup keys the specialized program records
// (instrument-table-sites), or a flow whose tuples it records
// (flow-fast-path: `table` is its first lookup's, `keySize` the tuple's).
struct ProfiledSite {
  std::string table;
  uint32_t keySize = 0;
  // A flow: what a hot tuple's hit is predicted to save, ns (the flow's
  // lookups priced by the cost model); its hot tuples go to
  // SpecializationOptions::hotTuples, not to a lookup's fast path.
  std::optional<double> flowSavingNs;
  bool operator==(const ProfiledSite &) const = default;
};

// The keys heavy-hitter-fast-path compares in front of a lookup (each
// answered from the snapshot: with its value, or, for a table the data
// plane writes, as absent), as the chains were built: `keys` for every CPU
// without a chain of its own, `perCpu` for the CPUs with one.
struct FastPathKeys {
  std::vector<Bytes> keys;
  std::map<unsigned, std::vector<Bytes>> perCpu;
  // Whether the chain a lookup on `cpu` takes compares `key`.
  bool covers(unsigned cpu, const Bytes &key) const {
    auto own = perCpu.find(cpu);
    const std::vector<Bytes> &chain = own == perCpu.end() ? keys : own->second;
    return std::find(chain.begin(), chain.end(), key) != chain.end();
  }
  bool operator==(const FastPathKeys &) const = default;
};

// What the specialization-points pass did with one marker call: assumed
// `value` behind its guard, or left the point disabled (detail says why).
struct PointDecision {
  std::string label;
  std::string function;
  bool applied = false;
  int64_t value = 0;  // applied: the value (or, for an assumption, 1) assumed
  std::string detail; // what was done, or why not
};

// What fold-read-only-globals did with one writable global.
struct GlobalDecision {
  std::string global;
  bool applied = false;
  std::string detail;
};

// Where building a version spent its time: one step of specializeModule
// (planning, each table pass by its Passes.def name, the program guard, O2)
// or of the backend around it (cloning, code generation).
struct BuildPhase {
  std::string phase;
  double ms = 0;
};

struct SpecializationLog {
  std::vector<SiteDecision> decisions;
  std::map<unsigned, ProfiledSite> profiled; // by site id
  std::map<unsigned, FastPathKeys> fastPaths; // by site id: heavy-hitter-fast-path's chains
  std::vector<GuardDecision> guards;
  std::vector<PointDecision> points; // specialization-points, per marker call
  std::map<std::string, std::vector<TableEntry>> inlined;
  std::vector<GlobalDecision> globals;
  // The global bytes folded, checked at every guarded root (sorted, unique).
  std::vector<GlobalCheck> globalChecks;
  std::vector<BuildPhase> phases; // in the order they ran

  void record(const AccessSite &site, Decider decider, SiteOutcome outcome,
              std::string detail);
  // The same for a decision under `site` but of other code (a region's).
  void record(unsigned site, std::string table, std::string function, std::string location,
              Decider decider, SiteOutcome outcome, std::string detail);
  // For operators: one line per specialized site, sites left alone for the
  // same reason as one line, one line per guarded function.
  std::string toText() const;
};

} // namespace morpheus::core
