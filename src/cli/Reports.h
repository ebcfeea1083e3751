// How analyses and specialization decisions are shown: one JSON form (for
// machines and tests) and one text form (for operators), built from the same
// data so they agree.
#pragma once

#include "backend/bpf/ProgramSpec.h"
#include "core/SiteEligibility.h"
#include "core/SitePlan.h"

#include <nlohmann/json.hpp>

#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::cli {

nlohmann::json analysisToJson(const bpf::ProgramSpec &spec);
std::string analysisToText(const bpf::ProgramSpec &spec);

// `morpheus explain`: per map and site, what one cycle decided (the
// specialization log of a version built as a cycle builds it) and, where
// nothing was specialized, the precise reason and what would change it (the
// plan core::planSites makes: this only words it); per global variable,
// whether Morpheus touches it. Field names come from the program's debug
// info. A site is called specialized only when a pass rewrote it and the
// function holding it emits other code than the original's. Built once
// (explainProgram), printed as text or JSON from the same data.
struct ExplainedSite {
  // What the cycle did at the site:
  enum class Verdict {
    Specialized, // a pass rewrote it, and its function's code differs from the original's
    Unchanged,   // a pass rewrote it, but its function emits the original's code
    Declined,    // a pass that could take it declined it for this snapshot
    Kept,        // no pass may take it (the plan says why)
    NotALookup,  // updates, deletes, other helpers
  };
  unsigned id = 0;
  std::string helper, function, location;
  std::optional<core::Bytes> constantKey;
  std::string keySources; // "" for helpers without a key
  // A key made of literal values alone whose bytes the analysis could not
  // prove (no constantKey): why (KeyProvenance::constantUnproven).
  std::string constantUnproven;
  std::vector<std::string> outerTables, innerCandidates, mergedTables;
  std::vector<std::string> possibleTables; // every map the operand may be
  core::SitePlan plan; // what the pipeline plans from the program alone (core/SitePlan.h)
  Verdict verdict = Verdict::Kept;
  // Every decision the cycle's log holds for the site, in the order made;
  // `decided` indexes the one the verdict rests on (none: only the plan).
  std::vector<core::SiteDecision> decisions;
  std::optional<size_t> decided;
  std::string text; // the verdict, for people: what, or why not and what would change it
};

struct ExplainedWrite {
  std::string bytes;              // the fields or bytes written ("" when wholesale)
  std::optional<std::string> key; // hex; nullopt: every key
  std::string by;                 // the write, where
  bool operator==(const ExplainedWrite &) const = default;
};

struct ExplainedMap {
  // KeptGeneric: another loader writes it and policy keeps it generic
  // (core::TableInfo::keptGeneric), whatever the program does with it.
  enum class Access { ReadOnly, WrittenInPart, Written, KeptGeneric };
  std::string name, type;
  uint32_t maxEntries = 0, valueSize = 0;
  bool mapOfMaps = false;
  Access access = Access::ReadOnly;
  std::vector<ExplainedWrite> writes;
  std::vector<std::string> pointerComparisons;
  std::vector<ExplainedSite> sites;
  size_t inlinedEntries = 0; // the entries the version's code holds as constants
};

struct ExplainedGlobal {
  // PolledAndChecked: folded where read-only, under per-entry checks of the
  // live bytes (core/Globals.h), re-read each cycle.
  enum class Treatment { Constant, WrittenByTheProgram, PolledAndChecked };
  std::string name, section;
  Treatment treatment = Treatment::Constant;
  std::string verdict;
  // What fold-read-only-globals did with it this cycle, if it looked at it.
  std::optional<core::GlobalDecision> decision;
};

struct Explanation {
  std::string program;
  std::string source;    // what the tables were read from
  std::string costModel; // which costs priced the representations
  uint32_t inlineLimit = 0;
  std::vector<ExplainedMap> maps;
  std::vector<ExplainedSite> sitesWithoutOneMap; // inner-map or unresolved operands
  std::vector<ExplainedGlobal> globals;
  std::vector<core::GuardDecision> guards; // per root the kernel enters
};

// What building one version decided, for explainProgram.
struct BuiltVersion {
  std::string source;    // what its tables were read from, for people
  std::string costModel; // which costs priced it (runtime::costModelFor's line)
  core::SpecializationLog log;
  // The functions whose emitted code is the original's (EmittedCode.h).
  std::set<std::string> unchangedFunctions;
};

Explanation explainProgram(const bpf::ProgramSpec &spec, uint32_t inlineLimit,
                           const BuiltVersion &built);
std::string explanationToText(const Explanation &explanation);
nlohmann::json explanationToJson(const Explanation &explanation);

nlohmann::json logToJson(const core::SpecializationLog &log);

} // namespace morpheus::cli
