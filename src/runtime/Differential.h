// Differential testing of specialization: the same random map states and
// packets go through the original program and through Morpheus's specialized
// version of it, and any observable difference (verdict, output packet, any
// map's contents afterwards) is a bug in Morpheus. The three-way run and
// its masking of nondeterminism are runtime/VersionComparison's; the map
// states runtime/MapStates'. Backs `morpheus fuzz`.
//
// The fuzzer loads nothing live: every version runs on scratch maps made
// from a load of the program that is never run and never re-opens a pin, so
// fuzzing a program that is also running (its maps pinned by name) leaves
// the running one alone.
#pragma once

#include "backend/bpf/Frontend.h"
#include "runtime/VersionComparison.h"
#include "support/Error.h"

#include "core/FaultInjection.h"
#include "core/Tables.h"

#include <cstdint>
#include <string>

namespace morpheus::runtime {

struct FuzzOptions {
  bpf::FrontendOptions frontend;
  std::string program; // entry program; "" = the first XDP or TC one
  double seconds = 10; // the run stops starting new map states after this
  // ... but not before this many were compared: what a test asserts about
  // coverage must not depend on how loaded the machine is.
  uint64_t minStates = 0;
  uint64_t seed = 1;
  uint32_t inlineLimit = 64;
  uint32_t maxEntries = 8;       // per map and map state
  uint32_t packetsPerState = 24; // each also run again after a guard bump
  // What a control plane configured (e.g. `morpheus bench`'s presets), for
  // map states that look like a real deployment: half of the map states
  // are a random subset of these (up to 4 x maxEntries per map), with one
  // value in four rewritten at random.
  MapContents configured;
  // Where the first difference is written as JSON, mode 0600 (it holds map
  // contents), replacing a link there rather than following it
  // (support/Files); "" writes nothing.
  std::string reproducerPath;
  double shrinkSeconds = 10; // budget for dropping map entries
  core::FaultInjection faults; // test-only: applied to every specialization
};

struct FuzzReport {
  // The program fuzzed (FuzzOptions::program, or the object's first XDP or
  // TC program), its type, and how many programs the object has.
  std::string program;
  bpf::ProgramType type = bpf::ProgramType::Xdp;
  size_t programs = 0;
  uint64_t cases = 0;    // (map state, packet) pairs compared
  uint64_t differed = 0; // of those, the ones where the versions disagreed
  uint64_t states = 0;   // map states specialized for
  uint64_t configuredStates = 0; // of those, drawn from FuzzOptions::configured
  // Cases on which the copies could not be made to agree with each other
  // (VersionComparison): the witness disagreed with the original (the
  // parts where they disagreed were not compared), or a difference did not
  // reproduce when the case was replayed twice. Not differences.
  uint64_t nondeterministic = 0;
  // Within the former, what was left uncompared (VersionComparison::
  // MaskCounts): verdicts, 8-byte words, key sets.
  uint64_t maskedBytes = 0, maskedVerdicts = 0, maskedKeySets = 0;
  double setUpSeconds = 0; // compiling, loading and verifying the copies
  double seconds = 0;      // fuzzing, after the set-up
  std::string reproducer; // the first difference as JSON text; "" if none
};

// Fuzzes the XDP program at `path` (BPF C, .ll or .bc). Errors are problems
// running the fuzzer (compile, load, syscalls), not differences; a version
// Morpheus cannot build or the kernel rejects is a difference. Pins the
// calling thread to one CPU while it runs so per-CPU values line up.
Expected<FuzzReport> fuzzProgram(const std::string &path, const FuzzOptions &options);

} // namespace morpheus::runtime
