// The copies of a program that shadow validation and the fuzzer compare
// (runtime/VersionComparison), as opposed to the versions that run live:
// the same code, except that every call of a helper whose answer differs
// from run to run reads the replay runtime instead (dataplane/replay.bpf.c),
// so the copies draw the same random numbers and read the same clocks. For a
// program that calls no such helper the compared copy is the live object
// itself.
//
// A version's compared copy is its live object with those calls patched
// (patchReplayedCalls): no code generation of its own, and the code under
// comparison is the very code that runs live, byte for byte, but for the
// patched calls. The original's, built once, and a version the patch cannot
// serve (replayedCallsPatchable) are built from IR instead
// (makeComparedCopy): the runtime inlined at each call, a code generation
// of their own.
#pragma once

#include "backend/bpf/dataplane/replay_abi.h"
#include "support/Error.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <vector>

namespace morpheus::bpf {

// Whether `module` calls a helper that is replayed (ReplayedHelpers,
// BpfSignatures.h).
bool callsReplayedHelpers(const llvm::Module &module);

// Makes `module` a compared copy: its calls of replayed helpers call the
// replay runtime, linked in and inlined at each call (nothing else is
// optimized). Returns how many calls it replaced.
Expected<unsigned> makeComparedCopy(llvm::Module &module);

// Whether `module`'s compared copy can be its object with the calls
// patched: a replayer called as a subprogram must be allowed where the
// helper was. The kernel refuses bpf-to-bpf calls in a program with packet
// loads of the classic kind (BPF_LD_ABS/IND: llvm.bpf.load.*), and inline
// assembly other than an empty barrier may hold such loads; such a module
// is built from IR.
bool replayedCallsPatchable(const llvm::Module &module);

// Links the replayers of the helpers `module` calls into it as functions
// no program calls (kept through code generation, never inlined), with the
// replay state's section: its object is then the live version as before
// (libbpf loads no function nothing calls; LoadedObject::load creates the
// state's map only for a copy handed one) and patchReplayedCalls makes its
// compared copy. Run after every optimization, just before code generation.
Error carryReplayRuntime(llvm::Module &module);

// The compared copy of `elf`, an object of a module carryReplayRuntime
// prepared: every call of a replayed helper outside the replayers becomes a
// call of its replayer (a bpf-to-bpf call, with the relocation libbpf
// resolves); every other byte of code is `elf`'s. An object with no
// replayer for a call it makes, or with classic packet loads, is an error.
Expected<std::vector<char>> patchReplayedCalls(llvm::ArrayRef<char> elf);

// The map libbpf makes of the replay state's section (a one-entry array).
inline constexpr const char *ReplayMapName = MORPHEUS_REPLAY_SECTION;

} // namespace morpheus::bpf
