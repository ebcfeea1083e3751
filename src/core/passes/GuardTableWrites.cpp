//===- GuardTableWrites.cpp - Count the data plane's writes per key -------===//
//
// A table the program itself writes (l2switch's MAC table, a load
// balancer's flow table) can have a heavy-hitter fast path only if a write
// of a hot key takes it away at once. This pass makes every data-plane
// write of such a table add one, right after the write, to a counter chosen
// by the written key (writeBucket: the key's bytes hashed into one of
// 1 << bucketBits counters in a Morpheus-owned array,
// WriteGuardOptions::bumpFunction, an atomic add). heavy-hitter-fast-path
// answers a hot key of the table only while its bucket's counter still
// holds what user space read before it read the snapshot; a new flow (a
// key in another bucket) leaves the fast path in place.
//
// The writes counted, per site (TableAccessAnalysis):
//   - update and delete: the key argument's bucket, after the call (an
//     update that fails counts too: harmless, a fast path is only lost);
//   - a lookup whose result the program writes through (a refreshed
//     timestamp, a moved MAC, a counter): the bucket of the lookup's key,
//     counted after each write through the result
//     (TableAccessAnalysis::resultWrites). The key's words are loaded right
//     after the lookup (the key as the lookup read it, whatever the program
//     stores there later); the bucket's arithmetic on them sits at each
//     write, so a packet that writes nothing (an entry refreshed less than
//     a second ago) only pays the loads.
// Tables with any other write (another writing helper, a value pointer
// merged with others or escaping, an unresolved table operand) are not
// counted, and LRU tables are not either: an insert there may evict a hot
// key without any write naming it (whyWritesNotGuardable).
//
// Why the fast path stays exact: user space reads a hot key's bucket
// counter c0, then the entry, then builds code answering that key with the
// entry under `counter == c0`. A data-plane write W of the key is counted
// after W. If the count happened before c0 was read, W happened before the
// entry was read, so the snapshot holds W's result. Otherwise the counter
// differs from c0 from the count on, so every packet after it takes the
// real lookup; a packet that overlaps W on another CPU may see the value
// before W, as it may in the original program. The atomic add loses no
// count, and counters only grow (2^64 writes do not wrap in practice), so a
// counter never comes back to c0. Control-plane writes bump the program
// guard as for every table. Which writes are counted depends on the program
// alone (writeGuardedTables), so the version running while user space
// reads c0 counts them too, and generic copies and unguarded functions are
// counted like the rest: this pass changes every function.
//
// Why it cannot change what the program does: it reads the key bytes the
// access already read (through an opaque copy of the pointer, as compare
// chains do) and writes Morpheus's own counter array, which the program
// never reads.
//
//   entry = bpf_map_lookup_elem(&fdb, &key);
//   if (entry) entry->ifindex = ifindex;
// becomes
//   %entry = call ptr inttoptr (i64 1 to ptr)(ptr @fdb, ptr %key)
//   %word = load i16, ptr %fdb.written.key ... ; the key's words
//   ...
//   store i32 %ifindex, ptr %entry
//   %fdb.written.bucket = ... ; writeBucket of the words
//   call void @morpheus_write_bump(i32 %fdb.written.bucket)
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/IRBuilder.h>

using namespace llvm;

#define DEBUG_TYPE "guard-table-writes"

ALWAYS_ENABLED_STATISTIC(SitesCounted,
                         "write and lookup sites whose writes bump their key's counter");
ALWAYS_ENABLED_STATISTIC(WritesCounted,
                         "data-plane writes followed by a bump of their key's counter");

namespace morpheus::core {

PreservedAnalyses GuardTableWritesPass::run(Module &module, ModuleAnalysisManager &mam) {
  if (!context.writeGuards)
    return PreservedAnalyses::all();
  const WriteGuardOptions &guards = *context.writeGuards;
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  std::set<std::string> tables = writeGuardedTables(info, *context.catalog, guards);
  if (tables.empty())
    return PreservedAnalyses::all();
  const DataLayout &dl = module.getDataLayout();
  LLVMContext &llvmContext = module.getContext();
  FunctionCallee bump = module.getOrInsertFunction(
      guards.bumpFunction, Type::getVoidTy(llvmContext), Type::getInt32Ty(llvmContext));
  bool changed = false;
  for (const AccessSite &site : info.sites) {
    if (!tables.count(site.table) || !site.signature.keyArg)
      continue;
    CallBase &call = *site.call;
    std::vector<Instruction *> writes;
    IRBuilder<> builder(&call);
    switch (site.signature.kind) {
    case AccessKind::Update:
    case AccessKind::Delete:
      writes = {&call};
      break;
    case AccessKind::Lookup:
      if (site.resultWrites.empty())
        continue;
      writes = site.resultWrites;
      builder.SetInsertPoint(call.getNextNode()); // the key as the lookup read it
      break;
    default:
      continue;
    }
    builder.SetCurrentDebugLocation(call.getDebugLoc());
    WriteBucketWords key =
        loadWriteBucketKey(builder, call.getArgOperand(*site.signature.keyArg), site.table,
                           context.catalog->at(site.table).keySize, dl);
    for (Instruction *write : writes) {
      IRBuilder<> after(write->getNextNode());
      after.SetCurrentDebugLocation(write->getDebugLoc());
      after.CreateCall(bump, {emitWriteBucket(after, key, site.table, guards.bucketBits)});
    }
    ++SitesCounted;
    WritesCounted += writes.size();
    if (context.log)
      context.log->record(site, Decider::GuardTableWritesPass, SiteOutcome::Applied,
                          std::to_string(writes.size()) +
                              " write(s) of " + site.table + " counted in the written key's bucket");
    changed = true;
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
