// The eBPF backend's description of table accesses: BPF helper calls,
// recognised by helper id, and BTF-defined maps (globals in ".maps").
#pragma once

#include "backend/bpf/dataplane/replay_abi.h"
#include "core/AccessSignatures.h"
#include "core/ReplayCalls.h"

#include <llvm/IR/Module.h>

namespace morpheus::bpf {

class BpfSignatures : public core::AccessSignatureTable {
public:
  std::optional<core::AccessSignature>
  match(const llvm::CallBase &call) const override;
  bool onlyReadsArgument(const llvm::CallBase &call,
                         unsigned argNo) const override;
  // bpf_spin_lock, bpf_timer_*, bpf_kptr_xchg: the lock, timer or kptr
  // field they are handed.
  std::optional<uint64_t> bytesWrittenThrough(const llvm::CallBase &call,
                                              unsigned argNo) const override;
  bool isTable(const llvm::GlobalVariable &global) const override;
  bool isProgramEntry(const llvm::Function &function) const override;
  // Global (non-static) functions, verified on their own, and functions
  // only declared here (kfuncs, externs).
  bool requiresWritableArguments(const llvm::Function &callee) const override;
};

// The BPF tail-call helper, called or written in inline assembly: the
// object makes tail calls of its own.
bool makesTailCalls(const llvm::Module &module);

// The helper id a call invokes (`call inttoptr (i64 ID to ptr)(...)`).
std::optional<uint64_t> helperId(const llvm::CallBase &call);

// The helpers whose answers differ from run to run, each with the replay
// runtime's function that answers for it in a copy the checks compare
// (ComparedCopy.h, dataplane/replay_abi.h). Every replayer returns 64 bits,
// a 32-bit answer zero-extended as the helper leaves it in r0.
struct ReplayedHelper {
  uint64_t helper;
  const char *replayer;
};
inline constexpr ReplayedHelper ReplayedHelpers[] = {
    {7, MORPHEUS_REPLAY_RANDOM},    // bpf_get_prandom_u32
    {5, MORPHEUS_REPLAY_KTIME},     // bpf_ktime_get_ns
    {118, MORPHEUS_REPLAY_JIFFIES}, // bpf_jiffies64
    {125, MORPHEUS_REPLAY_BOOT},    // bpf_ktime_get_boot_ns
    {160, MORPHEUS_REPLAY_COARSE},  // bpf_ktime_get_coarse_ns
    {208, MORPHEUS_REPLAY_TAI},     // bpf_ktime_get_tai_ns
};

// The replayer of `helper` (ReplayedHelpers); nullopt for any other helper.
std::optional<core::Replayer> replayerOf(uint64_t helper);
// The same for a call (ReplayCallsOptions::replayerOf).
std::optional<core::Replayer> replayerOfCall(const llvm::CallBase &call);

} // namespace morpheus::bpf
