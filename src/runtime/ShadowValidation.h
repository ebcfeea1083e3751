// Pre-swap shadow validation: before the optimizer installs a specialized
// program, sample packets go through it, the original and a witness
// original (runtime/VersionComparison), each on its own scratch copies of
// every live map, and any difference in verdict, output bytes or map
// contents refuses the install.
//
// What it proves is bounded by the sample: packets synthesized to hit the
// keys the specialization read (plus malformed ones), against maps copied
// up to a budget. It is a last line of defence against a wrong pass on the
// live configuration, not a proof of equivalence; `morpheus fuzz` and the
// equivalence tests are the broad checks (docs/equivalence.md).
#pragma once

#include "backend/bpf/ProgramSpec.h"
#include "core/FaultInjection.h"
#include "runtime/ScratchMaps.h"
#include "support/Error.h"

#include <optional>
#include <set>
#include <string>

namespace morpheus::runtime {

struct ShadowOptions {
  uint32_t packets = 64;      // sample size
  uint32_t entryBudget = 256; // live entries copied per map, besides the
                               // ones the specialization read
  uint64_t seed = 1;
  // The programs the copies load (the others' program-array slots stay
  // empty in every copy alike); unset loads the whole object.
  std::optional<std::set<std::string>> programs;
  core::FaultInjection faults; // test-only (VersionComparison::Options)
};

struct ShadowVerdict {
  uint32_t packets = 0; // compared
  // The first difference, described ("verdict: original 2, specialized
  // 1"); the sample packet (1-based) it showed on, none when it showed in
  // the maps after the sample; and the reproducer (VersionComparison's
  // format, JSON text). `difference` is empty when the versions agreed.
  std::string difference;
  std::optional<uint32_t> packet;
  std::string reproducer;
  // Packets (and the map comparison after them) on which the witness
  // disagreed with the original: nondeterminism the copies could not remove.
  // Where the two disagreed nothing was compared; everything else was. Not
  // a reason to refuse.
  uint32_t nondeterministic = 0;
  // Where the validation spent its time (VersionComparison's setup, the
  // specialized copy's load, the sample, the runs, the map comparison).
  std::vector<core::BuildPhase> phases;
};

// `candidate` is the compared copy of a specialized version of `spec`
// (SpecializedObject::comparedElf), built for guard version
// `candidateVersion` from `snapshot`; `live` the live program's maps and
// program-array slots, which the copies mirror and never touch. The
// calling thread is pinned to one CPU meanwhile.
Expected<ShadowVerdict> shadowValidate(const bpf::ProgramSpec &spec, const std::string &entry,
                                       llvm::ArrayRef<char> candidate, uint64_t candidateVersion,
                                       const LiveMaps &live, const core::TableSnapshot &snapshot,
                                       const ShadowOptions &options);

} // namespace morpheus::runtime
