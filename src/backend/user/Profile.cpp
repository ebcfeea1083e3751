#include "backend/user/Profile.h"

#include <llvm/IR/IRBuilder.h>

#include <algorithm>
#include <cstring>

using namespace llvm;

namespace morpheus::user {

static_assert(offsetof(Profile::Site, keys) == 16, "the slot function's layout");

Profile::Profile() : sites(new Site[Sites]), seen(Sites, 0) {
  std::memset(sites.get(), 0, sizeof(Site) * Sites);
}

Profile::Samples Profile::read(unsigned site, uint32_t keySize) {
  Samples samples;
  if (site >= Sites)
    return samples;
  const Site &state = sites[site];
  samples.period = state.period;
  samples.written = state.written - seen[site];
  uint64_t kept = std::min<uint64_t>(samples.written, Slots);
  keySize = std::min<uint32_t>(keySize, KeyBytes);
  for (uint64_t n = state.written - kept; n < state.written; ++n) {
    const uint8_t *slot = state.keys[n & (Slots - 1)];
    samples.keys.emplace_back(slot, slot + keySize);
  }
  seen[site] = state.written;
  return samples;
}

void Profile::setPeriod(unsigned site, uint32_t period) {
  if (site >= Sites)
    return;
  Site &state = sites[site];
  state.period = period;
  state.countdown = period ? std::min(state.countdown ? state.countdown : period, period) : 0;
  seen[site] = state.written;
}

void Profile::linkSlotFunction(Module &module) {
  if (module.getFunction(SlotFunction) && !module.getFunction(SlotFunction)->isDeclaration())
    return;
  LLVMContext &context = module.getContext();
  IRBuilder<> builder(context);
  Type *i32 = builder.getInt32Ty(), *i64 = builder.getInt64Ty();
  auto *siteType = StructType::get(
      context, {i32, i32, i64, ArrayType::get(ArrayType::get(builder.getInt8Ty(), KeyBytes), Slots)});
  auto *storageType = ArrayType::get(siteType, Sites);
  auto *storage = cast<GlobalVariable>(module.getOrInsertGlobal(StorageSymbol, storageType));
  auto *pointer = PointerType::get(context, 0);
  Function *slot = module.getFunction(SlotFunction);
  if (!slot)
    slot = Function::Create(FunctionType::get(pointer, {i32}, false),
                            GlobalValue::InternalLinkage, SlotFunction, module);
  slot->setLinkage(GlobalValue::InternalLinkage);
  slot->addFnAttr(Attribute::AlwaysInline);
  BasicBlock *entry = BasicBlock::Create(context, "entry", slot);
  BasicBlock *sample = BasicBlock::Create(context, "sample", slot);
  BasicBlock *count = BasicBlock::Create(context, "count", slot);
  BasicBlock *skip = BasicBlock::Create(context, "skip", slot);

  builder.SetInsertPoint(entry);
  Value *site = builder.CreateInBoundsGEP(storageType, storage,
                                          {builder.getInt64(0), builder.CreateZExt(slot->getArg(0), i64)},
                                          "site");
  Value *countdownField = builder.CreateStructGEP(siteType, site, 0);
  Value *left = builder.CreateLoad(i32, countdownField, "left");
  builder.CreateCondBr(builder.CreateICmpEQ(left, builder.getInt32(1)), sample, count);

  // Not this one: count down (unless sampling is off).
  builder.SetInsertPoint(count);
  BasicBlock *down = BasicBlock::Create(context, "down", slot);
  builder.CreateCondBr(builder.CreateICmpEQ(left, builder.getInt32(0)), skip, down);
  builder.SetInsertPoint(down);
  builder.CreateStore(builder.CreateSub(left, builder.getInt32(1)), countdownField);
  builder.CreateBr(skip);
  builder.SetInsertPoint(skip);
  builder.CreateRet(ConstantPointerNull::get(pointer));

  // Sampled: the next countdown is period/2 + a spread below period (a
  // multiplicative hash of the sample count), at least 1.
  builder.SetInsertPoint(sample);
  Value *writtenField = builder.CreateStructGEP(siteType, site, 2);
  Value *written = builder.CreateLoad(i64, writtenField, "written");
  builder.CreateStore(builder.CreateAdd(written, builder.getInt64(1)), writtenField);
  Value *period = builder.CreateLoad(i32, builder.CreateStructGEP(siteType, site, 1), "period");
  Value *spread = builder.CreateLShr(
      builder.CreateMul(builder.CreateTrunc(written, i32), builder.getInt32(2654435761u)), 16);
  Value *next = builder.CreateAdd(builder.CreateLShr(period, 1),
                                  builder.CreateAnd(spread, builder.CreateSub(period, builder.getInt32(1))));
  next = builder.CreateSelect(builder.CreateICmpEQ(next, builder.getInt32(0)), builder.getInt32(1), next);
  builder.CreateStore(next, countdownField);
  Value *index = builder.CreateAnd(written, builder.getInt64(Slots - 1));
  builder.CreateRet(builder.CreateInBoundsGEP(
      siteType, site, {builder.getInt32(0), builder.getInt32(3), index, builder.getInt64(0)}, "slot"));
}

Expected<std::vector<core::TrafficSource::Samples>> TrafficStorage::samples(unsigned site,
                                                                          uint32_t keySize) {
  Profile::Samples read = profile->read(site, keySize);
  std::vector<Samples> cpus(1);
  cpus[0].keys = std::move(read.keys);
  cpus[0].written = read.written;
  cpus[0].period = read.period;
  return cpus;
}

} // namespace morpheus::user
