// Test-only faults, passed down by the caller as options (never read from
// the environment): they let tests prove that a crash inside the compiler
// costs one cycle and not the process, and that the differential checks
// (fuzzer, shadow validation, bench) notice a wrong specialization.
#pragma once

namespace morpheus::core {

struct FaultInjection {
  enum class Crash {
    None,
    Segv,       // a store through a null pointer
    Abort,      // abort(), as an LLVM assertion would
    FatalError, // llvm::report_fatal_error, as an LLVM backend error would
  };
  // Crashes the pipeline right after the table passes.
  Crash crashAfterTablePasses = Crash::None;
  // Compare chains match the last key byte off by one: a wrong
  // specialization the checks must catch.
  bool breakKeyCompare = false;
  // No verifier budget: every chain yields constants, so a program whose
  // chains multiply the verifier's states is rejected by the kernel (for
  // tests of the retry without chains).
  bool ignoreVerifierBudget = false;
  // LLVM's arithmetic instead of the machine's: no division, remainder or
  // shift is made defined before folding, and the verifier bounds assume
  // divisors are not zero (as before 2026-12-02): a configuration value of
  // 0 folded as a divisor then changes what the program does.
  bool undefinedArithmetic = false;
  // region-as-table hands its columns on as loaded, without the bound of
  // the region's values: the verifier refuses a program that indexes with
  // one (for tests of the retry without regions).
  bool unboundedRegionColumns = false;
  // constant-key-lookup leaves invalid IR behind (an `unreachable` in the
  // middle of the block of each lookup whose value it inlines): the
  // verification after each pass must name it (Pipeline.cpp).
  bool invalidConstantKeyLookup = false;
  // The checks that compare versions (runtime/VersionComparison) with the
  // determinism they rely on taken away, one kind at a time, to show what
  // each kind guarantees: the Specialized copy draws another random stream
  // than the originals; every copy reads the clocks itself (none replays
  // the first copy's readings); scratch hash maps get random seeds (their
  // iteration orders differ); sample contexts stay zeroed (no mark, no
  // device, no receive queue).
  bool unequalRandomStreams = false;
  bool unlatchedClocks = false;
  bool randomHashSeeds = false;
  bool zeroedContext = false;

  bool operator==(const FaultInjection &) const = default;
};

} // namespace morpheus::core
