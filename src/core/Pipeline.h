// The specialization pipeline as one call: given a pristine module (cloned
// by the caller), run-time facts and options, plan the guards (keeping
// generic copies for the in-program fallback), run the table passes, insert
// the program guard, preserve shared state layout and optimize (LLVM's O2
// or the clean-up of a version).
#pragma once

#include "core/AccessSignatures.h"
#include "core/CostModel.h"
#include "core/FaultInjection.h"
#include "core/Globals.h"
#include "core/GuardPlanning.h"
#include "core/LookupGenerator.h"
#include "core/MachineArithmetic.h"
#include "core/ProfileOptions.h"
#include "core/SpecializationLog.h"
#include "core/SpecializationPoints.h"
#include "core/SitePlan.h"
#include "core/TableAccessAnalysis.h"
#include "core/Tables.h"
#include "core/TrafficProfile.h"
#include "core/WriteGuards.h"
#include "support/Error.h"

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class TargetMachine;
}

namespace morpheus::core {

struct SpecializationOptions {
  uint32_t inlineLimit = 64;   // largest table inlined whole (entries)
  std::string constantSection; // section for inlined values ("" = default)
  // Section for the value arrays that index chains read (not read-only to
  // the verifier, see TablePassContext; "" = default).
  std::string indexedValueSection;
  std::optional<ProgramGuardOptions> guard; // none: no guard (offline output)
  // Adds the guard's functions and those the table passes call (the
  // profile's slot, the write counters) to the module, with or without a
  // guard; runs after the table passes so the guard's own table is never
  // seen by them.
  std::function<Error(llvm::Module &)> linkGuardRuntime;
  // For the optimization's target-specific passes; may be null.
  llvm::TargetMachine *targetMachine = nullptr;
  // The machine's results where LLVM IR's arithmetic is undefined: every
  // division, remainder and shift that could be is rewritten to them
  // before anything is folded (passes/DefinedArithmetic). Unset leaves
  // the module's arithmetic as it is (morpheus-opt's tests of one pass).
  std::optional<MachineArithmetic> arithmetic;
  // Table passes to run, by their Passes.def names, in order; unset runs
  // them all. morpheus-opt uses this to test one pass at a time.
  std::optional<std::vector<std::string>> tablePasses;
  // What runs after the table passes and the guard.
  enum class Optimization {
    None,    // nothing: morpheus-opt's tests of the passes alone
    O2,      // LLVM's O2 pipeline whole: the user-space backend's handlers
    Cleanup, // the scalar clean-up once (CleanupPipeline.h): eBPF versions,
             // whose cycles it makes cheaper; measured on those alone
  };
  Optimization optimize = Optimization::O2;
  // Whether the optimization may use the facts annotateAccessCalls gave the
  // access calls' key and value arguments (never captured, only read),
  // which the analysis and the table passes need. Off, it sees the calls
  // left as the program's compiler did (dropAccessCallFacts). The eBPF
  // backend turns it off: with them O2 kept more of the stack in registers
  // across helper calls, whose states the kernel's verifier then tells
  // apart (Katran's balancer, with nothing specialized: 138,781
  // instructions verified against the original's 69,286; without them
  // 70,514).
  bool keepAccessCallFacts = true;
  // The verifier's budget, per program entry: how many paths through
  // compare chains its verification may take (chains in sequence multiply
  // them). Chains beyond it yield an index instead of constants
  // (ChainLowering::Index). An entry not listed has no limit.
  std::map<std::string, uint64_t> verifierPathBudget;
  // Why compare chains are off this time, if they are (inline-small-table
  // then declines every site with this reason).
  std::optional<std::string> noCompareChains;
  // Why regions are off this time, if they are (region-as-table then
  // declines every region with this reason).
  std::optional<std::string> noRegions;
  // Record sampled lookup keys (instrument-table-sites). The slot function
  // comes with the guard runtime (linkGuardRuntime): without it the module
  // keeps a declaration the caller must resolve.
  std::optional<ProfileOptions> profile;
  // Per site id, the hot keys heavy-hitter-fast-path compares first; their
  // answers must be in the snapshot as probed keys.
  std::map<unsigned, std::vector<Bytes>> hotKeys;
  // Per site id, chains of their own for the CPUs whose hot sets differ
  // (core/TrafficProfile); the other CPUs take the site's hotKeys. eBPF
  // only (the site reads the CPU number); answers in the snapshot too.
  std::map<unsigned, PerCpuHotKeys> perCpuHotKeys;
  // Per flow profile site (flow-fast-path), the hot tuples whose code
  // after the flow is copied with the tuple as constants, hottest first.
  std::map<unsigned, std::vector<Bytes>> hotTuples;
  // Count the data plane's writes per key bucket (guard-table-writes), so
  // that hot keys of tables the data plane writes can have fast paths. The
  // bump and count functions come with the guard runtime. Must be set in
  // every version built while such fast paths may run.
  std::optional<WriteGuardOptions> writeGuards;
  // Each bucket's write counter, read before the snapshot (the buckets of
  // hot keys of written tables).
  std::map<uint32_t, uint64_t> writeCounts;
  // The specialization points to assume (core/SpecializationPoints.h); the
  // others are disabled. Assumed points need the guard's in-program
  // fallback: without a guard every point is disabled.
  PointConfiguration points;
  // The live bytes of the program's writable globals (`.data`, `.bss`):
  // fold-read-only-globals folds the ones the program never writes, under
  // checks the guard places. Ignored without a guard.
  GlobalValues globals;
  // Prices each representation a table could get; the LPM passes build the
  // cheapest eligible one (default costs unless calibrated).
  CostModel costModel;
  // Custom generators (core/LookupGenerator.h) for custom-generator; their
  // tables must be in the snapshot whole.
  std::vector<LookupGenerator> generators;
  // Verify the module after each table pass, so that one leaving invalid IR
  // is named; always so in builds with assertions (Pipeline.cpp says why
  // not otherwise).
  bool verifyEachPass = false;
  FaultInjection faults; // test-only
};

// The names of the table passes, in pipeline order (from Passes.def).
std::vector<std::string> tablePassNames();
// Every table pass, in pipeline order, but those in `leftOut`
// (SpecializationOptions::tablePasses with some passes left out).
std::vector<std::string> tablePassesWithout(const std::vector<std::string> &leftOut);

// Analyzes `module` (already prepared with annotateAccessCalls).
TableAccessInfo analyzeModule(llvm::Module &module,
                              const AccessSignatureTable &sigs,
                              const TableCatalog &catalog);

// Specializes `module` in place. Every site gets a decision in the log,
// every root of the program its guard decision. A guard that cannot be
// placed is an error.
Expected<SpecializationLog> specializeModule(llvm::Module &module,
                                             const AccessSignatureTable &sigs,
                                             const TableCatalog &catalog,
                                             const TableSnapshot &snapshot,
                                             const SpecializationOptions &options);

} // namespace morpheus::core
