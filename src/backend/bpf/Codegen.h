// IR -> BPF ELF object in memory, with the LLVM BPF backend in-process.
#pragma once

#include "core/MachineArithmetic.h"
#include "support/Error.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/Module.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::bpf {

// A target machine for `module`'s triple and the CPU/features its functions
// were compiled for (so -mcpu=v3 given to clang carries through).
Expected<std::unique_ptr<llvm::TargetMachine>>
createTargetMachine(const llvm::Module &module);

// What the eBPF machine computes where LLVM IR's arithmetic is undefined,
// for the CPU `machine` generates code for: ALU32 (-mcpu=v3, v4, or
// +alu32; "probe" as LLVM resolves it) computes integers of up to 32 bits
// in 32-bit registers, earlier CPUs in 64-bit ones.
core::MachineArithmetic machineArithmetic(const llvm::TargetMachine &machine);

// Emits `module` as a BPF ELF object (with BTF from its debug info).
// Inline asm is parsed by the BPF assembler; diagnostics become errors.
// The module is adjusted first: its variables' locations are dropped
// (dropVariableLocations).
//
// With a cache directory (support/FileCache) the object is kept across
// runs under a hash of the module's bitcode (as adjusted), the target
// machine's triple, CPU and features, LLVM's version and the Morpheus
// binary itself (its size and time: code generation is ours too), and
// read back instead of generated: the original of a large program costs
// seconds to generate at every start, for the same IR.
Expected<std::vector<char>> emitObject(llvm::Module &module, llvm::TargetMachine &machine,
                                       const std::optional<std::string> &cacheDirectory = {});

// Drops `module`'s debug records of variables and labels (#dbg_value,
// #dbg_declare, #dbg_assign and its assignment tracking, #dbg_label, or
// their intrinsics): nothing loaded reads them (BTF's types and line info
// come from the rest of the debug info, which stays), and they change no
// instruction, yet every pass and code generation carries them along.
void dropVariableLocations(llvm::Module &module);

// LLVM stopped `what` with a fatal error (report_fatal_error) under
// runRecoverably; LLVM gives its reason as text only.
class LlvmFatalError : public llvm::ErrorInfo<LlvmFatalError, TypedError> {
public:
  inline static char ID = 0;
  LlvmFatalError(std::string what, std::string reason)
      : what(std::move(what)), llvmReason(std::move(reason)) {}
  const std::string &reason() const { return llvmReason; }
  // The BPF backend's report of a jump whose offset does not fit the 16
  // bits of an instruction before cpu v4 (a function of more than 32K
  // instructions): v4's 32-bit `gotol` reaches it.
  bool branchOutOfRange() const {
    return llvm::StringRef(llvmReason).starts_with("Branch target out of insn range");
  }
  std::error_code convertToErrorCode() const override { return llvm::inconvertibleErrorCode(); }

protected:
  std::string describe() const override { return what + " failed inside LLVM: " + llvmReason; }

private:
  std::string what, llvmReason;
};

// A target machine as `machine`, for cpu v4, whose jumps reach any
// instruction of a function (`gotol`, conditional jumps over it).
Expected<std::unique_ptr<llvm::TargetMachine>>
longJumpMachine(const llvm::TargetMachine &machine);

// Runs `work` (LLVM passes, code generation) so that a crash inside LLVM
// costs an error, not the process: a signal (SIGSEGV, SIGABRT from an
// assertion) or an LLVM fatal error (report_fatal_error, which would
// otherwise exit) ends `work` and comes back as "WHAT crashed (...)" or
// an LlvmFatalError ("WHAT failed inside LLVM: REASON"). An error means `work` was cut short:
// the LLVM context it used may then be inconsistent and must not be used
// again.
Error runRecoverably(const std::string &what, llvm::function_ref<void()> work);

} // namespace morpheus::bpf
