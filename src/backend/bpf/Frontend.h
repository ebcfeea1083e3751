// Turns what the user gives us (BPF C, LLVM IR text or bitcode) into an LLVM
// module kept in memory, and links Morpheus's own data-plane runtime into it.
#pragma once

#include "backend/bpf/LegacyMaps.h"
#include "backend/bpf/ProgramType.h"
#include "backend/bpf/dataplane/guard_abi.h"
#include "support/CacheDirectory.h"
#include "support/Error.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

namespace morpheus::bpf {

struct FrontendOptions {
  // Extra compiler flags for C input (-I, -D, ...), passed to clang verbatim.
  std::vector<std::string> cflags;
  // The type of programs in sections libbpf cannot place (--prog-type).
  std::optional<ProgramType> programType;
  // A compile database (compile_commands.json) whose entry for a C source
  // gives the flags that decide what it means (CompileDatabase.h); they
  // come before `cflags`.
  std::optional<std::string> compileDatabase;
  // The bytes a read-only global starts with instead of its initializer,
  // by the global's name: an adopted program's .rodata as the owner's
  // loader left it (it may rewrite `const volatile` globals before load).
  std::map<std::string, std::vector<char>> globalBytes;
  // Maps sized as the program's own loader sizes them before load
  // (--max-entries MAP=N, MapSizes.h), by name.
  std::map<std::string, uint32_t> maxEntries;
  // Where what is built from the source is kept across runs: clang's
  // bitcode (under bitcode/, support/Clang.h) and the original's object
  // (under object/, Codegen.h); unset: always build (--no-build-cache).
  std::optional<std::string> buildCache = cacheDirectory();
};

// A program as the frontend hands it on: its module, and what its legacy
// map definitions said that the module no longer does (where its loader
// pins maps by name).
struct LoadedSource {
  std::unique_ptr<llvm::Module> module;
  LegacyMapFacts legacy;
};

// Loads `path`: .c is compiled with clang-19 (-O2 -g -target bpf), .ll and
// .bc are parsed; IR built for the host is retargeted to BPF where that
// changes nothing it means (retargetHostModule), said once on stderr; a C
// source that fails on glibc's gnu/stubs-32.h is told what to pass. Legacy
// map definitions (section "maps") become BTF-defined maps, iproute2's
// tail-call sections their static slots (convertLegacyMaps), maps are sized as
// `options.maxEntries` says (resizeMaps); constants Cilium's loader puts
// in the code are put there (inlineConfigConstants). Every program gets a
// section libbpf places and global linkage (placeProgramSections). Access
// sites are annotated (core::annotateAccessCalls) so every later clone
// shares their ids.
Expected<LoadedSource> loadProgram(const std::string &path, const FrontendOptions &options,
                                   llvm::LLVMContext &context);

// Links the guard runtime (dataplane/guard.bpf.c, built into the binary as
// bitcode) into `module`, with its functions made internal so the O2
// pipeline inlines them and drops what is unused.
Error linkRuntime(llvm::Module &module);

// Links `bitcode` (a runtime of Morpheus's built into the binary, named
// `what` in errors) into `module`, its functions built for the module's
// CPU, and the functions named `internal` made internal (to be inlined).
Error linkBitcode(llvm::Module &module, llvm::StringRef bitcode, llvm::StringRef what,
                  llvm::ArrayRef<const char *> internal);

// Names the runtime defines, shared with the loader (dataplane/guard_abi.h).
inline constexpr const char *GuardHoldsFunction = MORPHEUS_GUARD_HOLDS;
inline constexpr const char *GuardEnterFunction = MORPHEUS_GUARD_ENTER;
inline constexpr const char *GuardMapName = MORPHEUS_GUARD_MAP;
inline constexpr const char *FallbackMapName = MORPHEUS_FALLBACK_MAP;
inline constexpr const char *ProfileMapName = MORPHEUS_PROFILE_MAP;
inline constexpr const char *ProfileSlotFunction = MORPHEUS_PROFILE_SLOT;
inline constexpr const char *WritesMapName = MORPHEUS_WRITES_MAP;
inline constexpr const char *WriteBumpFunction = MORPHEUS_WRITE_BUMP;
inline constexpr const char *WriteCountFunction = MORPHEUS_WRITE_COUNT;
inline constexpr uint32_t WriteBucketBits = MORPHEUS_WRITE_BUCKET_BITS;
inline constexpr unsigned MaxPrograms = MORPHEUS_MAX_PROGRAMS; // fallback slots
// Where a version's programs that may be reused by later versions read the
// guard version they expect (core::ProgramGuardOptions::versionArray): a
// section of its own, so libbpf gives it a writable map of the version's
// own, which Morpheus rewrites to stamp a reused program valid.
inline constexpr const char *VersionArraySection = ".data.morpheus_versions";

} // namespace morpheus::bpf
