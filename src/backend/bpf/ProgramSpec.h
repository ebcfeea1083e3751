// What a program is, before any kernel object exists (cilium/ebpf's "spec"):
// its pristine IR, the original ELF built from it, its maps, its programs
// and the analysis of its table accesses. Deterministic and kernel-free, so
// `morpheus analyze` and `morpheus specialize` work offline, and the
// optimizer loop builds every version from the same spec.
#pragma once

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/BpfSignatures.h"
#include "backend/bpf/Frontend.h"
#include "core/Pipeline.h"
#include "core/PristineBitcode.h"
#include "support/Error.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <atomic>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::bpf {

// The object name of the program in `path` ("nf/router/router.bpf.c" ->
// "router"): it names the internal maps and the default pin directory.
std::string objectNameFor(const std::string &path);

// The maps policy keeps generic because another loader writes them
// without the guard (`run --other-writers keep-generic`, `--keep-generic
// MAP`): every map of the program (an adopted program's are all its
// owner's), or these by name. The spec's catalog marks them
// (core::TableInfo::keptGeneric) before the analysis, so no version
// specializes them and every report says why.
struct KeptGeneric {
  bool everyMap = false;
  std::set<std::string> maps;
};

struct SpecializeRequest {
  uint32_t inlineLimit = 64;
  // What each representation of a table costs (the LPM passes build the
  // cheapest eligible one).
  core::CostModel costModel;
  // Guard version to compile against; none builds unguarded code (for
  // offline inspection: such code is only correct while the snapshot holds).
  std::optional<uint64_t> guardVersion;
  // Without a guard version: built to be loaded beside the live version,
  // sharing its maps (Optimizer::loadUnguardedTwin), so its static program
  // slots go, as a guarded version's do.
  bool sharesLiveMaps = false;
  // Per program, from the loaded original. A program without facts (offline)
  // falls back by tail call to its index where that works, else in-program,
  // and its verifier budget comes from its size.
  std::map<std::string, ProgramFacts> programs;
  // Set to say why compare chains are off this time (a retry after the
  // kernel rejected a candidate built from the same snapshot).
  std::optional<std::string> noCompareChains;
  // Set to say why regions are off this time (a second retry, when the
  // kernel also refused the candidate without compare chains).
  std::optional<std::string> noRegions;
  // The table passes to run, by their Passes.def names; unset runs them all.
  std::optional<std::vector<std::string>> tablePasses;
  core::FaultInjection faults; // test-only
  // Record sampled lookup keys into the traffic profile map (guarded
  // versions only), except at lookups in these tables.
  bool instrument = false;
  std::set<std::string> notProfiled;
  // Per site id, the hot keys to compare before the lookup (their answers
  // in the snapshot as probed keys).
  std::map<unsigned, std::vector<core::Bytes>> hotKeys;
  // Per site id, chains of their own for some CPUs (answers probed too).
  std::map<unsigned, core::PerCpuHotKeys> perCpuHotKeys;
  // Per flow profile site, the hot tuples flow-fast-path copies the code
  // after the flow for (core::SpecializationOptions::hotTuples).
  std::map<unsigned, std::vector<core::Bytes>> hotTuples;
  // With `instrument`: count the data plane's writes per key bucket
  // (guard-table-writes), and the counts read before the snapshot, by
  // bucket, under which hot keys of written tables get fast paths.
  std::map<uint32_t, uint64_t> writeCounts;
  // The live bytes of the writable globals (readGlobals over globals()):
  // the ones the program never writes are folded under checks (guarded
  // versions only).
  core::GlobalValues globals;
  // The objects emitted: the version as it runs live, and the copy that
  // shadow validation and the fuzzer compare (ComparedCopy.h). For a
  // program that calls no replayed helper they are the same object; for
  // one that does, the copy is the live object with those calls patched
  // (one code generation for both), or, where the kernel would refuse the
  // patched calls, a code generation of its own.
  bool live = true;
  bool compared = false;
  // Guarded versions: the programs whose guards read the version they
  // expect from their slot of the version array (VersionArraySection), so
  // that a later version may reuse them as loaded, stamped valid for its
  // guard version (runtime/Optimizer, "reused programs").
  std::set<std::string> restampable;
  // Set: the programs built; the others are left out of the object (a
  // later version reuses them from the running one). Unset: all.
  std::optional<std::set<std::string>> programsBuilt;
};

struct SpecializedObject {
  std::vector<char> elf;         // the version as it runs live (if asked for)
  std::vector<char> comparedElf; // the compared copy (if asked for)
  core::SpecializationLog log;
};

class ProgramSpec {
public:
  // `keptGeneric` names maps of the program (a name that is none is an
  // error naming the program's maps).
  static Expected<std::unique_ptr<ProgramSpec>> load(const std::string &path,
                                                     const FrontendOptions &options,
                                                     const KeptGeneric &keptGeneric = {});

  // Builds a version in an LLVMContext of its own (parsed from the
  // pristine bitcode, destroyed with the version's module), so building
  // versions for months leaves no memory behind; a crash (signal) inside
  // LLVM becomes an error and abandons only that context.
  Expected<SpecializedObject> specialize(const core::TableSnapshot &snapshot,
                                         const SpecializeRequest &request) const;

  const std::string &path() const { return sourcePath; }
  // Names internal maps; identical for every version of the program.
  const std::string &objectName() const { return name; }
  // The original's object for every load of it (the live one, validation
  // and fuzzing copies): built without its program arrays' static slots
  // (StaticSlots.h), which each load's owner writes: the live original's
  // load as libbpf would (Optimizer::load), copies into their own arrays.
  const std::vector<char> &originalElf() const { return original; }
  // The original as shadow validation and the fuzzer compare it: its calls
  // of replayed helpers read the replay runtime (ComparedCopy.h); the
  // original's object itself when it makes no such call.
  const std::vector<char> &comparedOriginalElf() const {
    return comparedOriginal.empty() ? original : comparedOriginal;
  }
  // Whether compared copies differ from the live objects (the program calls
  // a replayed helper): they then hold the replay map.
  bool replaysHelpers() const { return !comparedOriginal.empty(); }
  // The slots the source's program-array initializers list.
  const ProgramSlots &staticProgramSlots() const { return staticSlots; }
  const core::TableCatalog &catalog() const { return tables; }
  const core::TableAccessInfo &analysis() const { return access; }
  // Where each writable global lives in its section's map.
  const std::vector<core::GlobalSlice> &globals() const { return globalSlices; }
  // The pristine IR the analysis describes (debug info: field names), its
  // variables' locations dropped (dropVariableLocations, Codegen.h).
  const llvm::Module &module() const { return *pristine; }
  // Program entry functions; an entry's fallback slot is its index.
  const std::vector<std::string> &programs() const { return entries; }
  // What the kernel takes `entry` for (from its section, as placed by the
  // frontend); Other for a name that is no entry.
  ProgramType programType(const std::string &entry) const;
  // The program Morpheus runs (BPF_PROG_TEST_RUN, attached to a port) when
  // the user named `requested` ("" = none): that one, refused unless it
  // is XDP or TC (the error names it, its section and what the kernel
  // takes it for); unnamed, the first XDP or TC program of the object.
  Expected<std::string> runnableEntry(const std::string &requested) const;
  // `entry`'s section, as placed by the frontend; "" for a name that is no
  // entry.
  std::string section(const std::string &entry) const;
  core::ReadPlan readPlan(uint32_t inlineLimit) const;
  // What a snapshot of this program may list (readSnapshotFile): its
  // tables and the section maps of its writable globals, with their sizes.
  Expected<SnapshotLayout> snapshotLayout() const;
  // Where load() spent its time, in the order the steps ran.
  const std::vector<core::BuildPhase> &loadPhases() const { return phases; }
  // Whether the object makes tail calls of its own (then a fallback by
  // tail call is one more for the kernel to count: fallbackFor).
  bool tailCalls() const { return makesTailCalls; }
  // The directory the object's loader pins maps by name in, under the pin
  // root `root` ("" = libbpf's, /sys/fs/bpf): the root, as libbpf; for an
  // object written for iproute2 (LegacyMapFacts::iproute2), its
  // tc/globals, where iproute2 and Cilium's loader pin them.
  std::string pinsByNameUnder(const std::string &root) const;
  // Whether program `entry` registers callbacks (bpf_loop, timers, ...):
  // their guards keep the version as an immediate, so such a program is
  // never reused by a later version (SpecializeRequest::restampable).
  bool registersCallbacks(const std::string &entry) const;

private:
  ProgramSpec() = default;
  // Builds a version whose code `emitter` generates (the original's
  // machine, or longJumps); its arithmetic is the original's machine's
  // whatever the emitter, since it is the original's behaviour it keeps.
  Expected<SpecializedObject> build(const core::TableSnapshot &snapshot,
                                    const SpecializeRequest &request,
                                    llvm::TargetMachine &emitter) const;
  // How `entry` (the index-th program) falls back, from what is known of it.
  core::EntryFallback fallbackFor(const std::string &entry, unsigned index,
                                  const SpecializeRequest &request) const;
  // Whether `entry` takes a ctx it could hand to a tail call.
  bool hasContext(const std::string &entry) const;
  // Without facts from a loaded original (offline): the entry whose kind
  // (ProgramArrayKind) the fallback program array takes, the first with a
  // ctx. The kernel fixes an array's kind at the first program loaded
  // against it and refuses programs of another kind, so only entries of
  // the owner's kind fall back by tail call; the others fall back in the
  // program (live, createFallbackArray registers the entry first and
  // leaves out what cannot join, alike).
  std::optional<std::string> fallbackArrayOwner() const;
  // How many paths through compare chains verifying `entry` may take.
  uint64_t verifierPathBudget(const std::string &entry, const SpecializeRequest &request) const;
  BpfSignatures signatures;
  std::unique_ptr<llvm::LLVMContext> context;
  std::unique_ptr<llvm::Module> pristine;
  core::PristineBitcode pristineBitcode; // what every version is parsed from
  std::unique_ptr<llvm::TargetMachine> machine;
  // cpu v4's, for versions whose functions outgrow 16-bit jumps (the
  // generic copies of a large program double it); null when `machine`
  // is v4 already.
  std::unique_ptr<llvm::TargetMachine> longJumps;
  // Set once a version needed them: the versions after it are as large.
  mutable std::atomic<bool> needsLongJumps = false;
  std::string sourcePath, name;
  std::vector<char> original;
  std::vector<char> comparedOriginal; // empty: the same as `original`
  ProgramSlots staticSlots;
  core::TableCatalog tables;
  core::TableAccessInfo access;
  std::vector<core::GlobalSlice> globalSlices;
  std::vector<std::string> entries;
  std::map<std::string, OpenedProgram> opened; // per program, of the original ELF
  bool makesTailCalls = false;
  LegacyMapFacts legacy;
  std::vector<core::BuildPhase> phases; // of load()
};

} // namespace morpheus::bpf
