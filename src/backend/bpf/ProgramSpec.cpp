#include "backend/bpf/ProgramSpec.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Codegen.h"
#include "backend/bpf/StaticSlots.h"
#include "backend/bpf/VerifierBounds.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Support/CrashRecoveryContext.h>
#include <llvm/Support/Path.h>
#include <llvm/Transforms/Utils/Cloning.h>

#include <cstring>
#include <optional>

namespace morpheus::bpf {

// libbpf derives internal map names from the object name; keep it short and
// identical for every version of the program.
std::string objectNameFor(const std::string &path) {
  std::string stem = llvm::sys::path::stem(path).str();
  if (auto dot = stem.find('.'); dot != std::string::npos)
    stem.resize(dot);
  return stem.empty() ? "prog" : stem;
}

Expected<std::unique_ptr<ProgramSpec>> ProgramSpec::load(const std::string &path,
                                                         const FrontendOptions &options) {
  std::unique_ptr<ProgramSpec> spec(new ProgramSpec());
  spec->context = std::make_unique<llvm::LLVMContext>();
  spec->sourcePath = path;
  spec->name = objectNameFor(path);
  auto module = loadProgram(path, options, *spec->context);
  if (!module)
    return module.takeError();
  spec->pristine = std::move(*module);
  auto target = createTargetMachine(*spec->pristine);
  if (!target)
    return target.takeError();
  spec->machine = std::move(*target);

  // Code generation may adjust the IR it is given; always hand it a clone.
  auto elf = emitObject(*llvm::CloneModule(*spec->pristine), *spec->machine);
  if (!elf)
    return elf.takeError();
  spec->original = std::move(*elf);
  spec->staticSlots = bpf::staticProgramSlots(*spec->pristine);
  if (!spec->staticSlots.empty()) {
    std::unique_ptr<llvm::Module> withoutSlots = llvm::CloneModule(*spec->pristine);
    removeStaticProgramSlots(*withoutSlots);
    auto copyElf = emitObject(*withoutSlots, *spec->machine);
    if (!copyElf)
      return copyElf.takeError();
    spec->originalWithoutSlots = std::move(*copyElf);
  }
  auto catalog = readCatalog(spec->original, spec->name);
  if (!catalog)
    return withContext(catalog.takeError(), path);
  spec->tables = std::move(*catalog);
  llvm::raw_svector_ostream bitcode(spec->pristineBitcode);
  llvm::WriteBitcodeToFile(*spec->pristine, bitcode);
  spec->access = core::analyzeModule(*spec->pristine, spec->signatures, spec->tables);
  for (const llvm::Function &function : *spec->pristine)
    if (spec->signatures.isProgramEntry(function))
      spec->entries.push_back(function.getName().str());
  if (spec->entries.empty())
    return makeError("{0}: no program (a function in a SEC(\"...\") section)", path);
  if (spec->entries.size() > MaxPrograms)
    return makeError("{0}: {1} programs; Morpheus manages at most {2} per object",
                     path, spec->entries.size(), MaxPrograms);
  return spec;
}

core::ReadPlan ProgramSpec::readPlan(uint32_t inlineLimit) const {
  return core::planReads(access, tables, inlineLimit);
}

Expected<SpecializedObject>
ProgramSpec::specialize(const core::TableSnapshot &snapshot,
                        const SpecializeRequest &request) {
  // A crash (signal) in a pass or in code generation must cost one version,
  // not the daemon.
  static const bool recoveryEnabled = (llvm::CrashRecoveryContext::Enable(), true);
  (void)recoveryEnabled;
  std::optional<Expected<SpecializedObject>> result;
  llvm::CrashRecoveryContext recovery;
  if (recovery.RunSafely([&] { result.emplace(build(snapshot, request)); }))
    return std::move(*result);
  int signal = recovery.RetCode - 128;
  Error crashed = makeError("{0}: specialization crashed ({1}, signal {2}); no new version",
                            sourcePath, signal > 0 ? strsignal(signal) : "unknown", signal);
  return llvm::joinErrors(std::move(crashed), renewContext());
}

Error ProgramSpec::renewContext() {
  // The crashed clone lived in the pristine module's context, which it may
  // have left half-updated (uniqued constants, metadata, use lists). That
  // context, the pristine module and the clone are abandoned untouched
  // (leaked: even destroying them could crash), and every later version
  // clones a pristine module parsed afresh from the bitcode kept at load.
  // What in-process recovery cannot undo is damage to process-wide state
  // (a lock held inside malloc).
  auto fresh = std::make_unique<llvm::LLVMContext>();
  auto parsed = llvm::parseBitcodeFile(
      llvm::MemoryBufferRef(llvm::StringRef(pristineBitcode.data(), pristineBitcode.size()),
                            sourcePath),
      *fresh);
  if (!parsed)
    return withContext(parsed.takeError(), sourcePath + ": cannot re-read the pristine IR");
  (void)pristine.release();
  (void)context.release();
  context = std::move(fresh);
  pristine = std::move(*parsed);
  access = core::analyzeModule(*pristine, signatures, tables);
  return Error::success();
}

Expected<SpecializedObject> ProgramSpec::build(const core::TableSnapshot &snapshot,
                                               const SpecializeRequest &request) const {
  std::unique_ptr<llvm::Module> clone = llvm::CloneModule(*pristine);
  // Guarded versions share the live program arrays, whose slots only the
  // live original's load writes; an unguarded build (offline) is a program
  // of its own and keeps them.
  if (request.guardVersion)
    removeStaticProgramSlots(*clone);
  core::SpecializationOptions options;
  options.inlineLimit = request.inlineLimit;
  // Inlined values get their own read-only section, hence their own map, so
  // the program's .rodata stays exactly as the original declares it.
  options.constantSection = ".rodata.morpheus";
  if (request.guardVersion) {
    std::vector<std::string> guarded = entries;
    for (std::string &name : guarded)
      if (request.unguardedPrograms.count(name))
        name.clear();
    options.guard = core::ProgramGuardOptions{GuardFunction, *request.guardVersion, guarded};
    options.linkGuardRuntime = linkRuntime;
  }
  options.targetMachine = machine.get();
  auto log = core::specializeModule(*clone, signatures, tables, snapshot, options);
  if (!log)
    return withContext(log.takeError(), sourcePath);
  restoreVerifierBounds(*clone);
  auto elf = emitObject(*clone, *machine);
  if (!elf)
    return elf.takeError();
  return SpecializedObject{std::move(*elf), std::move(*log)};
}

} // namespace morpheus::bpf
