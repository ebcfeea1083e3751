// How analyses and specialization decisions are shown: one JSON form (for
// machines and tests) and one text form (for operators), built from the same
// data so they agree.
#pragma once

#include "backend/bpf/ProgramSpec.h"
#include "core/SiteEligibility.h"
#include "core/SitePlan.h"

#include <nlohmann/json.hpp>

#include <string>

namespace morpheus::cli {

nlohmann::json analysisToJson(const bpf::ProgramSpec &spec);
std::string analysisToText(const bpf::ProgramSpec &spec);

// `morpheus analyze --explain`: per map and site, what Morpheus would do
// with it and, when not, the precise reason and what would change it;
// per global variable, whether Morpheus touches it. Field names come from
// the program's debug info. Built once (explainProgram) from the plan the
// pipeline makes (core::planSites: this only words it), printed as text or
// JSON (`--explain --json`) from the same data.
struct ExplainedSite {
  unsigned id = 0;
  std::string helper, function, location;
  std::optional<core::Bytes> constantKey;
  std::string keySources; // "" for helpers without a key
  // A key made of literal values alone whose bytes the analysis could not
  // prove (no constantKey): why (KeyProvenance::constantUnproven).
  std::string constantUnproven;
  std::vector<std::string> outerTables, innerCandidates, mergedTables;
  std::vector<std::string> possibleTables; // every map the operand may be
  core::SitePlan plan; // what the pipeline plans to do at the site (core/SitePlan.h)
  std::string text;    // the plan, for people: what, or why not and what would change it
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
};

struct ExplainedGlobal {
  // PolledAndChecked: folded where read-only, under per-entry checks of the
  // live bytes (core/Globals.h), re-read each cycle.
  enum class Treatment { Constant, WrittenByTheProgram, PolledAndChecked };
  std::string name, section;
  Treatment treatment = Treatment::Constant;
  std::string verdict;
};

struct Explanation {
  std::string program;
  uint32_t inlineLimit = 0;
  std::vector<ExplainedMap> maps;
  std::vector<ExplainedSite> sitesWithoutOneMap; // inner-map or unresolved operands
  std::vector<ExplainedGlobal> globals;
};

Explanation explainProgram(const bpf::ProgramSpec &spec, uint32_t inlineLimit);
std::string explanationToText(const Explanation &explanation);
nlohmann::json explanationToJson(const Explanation &explanation);

nlohmann::json logToJson(const core::SpecializationLog &log);

} // namespace morpheus::cli
