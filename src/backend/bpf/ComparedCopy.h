// The copies of a program that shadow validation and the fuzzer compare
// (runtime/VersionComparison), as opposed to the versions that run live:
// the same code, except that every call of a helper whose answer differs
// from run to run reads the replay runtime instead (core/passes/ReplayCalls,
// dataplane/replay.bpf.c), so the copies draw the same random numbers and
// read the same clocks. Only programs that call such a helper need a copy
// of their own (and pay its code generation); for the others the compared
// copy is the live object itself.
#pragma once

#include "backend/bpf/dataplane/replay_abi.h"
#include "support/Error.h"

#include <llvm/IR/Module.h>

#include <cstdint>

namespace morpheus::bpf {

// Whether `module` calls a helper that is replayed (replayerOf,
// BpfSignatures.h).
bool callsReplayedHelpers(const llvm::Module &module);

// Makes `module` a compared copy: its calls of replayed helpers call the
// replay runtime, linked in and inlined at each call (nothing else is
// optimized). Returns how many calls it replaced.
Expected<unsigned> makeComparedCopy(llvm::Module &module);

// The map libbpf makes of the replay state's section (a one-entry array).
inline constexpr const char *ReplayMapName = MORPHEUS_REPLAY_SECTION;

} // namespace morpheus::bpf
