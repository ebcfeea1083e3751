#include "backend/bpf/Frontend.h"

#include "backend/bpf/CompileDatabase.h"

#include "backend/bpf/BpfSignatures.h"
#include "core/TableAccessAnalysis.h"

#include <llvm/ADT/ScopeExit.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IRReader/IRReader.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/TargetParser/Triple.h>

extern "C" const unsigned char morpheus_guard_runtime_start[];
extern "C" const unsigned char morpheus_guard_runtime_end[];

using namespace llvm;

namespace morpheus::bpf {

namespace {

Expected<std::unique_ptr<MemoryBuffer>>
compileC(const std::string &path, const FrontendOptions &options) {
  SmallString<128> output, errors;
  if (std::error_code ec = sys::fs::createTemporaryFile("morpheus", "bc", output))
    return makeSystemError(ec.value(), "{0}: cannot create a temporary file", path);
  if (std::error_code ec = sys::fs::createTemporaryFile("morpheus", "err", errors))
    return makeSystemError(ec.value(), "{0}: cannot create a temporary file", path);
  auto cleanup = make_scope_exit([&] {
    sys::fs::remove(output);
    sys::fs::remove(errors);
  });

  std::vector<std::string> args = {MORPHEUS_CLANG, "-O2", "-g", "-target", "bpf",
                                   "-I/usr/include/x86_64-linux-gnu"};
  if (options.compileDatabase) {
    auto flags = compileDatabaseFlags(*options.compileDatabase, path);
    if (!flags)
      return flags.takeError();
    args.insert(args.end(), flags->begin(), flags->end());
  }
  args.insert(args.end(), options.cflags.begin(), options.cflags.end());
  args.insert(args.end(), {"-emit-llvm", "-c", path, "-o", output.str().str()});
  std::vector<StringRef> argv(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt,
                                          StringRef(errors)};
  std::string execError;
  int status = sys::ExecuteAndWait(MORPHEUS_CLANG, argv, std::nullopt,
                                   redirects, 0, 0, &execError);
  if (status != 0) {
    std::string diagnostics;
    if (auto buffer = MemoryBuffer::getFile(errors))
      diagnostics = (*buffer)->getBuffer().rtrim().str();
    if (status < 0)
      return makeError("{0}: cannot run {1}: {2}", path, MORPHEUS_CLANG, execError);
    return makeError("{0}: clang failed:\n{1}", path, diagnostics);
  }
  auto buffer = MemoryBuffer::getFile(output);
  if (!buffer)
    return makeSystemError(buffer.getError().value(), "{0}: cannot read clang output", path);
  return std::move(*buffer);
}

} // namespace

Expected<std::unique_ptr<Module>> loadProgram(const std::string &path,
                                              const FrontendOptions &options,
                                              LLVMContext &context) {
  if (!sys::fs::exists(path))
    return makeError("{0}: no such file", path);
  std::unique_ptr<Module> module;
  StringRef extension = sys::path::extension(path);
  if (extension == ".ll" || extension == ".bc") {
    SMDiagnostic diagnostic;
    module = parseIRFile(path, diagnostic, context);
    if (!module) {
      std::string message;
      raw_string_ostream stream(message);
      diagnostic.print("", stream, /*ShowColors=*/false);
      return makeError("{0}: invalid LLVM IR: {1}", path, StringRef(message).trim());
    }
  } else {
    auto bitcode = compileC(path, options);
    if (!bitcode)
      return bitcode.takeError();
    auto parsed = parseBitcodeFile((*bitcode)->getMemBufferRef(), context);
    if (!parsed)
      return withContext(parsed.takeError(), path + ": clang output");
    module = std::move(*parsed);
  }
  // Host-compiled IR (`clang -emit-llvm` without -target bpf, then `llc
  // -march=bpf`) is declined, not lowered: its data layout, type sizes
  // (long, pointers in structs), calling convention and whatever the host
  // headers expanded to are the host's, and retargeting the module would
  // change what the program does wherever they differ from BPF's.
  Triple triple(module->getTargetTriple());
  if (!triple.isBPF())
    return makeError("{0}: LLVM IR for target '{1}', not BPF (host-compiled: clang "
                     "-emit-llvm without -target bpf). Morpheus takes BPF IR only: pass the C "
                     "source itself (with its -I/-D flags, or --compile-db), or build the IR "
                     "with `clang -target bpf -O2 -g -emit-llvm -c`",
                     path, module->getTargetTriple().empty() ? std::string("none")
                                                              : module->getTargetTriple());
  module->setModuleIdentifier(path);
  if (Error err = placeProgramSections(*module, path, options.programType))
    return err;
  core::annotateAccessCalls(*module, BpfSignatures());
  return module;
}

Error linkRuntime(Module &module) {
  StringRef bitcode(reinterpret_cast<const char *>(morpheus_guard_runtime_start),
                    morpheus_guard_runtime_end - morpheus_guard_runtime_start);
  auto runtime = parseBitcodeFile(MemoryBufferRef(bitcode, "guard.bpf.c"),
                                  module.getContext());
  if (!runtime)
    return withContext(runtime.takeError(), "embedded guard runtime");
  (*runtime)->setTargetTriple(module.getTargetTriple());
  (*runtime)->setDataLayout(module.getDataLayout());
  // The guard is inlined into the program's functions, which LLVM does
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
    return makeError("cannot link the guard runtime into {0}",
                     module.getModuleIdentifier());
  for (const char *name : {GuardHoldsFunction, GuardEnterFunction})
    if (Function *guard = module.getFunction(name))
      guard->setLinkage(GlobalValue::InternalLinkage);
  return Error::success();
}

} // namespace morpheus::bpf
