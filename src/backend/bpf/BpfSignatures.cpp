#include "backend/bpf/BpfSignatures.h"

#include "backend/bpf/dataplane/replay_abi.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>

#include <linux/bpf.h>

using namespace llvm;

namespace morpheus::bpf {

namespace {

using core::AccessKind;
using core::AccessSignature;

struct HelperEntry {
  uint64_t id;
  AccessSignature signature;
  // Pointer arguments the helper only reads (bit i: argument i).
  unsigned readOnlyArgs;
};

// Every helper of linux/bpf.h that takes a map. A helper missing from this
// list that is handed a map makes the analysis treat that map as written
// (see checkTableUses). Reads: the helper never changes the map's contents
// (redirects and tail calls use an entry; perf reads a counter; cgroup tests
// read a slot). Lookups that are not key -> value (one CPU's copy, storage
// attached to a socket, inode, task or cgroup) are not rewritable, but what
// is written through their result is followed like any lookup's;
// bpf_for_each_map_elem is decided per call (BpfSignatures::match).
constexpr unsigned Arg(unsigned i) { return 1u << i; }
const HelperEntry Helpers[] = {
    {BPF_FUNC_map_lookup_elem, {"map_lookup_elem", AccessKind::Lookup, 0, 1, {}}, Arg(1)},
    {BPF_FUNC_map_update_elem, {"map_update_elem", AccessKind::Update, 0, 1, 2}, Arg(1) | Arg(2)},
    {BPF_FUNC_map_delete_elem, {"map_delete_elem", AccessKind::Delete, 0, 1, {}}, Arg(1)},
    {BPF_FUNC_map_lookup_percpu_elem,
     {"map_lookup_percpu_elem", AccessKind::Lookup, 0, 1, {}, /*rewritable=*/false}, Arg(1)},
    {BPF_FUNC_tail_call, {"tail_call", AccessKind::OtherRead, 1, {}, {}}, 0},
    {BPF_FUNC_redirect_map, {"redirect_map", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_sk_redirect_map, {"sk_redirect_map", AccessKind::OtherRead, 1, {}, {}}, 0},
    {BPF_FUNC_msg_redirect_map, {"msg_redirect_map", AccessKind::OtherRead, 1, {}, {}}, 0},
    {BPF_FUNC_sk_redirect_hash, {"sk_redirect_hash", AccessKind::OtherRead, 1, 2, {}}, Arg(2)},
    {BPF_FUNC_msg_redirect_hash, {"msg_redirect_hash", AccessKind::OtherRead, 1, 2, {}}, Arg(2)},
    {BPF_FUNC_sk_select_reuseport,
     {"sk_select_reuseport", AccessKind::OtherRead, 1, 2, {}}, Arg(2)},
    {BPF_FUNC_sock_map_update, {"sock_map_update", AccessKind::Update, 1, 2, {}}, Arg(2)},
    {BPF_FUNC_sock_hash_update, {"sock_hash_update", AccessKind::Update, 1, 2, {}}, Arg(2)},
    {BPF_FUNC_skb_under_cgroup, {"skb_under_cgroup", AccessKind::OtherRead, 1, {}, {}}, 0},
    {BPF_FUNC_current_task_under_cgroup,
     {"current_task_under_cgroup", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_perf_event_read, {"perf_event_read", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_perf_event_read_value,
     {"perf_event_read_value", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_perf_event_output, {"perf_event_output", AccessKind::OtherWrite, 1, {}, 3}, Arg(3)},
    {BPF_FUNC_skb_output, {"skb_output", AccessKind::OtherWrite, 1, {}, 3}, Arg(3)},
    {BPF_FUNC_xdp_output, {"xdp_output", AccessKind::OtherWrite, 1, {}, 3}, Arg(3)},
    {BPF_FUNC_get_stackid, {"get_stackid", AccessKind::OtherWrite, 1, {}, {}}, 0},
    {BPF_FUNC_map_peek_elem, {"map_peek_elem", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_map_push_elem, {"map_push_elem", AccessKind::OtherWrite, 0, {}, 1}, Arg(1)},
    {BPF_FUNC_map_pop_elem, {"map_pop_elem", AccessKind::OtherWrite, 0, {}, {}}, 0},
    {BPF_FUNC_ringbuf_output, {"ringbuf_output", AccessKind::OtherWrite, 0, {}, 1}, Arg(1)},
    {BPF_FUNC_ringbuf_reserve, {"ringbuf_reserve", AccessKind::OtherWrite, 0, {}, {}}, 0},
    {BPF_FUNC_ringbuf_reserve_dynptr,
     {"ringbuf_reserve_dynptr", AccessKind::OtherWrite, 0, {}, {}}, 0},
    {BPF_FUNC_ringbuf_query, {"ringbuf_query", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_user_ringbuf_drain, {"user_ringbuf_drain", AccessKind::OtherWrite, 0, {}, {}}, 0},
    // Storage getters create the owner's entry when asked (flags != 0).
    {BPF_FUNC_sk_storage_get,
     {"sk_storage_get", AccessKind::Lookup, 0, {}, {}, /*rewritable=*/false}, 0},
    {BPF_FUNC_inode_storage_get,
     {"inode_storage_get", AccessKind::Lookup, 0, {}, {}, /*rewritable=*/false}, 0},
    {BPF_FUNC_task_storage_get,
     {"task_storage_get", AccessKind::Lookup, 0, {}, {}, /*rewritable=*/false}, 0},
    {BPF_FUNC_get_local_storage,
     {"get_local_storage", AccessKind::Lookup, 0, {}, {}, /*rewritable=*/false}, 0},
    {BPF_FUNC_sk_storage_delete, {"sk_storage_delete", AccessKind::Delete, 0, {}, {}}, 0},
    {BPF_FUNC_inode_storage_delete, {"inode_storage_delete", AccessKind::Delete, 0, {}, {}}, 0},
    {BPF_FUNC_task_storage_delete, {"task_storage_delete", AccessKind::Delete, 0, {}, {}}, 0},
    {BPF_FUNC_for_each_map_elem, {"for_each_map_elem", AccessKind::OtherWrite, 0, {}, {}}, 0},
    // The timer names its map for its lifetime; the timer field is arg 0.
    {BPF_FUNC_timer_init, {"timer_init", AccessKind::OtherRead, 1, {}, {}}, 0},
};

// Helpers that write a fixed-size object embedded in a map value through
// their pointer argument (the verifier checks it points at that field):
// the value's other bytes are untouched.
struct EmbeddedObjectWrite {
  uint64_t id;
  unsigned argNo;
  uint64_t bytes;
};
const EmbeddedObjectWrite EmbeddedObjectWrites[] = {
    {BPF_FUNC_spin_lock, 0, sizeof(bpf_spin_lock)},
    {BPF_FUNC_spin_unlock, 0, sizeof(bpf_spin_lock)},
    {BPF_FUNC_timer_init, 0, sizeof(bpf_timer)},
    {BPF_FUNC_timer_set_callback, 0, sizeof(bpf_timer)},
    {BPF_FUNC_timer_start, 0, sizeof(bpf_timer)},
    {BPF_FUNC_timer_cancel, 0, sizeof(bpf_timer)},
    {BPF_FUNC_kptr_xchg, 0, sizeof(uint64_t)},
};

// Helpers without a map whose pointer arguments are only read.
const std::pair<uint64_t, unsigned> ReadOnlyPointerHelpers[] = {
    {BPF_FUNC_trace_printk, 1u << 0},
    {BPF_FUNC_csum_diff, (1u << 0) | (1u << 2)},
    {BPF_FUNC_skb_store_bytes, 1u << 2},
    {BPF_FUNC_xdp_store_bytes, 1u << 2},
};

const HelperEntry *findHelper(const CallBase &call) {
  std::optional<uint64_t> id = helperId(call);
  if (!id)
    return nullptr;
  for (const HelperEntry &entry : Helpers)
    if (entry.id == *id)
      return &entry;
  return nullptr;
}

} // namespace

std::optional<core::Replayer> replayerOf(uint64_t helper) {
  for (const ReplayedHelper &replayed : ReplayedHelpers)
    if (replayed.helper == helper)
      return core::Replayer{replayed.replayer, 64};
  return std::nullopt;
}

std::optional<core::Replayer> replayerOfCall(const CallBase &call) {
  std::optional<uint64_t> helper = helperId(call);
  return helper ? replayerOf(*helper) : std::nullopt;
}

std::optional<uint64_t> helperId(const CallBase &call) {
  auto *expr = dyn_cast<ConstantExpr>(call.getCalledOperand());
  if (!expr || expr->getOpcode() != Instruction::IntToPtr)
    return std::nullopt;
  auto *id = dyn_cast<ConstantInt>(expr->getOperand(0));
  if (!id)
    return std::nullopt;
  return id->getZExtValue();
}

namespace {

// A storage getter with flags 0 only looks up; with any other flags it may
// create the owner's entry.
bool createsStorage(const CallBase &call) {
  auto *flags = call.arg_size() > 3 ? dyn_cast<ConstantInt>(call.getArgOperand(3)) : nullptr;
  return !flags || !flags->isZero();
}

// bpf_for_each_map_elem(map, callback, ctx, flags) changes the map only
// through the value pointer it hands the callback (argument 2): a callback
// that only reads it and does not keep it leaves the map as it was.
bool callbackWritesValues(const CallBase &call) {
  auto *callback = call.arg_size() > 1
                       ? dyn_cast<Function>(call.getArgOperand(1)->stripPointerCasts())
                       : nullptr;
  if (!callback || callback->isDeclaration() || callback->arg_size() < 3)
    return true;
  const Argument *value = callback->getArg(2);
  return !(value->onlyReadsMemory() && value->hasNoCaptureAttr());
}

} // namespace

std::optional<AccessSignature> BpfSignatures::match(const CallBase &call) const {
  const HelperEntry *entry = findHelper(call);
  if (!entry)
    return std::nullopt;
  AccessSignature signature = entry->signature;
  switch (entry->id) {
  case BPF_FUNC_for_each_map_elem:
    if (!callbackWritesValues(call))
      signature.kind = AccessKind::OtherRead;
    // long callback(struct bpf_map *map, const void *key, void *value, void *ctx)
    signature.callback = core::AccessSignature::Callback{1, 0};
    break;
  case BPF_FUNC_sk_storage_get:
  case BPF_FUNC_inode_storage_get:
  case BPF_FUNC_task_storage_get:
    if (createsStorage(call))
      signature.kind = AccessKind::OtherWrite;
    break;
  default:
    break;
  }
  return signature;
}

std::optional<uint64_t> BpfSignatures::bytesWrittenThrough(const CallBase &call,
                                                           unsigned argNo) const {
  std::optional<uint64_t> id = helperId(call);
  if (!id)
    return std::nullopt;
  for (const EmbeddedObjectWrite &write : EmbeddedObjectWrites)
    if (write.id == *id && write.argNo == argNo)
      return write.bytes;
  return std::nullopt;
}

bool BpfSignatures::onlyReadsArgument(const CallBase &call, unsigned argNo) const {
  if (argNo >= 32)
    return false;
  if (const HelperEntry *entry = findHelper(call))
    return entry->readOnlyArgs & (1u << argNo);
  if (std::optional<uint64_t> id = helperId(call))
    for (auto [helper, mask] : ReadOnlyPointerHelpers)
      if (helper == *id)
        return mask & (1u << argNo);
  return false;
}

bool BpfSignatures::isTable(const GlobalVariable &global) const {
  return global.hasSection() &&
         (global.getSection() == ".maps" || global.getSection() == "maps");
}

bool BpfSignatures::isProgramEntry(const Function &function) const {
  return !function.isDeclaration() && !function.hasLocalLinkage() &&
         function.hasSection() && !function.getSection().starts_with(".text");
}

// The verifier checks a global function once, on its own, with its pointer
// arguments typed from BTF as memory it may write; a pointer into a
// read-only map is then refused ("write into map forbidden") whatever the
// function does with it. Static functions are verified with their caller's
// exact types.
bool BpfSignatures::requiresWritableArguments(const Function &callee) const {
  return !callee.hasLocalLinkage() && !isProgramEntry(callee);
}

namespace {

// Whether inline assembly holds a tail call: an instruction `call 12`
// (the helper's number), as Cilium's tail_call_static() writes it so the
// slot stays a constant the verifier sees.
bool assemblyTailCalls(const InlineAsm &assembly) {
  SmallVector<StringRef, 8> lines;
  StringRef(assembly.getAsmString()).split(lines, '\n');
  for (StringRef line : lines)
    for (StringRef statement : llvm::split(line, ';')) {
      auto [mnemonic, operand] = statement.trim().split(' ');
      uint64_t helper = 0;
      if (mnemonic == "call" && !operand.trim().getAsInteger(0, helper) &&
          helper == BPF_FUNC_tail_call)
        return true;
    }
  return false;
}

} // namespace

bool makesTailCalls(const Module &module) {
  for (const Function &function : module)
    for (const BasicBlock &block : function)
      for (const Instruction &inst : block) {
        auto *call = dyn_cast<CallBase>(&inst);
        if (!call)
          continue;
        if (helperId(*call) == BPF_FUNC_tail_call)
          return true;
        if (auto *assembly = dyn_cast<InlineAsm>(call->getCalledOperand());
            assembly && assemblyTailCalls(*assembly))
          return true;
      }
  return false;
}

} // namespace morpheus::bpf
