#include "backend/bpf/BpfSignatures.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Function.h>
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

// Helpers that take a map. A helper missing from this list that is handed a
// map makes the analysis treat that map as written (see checkTableUses).
const HelperEntry Helpers[] = {
    {BPF_FUNC_map_lookup_elem, {"map_lookup_elem", AccessKind::Lookup, 0, 1, {}}, 1u << 1},
    {BPF_FUNC_map_update_elem, {"map_update_elem", AccessKind::Update, 0, 1, 2}, (1u << 1) | (1u << 2)},
    {BPF_FUNC_map_delete_elem, {"map_delete_elem", AccessKind::Delete, 0, 1, {}}, 1u << 1},
    {BPF_FUNC_tail_call, {"tail_call", AccessKind::OtherRead, 1, {}, {}}, 0},
    {BPF_FUNC_redirect_map, {"redirect_map", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_map_peek_elem, {"map_peek_elem", AccessKind::OtherRead, 0, {}, {}}, 0},
    {BPF_FUNC_perf_event_output, {"perf_event_output", AccessKind::OtherWrite, 1, {}, 3}, 1u << 3},
    {BPF_FUNC_get_stackid, {"get_stackid", AccessKind::OtherWrite, 1, {}, {}}, 0},
    {BPF_FUNC_map_push_elem, {"map_push_elem", AccessKind::OtherWrite, 0, {}, 1}, 1u << 1},
    {BPF_FUNC_map_pop_elem, {"map_pop_elem", AccessKind::OtherWrite, 0, {}, {}}, 0},
    {BPF_FUNC_ringbuf_output, {"ringbuf_output", AccessKind::OtherWrite, 0, {}, 1}, 1u << 1},
    {BPF_FUNC_ringbuf_reserve, {"ringbuf_reserve", AccessKind::OtherWrite, 0, {}, {}}, 0},
    {BPF_FUNC_for_each_map_elem, {"for_each_map_elem", AccessKind::OtherWrite, 0, {}, {}}, 0},
    {BPF_FUNC_map_lookup_percpu_elem, {"map_lookup_percpu_elem", AccessKind::OtherWrite, 0, 1, {}}, 1u << 1},
};

// Helpers without a map whose pointer arguments are only read.
const std::pair<uint64_t, unsigned> ReadOnlyPointerHelpers[] = {
    {BPF_FUNC_trace_printk, 1u << 0},
    {BPF_FUNC_csum_diff, (1u << 0) | (1u << 2)},
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

std::optional<uint64_t> helperId(const CallBase &call) {
  auto *expr = dyn_cast<ConstantExpr>(call.getCalledOperand());
  if (!expr || expr->getOpcode() != Instruction::IntToPtr)
    return std::nullopt;
  auto *id = dyn_cast<ConstantInt>(expr->getOperand(0));
  if (!id)
    return std::nullopt;
  return id->getZExtValue();
}

std::optional<AccessSignature> BpfSignatures::match(const CallBase &call) const {
  if (const HelperEntry *entry = findHelper(call))
    return entry->signature;
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

bool makesTailCalls(const Module &module) {
  for (const Function &function : module)
    for (const BasicBlock &block : function)
      for (const Instruction &inst : block)
        if (auto *call = dyn_cast<CallBase>(&inst); call && helperId(*call) == BPF_FUNC_tail_call)
          return true;
  return false;
}

} // namespace morpheus::bpf
