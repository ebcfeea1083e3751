#include "backend/bpf/Codegen.h"

#include "support/FileCache.h"

#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/Config/llvm-config.h>

#include <llvm/ADT/ScopeExit.h>
#include <llvm/IR/DebugInfo.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Support/CrashRecoveryContext.h>
#include <llvm/Support/ErrorHandling.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/SubtargetFeature.h>

#include <cstring>
#include <mutex>
#include <unistd.h>

using namespace llvm;

namespace morpheus::bpf {

Expected<std::unique_ptr<TargetMachine>>
createTargetMachine(const Module &module) {
  static std::once_flag initialized;
  std::call_once(initialized, [] {
    LLVMInitializeBPFTargetInfo();
    LLVMInitializeBPFTarget();
    LLVMInitializeBPFTargetMC();
    LLVMInitializeBPFAsmPrinter();
    // Inline asm in a program (barriers, hand-written instructions) is
    // assembled in process; without the parser LLVM aborts on it.
    LLVMInitializeBPFAsmParser();
  });
  std::string error;
  const std::string &triple = module.getTargetTriple();
  const Target *target = TargetRegistry::lookupTarget(triple, error);
  if (!target)
    return makeError("{0}: no LLVM target for '{1}': {2}",
                     module.getModuleIdentifier(), triple, error);
  std::string cpu = "generic", features;
  for (const Function &function : module)
    if (!function.isDeclaration()) {
      if (function.hasFnAttribute("target-cpu"))
        cpu = function.getFnAttribute("target-cpu").getValueAsString().str();
      if (function.hasFnAttribute("target-features"))
        features =
            function.getFnAttribute("target-features").getValueAsString().str();
      break;
    }
  std::unique_ptr<TargetMachine> machine(target->createTargetMachine(
      triple, cpu, features, TargetOptions(), Reloc::PIC_, std::nullopt,
      CodeGenOptLevel::Default));
  if (!machine)
    return makeError("{0}: cannot create a BPF target machine for cpu '{1}'",
                     module.getModuleIdentifier(), cpu);
  return machine;
}

Expected<std::unique_ptr<TargetMachine>> longJumpMachine(const TargetMachine &machine) {
  std::unique_ptr<TargetMachine> longJumps(machine.getTarget().createTargetMachine(
      machine.getTargetTriple().str(), "v4", machine.getTargetFeatureString(),
      machine.Options, Reloc::PIC_, std::nullopt, CodeGenOptLevel::Default));
  if (!longJumps)
    return makeError("cannot create a BPF target machine for cpu v4");
  return longJumps;
}

core::MachineArithmetic machineArithmetic(const TargetMachine &machine) {
  StringRef cpu = machine.getTargetCPU();
  if (cpu == "probe")
    cpu = sys::detail::getHostCPUNameForBPF();
  SubtargetFeatures features(machine.getTargetFeatureString());
  bool alu32 = cpu == "v3" || cpu == "v4" || llvm::is_contained(features.getFeatures(), "+alu32");
  return core::MachineArithmetic{alu32 ? 32u : 64u, /*definedDivision=*/true};
}

namespace {

// The reason of an LLVM fatal error raised under runRecoverably.
thread_local std::string fatalReason;

// LLVM reports some errors (an instruction its backend cannot select, an
// inline asm it cannot emit) with report_fatal_error, which exits the
// process once its handler returns. Under runRecoverably the handler keeps
// the reason and unwinds to RunSafely instead; elsewhere it prints as
// LLVM's own would.
void onFatalError(void *, const char *reason, bool) {
  if (llvm::CrashRecoveryContext *recovery = llvm::CrashRecoveryContext::GetCurrent()) {
    fatalReason = reason;
    recovery->HandleExit(1);
  }
  std::string message = std::string("LLVM ERROR: ") + reason + "\n";
  (void)!::write(2, message.data(), message.size());
}

} // namespace

Error runRecoverably(const std::string &what, function_ref<void()> work) {
  static const bool installed = [] {
    llvm::CrashRecoveryContext::Enable();
    llvm::install_fatal_error_handler(onFatalError);
    return true;
  }();
  (void)installed;
  fatalReason.clear();
  llvm::CrashRecoveryContext recovery;
  if (recovery.RunSafely(work))
    return Error::success();
  if (!fatalReason.empty())
    return llvm::make_error<LlvmFatalError>(what, fatalReason);
  int signal = recovery.RetCode - 128;
  return makeError("{0} crashed ({1}, signal {2})", what,
                   signal > 0 ? strsignal(signal) : "unknown", signal);
}

// clang's -g describes where each variable lives as it goes (debug
// records: #dbg_value, #dbg_declare, #dbg_assign with its assignment
// tracking, #dbg_label). Nothing loaded reads them: libbpf reads BTF, whose
// types come from the functions' and globals' metadata (a function's
// arguments from its subprogram's retained nodes) and whose line info
// from the instructions' locations, all of which stay. Debug info never
// changes the code LLVM generates, yet every pass, the verifier and code
// generation carry the records along: a variable's location through
// instruction selection, register allocation and DWARF's location lists.
// The analysis of assignment tracking alone took about 40 % of code
// generation on a 100K-instruction program.
void dropVariableLocations(Module &module) {
  for (Function &function : module) {
    for (Instruction &instruction : instructions(function))
      instruction.dropDbgRecords();
    at::deleteAll(&function);
  }
  // A module in the intrinsics' form (an older bitcode) has calls instead.
  std::vector<Instruction *> calls;
  for (Function &function : module)
    for (Instruction &instruction : instructions(function))
      if (isa<DbgInfoIntrinsic>(instruction))
        calls.push_back(&instruction);
  for (Instruction *call : calls)
    call->eraseFromParent();
  NamedMDNode *flags = module.getModuleFlagsMetadata();
  if (!flags)
    return;
  SmallVector<MDNode *, 8> kept;
  for (MDNode *flag : flags->operands()) {
    auto *key = flag->getNumOperands() > 1 ? dyn_cast<MDString>(flag->getOperand(1)) : nullptr;
    if (!key || key->getString() != "debug-info-assignment-tracking")
      kept.push_back(flag);
  }
  flags->clearOperands();
  for (MDNode *flag : kept)
    flags->addOperand(flag);
}

// The object cache's key for `module` as emitObject generates it.
std::string objectKey(const Module &module, const TargetMachine &machine) {
  SmallVector<char, 0> bitcode;
  raw_svector_ostream stream(bitcode);
  WriteBitcodeToFile(module, stream);
  CacheKey key;
  key.add("morpheus-object-1").add(LLVM_VERSION_STRING);
  if (!key.addFileIdentity("/proc/self/exe"))
    return "";
  key.add(machine.getTargetTriple().str())
      .add(machine.getTargetCPU())
      .add(machine.getTargetFeatureString())
      .add(StringRef(bitcode.data(), bitcode.size()));
  return key.hex();
}

Expected<std::vector<char>> emitObject(Module &module, TargetMachine &machine,
                                       const std::optional<std::string> &cacheDirectory) {
  dropVariableLocations(module);
  module.setDataLayout(machine.createDataLayout());
  std::optional<FileCache> cache;
  std::string key;
  if (cacheDirectory && !(key = objectKey(module, machine)).empty()) {
    cache.emplace(*cacheDirectory, "object", ".o");
    if (std::unique_ptr<MemoryBuffer> kept = cache->read(key))
      return std::vector<char>(kept->getBufferStart(), kept->getBufferEnd());
  }
  SmallVector<char, 0> buffer;
  raw_svector_ostream stream(buffer);
  // The BPF backend reports unsupported code (stack overflow, too many
  // arguments) as diagnostics whose default handler exits the process; the
  // daemon must survive them, so collect them as an error instead.
  LLVMContext &context = module.getContext();
  struct Collected {
    std::string errors;
  } collected;
  auto oldHandler = context.getDiagnosticHandlerCallBack();
  void *oldContext = context.getDiagnosticContext();
  context.setDiagnosticHandlerCallBack(
      [](const DiagnosticInfo *info, void *opaque) {
        if (info->getSeverity() != DS_Error)
          return;
        std::string text;
        raw_string_ostream stream(text);
        DiagnosticPrinterRawOStream printer(stream);
        info->print(printer);
        auto *into = static_cast<Collected *>(opaque);
        into->errors += (into->errors.empty() ? "" : "\n") + stream.str();
      },
      &collected);
  auto restore = make_scope_exit(
      [&] { context.setDiagnosticHandlerCallBack(oldHandler, oldContext); });
  legacy::PassManager passes;
  if (machine.addPassesToEmitFile(passes, stream, nullptr,
                                  CodeGenFileType::ObjectFile))
    return makeError("{0}: the BPF target cannot emit object files",
                     module.getModuleIdentifier());
  passes.run(module);
  if (!collected.errors.empty())
    return makeError("{0}: BPF code generation failed: {1}",
                     module.getModuleIdentifier(), collected.errors);
  if (cache)
    cache->store(key, StringRef(buffer.data(), buffer.size()));
  return std::vector<char>(buffer.begin(), buffer.end());
}

} // namespace morpheus::bpf
