#include "backend/user/WriteCounters.h"

#include <llvm/IR/IRBuilder.h>

using namespace llvm;

namespace morpheus::user {

static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t) &&
                  std::atomic<uint64_t>::is_always_lock_free,
              "JIT-compiled code adds to the counters as plain 64-bit words");

WriteCounters::WriteCounters() : counters(new std::atomic<uint64_t>[size_t(1) << BucketBits]) {
  for (size_t bucket = 0; bucket < (size_t(1) << BucketBits); ++bucket)
    counters[bucket].store(0, std::memory_order_relaxed);
}

uint64_t WriteCounters::read(uint32_t bucket) const {
  return counters[bucket & ((1u << BucketBits) - 1)].load(std::memory_order_acquire);
}

void WriteCounters::copyFrom(const WriteCounters &live) {
  for (uint32_t bucket = 0; bucket < (uint32_t(1) << BucketBits); ++bucket)
    counters[bucket].store(live.read(bucket), std::memory_order_relaxed);
}

core::WriteGuardOptions WriteCounters::guardOptions() {
  return core::WriteGuardOptions{BumpFunction, CountFunction, BucketBits, {}};
}

void WriteCounters::linkFunctions(Module &module) {
  LLVMContext &context = module.getContext();
  IRBuilder<> builder(context);
  Type *i64 = builder.getInt64Ty();
  auto *storageType = ArrayType::get(i64, uint64_t(1) << BucketBits);
  // The counter of the function's bucket argument.
  auto counterOf = [&](Function *function) {
    auto *storage = cast<GlobalVariable>(module.getOrInsertGlobal(StorageSymbol, storageType));
    return builder.CreateInBoundsGEP(
        storageType, storage, {builder.getInt64(0), builder.CreateZExt(function->getArg(0), i64)},
        "counter");
  };
  if (Function *bump = module.getFunction(BumpFunction); bump && bump->isDeclaration()) {
    bump->setLinkage(GlobalValue::InternalLinkage);
    bump->addFnAttr(Attribute::AlwaysInline);
    builder.SetInsertPoint(BasicBlock::Create(context, "entry", bump));
    builder.CreateAtomicRMW(AtomicRMWInst::Add, counterOf(bump), builder.getInt64(1), Align(8),
                            AtomicOrdering::SequentiallyConsistent);
    builder.CreateRetVoid();
  }
  if (Function *count = module.getFunction(CountFunction); count && count->isDeclaration()) {
    count->setLinkage(GlobalValue::InternalLinkage);
    count->addFnAttr(Attribute::AlwaysInline);
    builder.SetInsertPoint(BasicBlock::Create(context, "entry", count));
    LoadInst *now = builder.CreateLoad(i64, counterOf(count), "count");
    now->setAtomic(AtomicOrdering::Acquire);
    now->setAlignment(Align(8));
    builder.CreateRet(now);
  }
}

} // namespace morpheus::user
