#include "backend/bpf/Frontend.h"

#include "backend/bpf/CompileDatabase.h"
#include "backend/bpf/ConfigConstants.h"
#include "backend/bpf/HostTarget.h"
#include "backend/bpf/MapSizes.h"

#include "backend/bpf/BpfSignatures.h"
#include "core/TableAccessAnalysis.h"
#include "support/Clang.h"
#include "support/ProgramFile.h"
#include "support/Log.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SourceMgr.h>

#include <mutex>
#include <set>

extern "C" const unsigned char morpheus_guard_runtime_start[];
extern "C" const unsigned char morpheus_guard_runtime_end[];

using namespace llvm;

namespace morpheus::bpf {

// Gives the global `name` the initial bytes `bytes`: a global of as many
// bytes, same section, alignment, debug info (its BTF) and attributes,
// takes its place and name. With opaque pointers every use reads the new
// bytes through the same loads and GEPs, typed by what they access.
static Error setGlobalBytes(Module &module, StringRef name, const std::vector<char> &bytes) {
  GlobalVariable *old = module.getNamedGlobal(name);
  if (!old)
    return makeError("no global '{0}' to give the owner's bytes", name);
  const DataLayout &layout = module.getDataLayout();
  if (layout.getTypeAllocSize(old->getValueType()) != bytes.size())
    return makeError("global '{0}': {1} bytes, the owner's has {2}", name,
                     uint64_t(layout.getTypeAllocSize(old->getValueType())), bytes.size());
  Constant *value = ConstantDataArray::get(
      module.getContext(),
      ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(bytes.data()), bytes.size()));
  auto *replacement =
      new GlobalVariable(module, value->getType(), old->isConstant(), old->getLinkage(), value,
                         "", old, old->getThreadLocalMode(), old->getAddressSpace());
  replacement->copyAttributesFrom(old);
  replacement->setAlignment(old->getAlign().value_or(layout.getPreferredAlign(old)));
  replacement->copyMetadata(old, 0);
  old->replaceAllUsesWith(replacement);
  replacement->takeName(old);
  old->eraseFromParent();
  return Error::success();
}

// Says `note` on stderr the first time this process loads what it is about
// (a program is loaded again for every copy and restart of a cycle).
static void saidOnce(const std::string &note) {
  static std::mutex mutex;
  static std::set<std::string> said;
  std::lock_guard lock(mutex);
  if (said.insert(note).second)
    processLog().warning(note);
}

// clang's diagnostic when glibc's headers are read for the BPF target:
// features.h includes gnu/stubs.h, which on x86 includes stubs-32.h unless
// __x86_64__ is defined, and only the 64-bit stubs are installed. Its
// text is the only place this is said.
static Error withGlibcHint(Error failed, const std::string &path) {
  ErrorDetails details = takeErrorDetails(std::move(failed));
  if (StringRef(details.message).contains("'gnu/stubs-32.h' file not found"))
    details.message +=
        "\n" + path + " includes glibc's headers (gnu/stubs-32.h is asked for by "
        "gnu/stubs.h, which takes the BPF target for 32-bit x86): pass -D__x86_64__ "
        "(`-D __x86_64__` on Morpheus's command line) so they take their 64-bit path, as "
        "they do in the project's host build (`clang -O2 -emit-llvm -c`, then `llc "
        "-march=bpf`; Morpheus takes that .bc too)";
  return llvm::createStringError(details.code, "%s", details.message.c_str());
}

Expected<LoadedSource> loadProgram(const std::string &path, const FrontendOptions &options,
                                   LLVMContext &context) {
  auto format = programFormat(path);
  if (!format)
    return format.takeError();
  std::unique_ptr<Module> module;
  if (*format != ProgramFormat::C) {
    SMDiagnostic diagnostic;
    module = parseIRFile(path, diagnostic, context);
    if (!module) {
      std::string message;
      raw_string_ostream stream(message);
      diagnostic.print("", stream, /*ShowColors=*/false);
      return makeError("{0}: invalid LLVM IR: {1}", path, StringRef(message).trim());
    }
  } else {
    std::vector<std::string> flags = {"-O2", "-g", "-target", "bpf",
                                      "-I/usr/include/x86_64-linux-gnu"};
    if (options.compileDatabase) {
      auto project = compileDatabaseFlags(*options.compileDatabase, path);
      if (!project)
        return project.takeError();
      flags.insert(flags.end(), project->begin(), project->end());
    }
    flags.insert(flags.end(), options.cflags.begin(), options.cflags.end());
    auto bitcode = compileToBitcode(MORPHEUS_CLANG, path, flags, options.buildCache);
    if (!bitcode)
      return withGlibcHint(bitcode.takeError(), path);
    if (bitcode->fromCache)
      processLog().debug(path + ": clang's bitcode from " +
                         bitcode->buffer->getBufferIdentifier());
    auto parsed = parseBitcodeFile(bitcode->buffer->getMemBufferRef(), context);
    if (!parsed)
      return withContext(parsed.takeError(), path + ": clang output");
    module = std::move(*parsed);
  }
  // Host-compiled IR (`clang -emit-llvm` without -target bpf, then `llc
  // -march=bpf`, as Katran builds) is retargeted as llc does, where that
  // changes nothing it means (HostTarget.h).
  std::string host = module->getTargetTriple();
  auto retargeted = retargetHostModule(*module, path);
  if (!retargeted)
    return retargeted.takeError();
  if (*retargeted)
    saidOnce(path + ": LLVM IR for '" + host + "' (built for the host), retargeted to BPF as "
             "`llc -march=bpf` does: every type it lays out has BPF's layout, and it has no "
             "host assembly or intrinsics");
  module->setModuleIdentifier(path);
  for (const auto &[name, bytes] : options.globalBytes)
    if (Error err = setGlobalBytes(*module, name, bytes))
      return withContext(std::move(err), path);
  auto legacy = convertLegacyMaps(*module, path);
  if (!legacy)
    return legacy.takeError();
  if (Error err = resizeMaps(*module, options.maxEntries, path))
    return err;
  if (Error err = inlineConfigConstants(*module, path))
    return err;
  if (Error err = placeProgramSections(*module, path, options.programType))
    return err;
  core::annotateAccessCalls(*module, BpfSignatures());
  return LoadedSource{std::move(module), *legacy};
}

Error linkBitcode(Module &module, StringRef bitcode, StringRef what,
                  ArrayRef<const char *> internal) {
  auto runtime = parseBitcodeFile(MemoryBufferRef(bitcode, what), module.getContext());
  if (!runtime)
    return withContext(runtime.takeError(), "embedded " + what.str());
  (*runtime)->setTargetTriple(module.getTargetTriple());
  (*runtime)->setDataLayout(module.getDataLayout());
  // The runtime is inlined into the program's functions, which LLVM does
  // only between functions built for the same CPU: the runtime takes the
  // program's (-mcpu=v4 given to clang carries through).
  const Function *model = nullptr;
  for (const Function &function : module)
    if (!function.isDeclaration()) {
      model = &function;
      break;
    }
  for (Function &function : **runtime)
    if (model && !function.isDeclaration())
      for (const char *attribute : {"target-cpu", "target-features"}) {
        function.removeFnAttr(attribute);
        if (model->hasFnAttribute(attribute))
          function.addFnAttr(model->getFnAttribute(attribute));
      }
  if (Linker::linkModules(module, std::move(*runtime)))
    return makeError("cannot link the {0} into {1}", what, module.getModuleIdentifier());
  for (const char *name : internal)
    if (Function *function = module.getFunction(name))
      function->setLinkage(GlobalValue::InternalLinkage);
  return Error::success();
}

Error linkRuntime(Module &module) {
  StringRef bitcode(reinterpret_cast<const char *>(morpheus_guard_runtime_start),
                    morpheus_guard_runtime_end - morpheus_guard_runtime_start);
  return linkBitcode(module, bitcode, "guard runtime",
                     {GuardHoldsFunction, GuardEnterFunction, ProfileSlotFunction,
                      WriteBumpFunction, WriteCountFunction});
}

} // namespace morpheus::bpf
