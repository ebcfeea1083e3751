//===- HeavyHitterFastPath.cpp - Compare the hot keys before the lookup ---===//
//
// A lookup in a read-only table too large to inline whole gets, in front of
// it, a chain of full-key compares over the keys the traffic profile found
// hot for this site (TablePassContext::hotKeys, hottest first, as many as
// pay for their compares: core/TrafficProfile). A hit yields the address of
// a constant copy of what the table answers for that key, so O2 folds the
// value into the code that follows, as for inline-small-table; a miss falls
// through to the original lookup, untouched (marked kept, so no other pass
// rewrites it).
//
// Why it is correct: for every key the chain compares, the kernel's answer
// is the snapshot's answer for exactly that key — for a hash table the
// entry with that key, for an array the slot at that index, for an LPM trie
// the trie's own answer to a lookup of that whole key, prefix length
// included (user space asked the kernel exactly that lookup: the snapshot's
// probed keys, never its prefixes) — and every other key reaches the real
// lookup. The compare covers every key byte, read through an opaque copy of
// the key pointer (LookupRewriter), so no two keys are confused. The table
// is read-only to the data plane (whyNotInlinable), lookups have no side
// effects (LRU excluded), value pointers are never compared with anything
// but null, and control-plane writes bump the program guard, which sends
// packets to the generic code before the table changes. Which keys are hot
// affects only speed: a wrong heavy-hitter set is slower, never wrong.
// Keys the snapshot shows absent are left to the lookup, and so are keys
// whose per-CPU values differ between CPUs.
//
// Tables the data plane writes (guard-table-writes counts their writes per
// key bucket, context.writeGuards): a site qualifies only when nothing is
// written through its own result (whyNotInlinable with writes guarded: the
// fast path skips the search and a write must reach the real entry), and
// each hot key's match is answered only while the counter of its bucket
// still holds the count read before the snapshot (context.writeCounts);
// otherwise the key goes on to the lookup. GuardTableWrites.cpp says why
// that makes the constant answer the live one; a hot key whose bucket was
// not read gets no fast path. A hot key such a table does not hold (an
// unknown MAC, flooded) is answered null under its count the same way:
// inserting it is a counted write (an update site), so while the count
// holds it is still absent. Fast paths are optional: the
// verifier budget (Pipeline.cpp) drops the hot keys answered with values
// where they would not fit beside the compare chains already planned;
// those answered null add no verifier path and stay.
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/IR/IRBuilder.h>

using namespace llvm;

namespace morpheus::core {

namespace {

// In front of `lookup` (a written table's, kept on the fast path's miss
// path or untouched): each of `keys`, absent from the snapshot, compared in
// full and, while `stillUnwritten` holds for it (its write count is the one
// read before the snapshot: no insert of it since), answered null without
// the lookup. Every other key, and a key whose count moved, reaches the
// lookup.
void answerAbsent(LookupRewriter &rewriter, CallBase &lookup, unsigned keyArg,
                  const std::vector<Bytes> &keys, const std::string &table, uint32_t keySize,
                  LookupRewriter::EntryGuard stillUnwritten) {
  Module &module = *lookup.getModule();
  const DataLayout &dl = module.getDataLayout();
  LLVMContext &llvmContext = module.getContext();
  Function *function = lookup.getFunction();
  IRBuilder<> builder(llvmContext);
  LookupRewriter::Frame frame =
      rewriter.openFrame(lookup, keyArg, table + ".absent", builder, keys.size() + 1);
  std::vector<KeyChunk> chunks = keyChunks(keySize, frame.keyAlignment);
  std::vector<Value *> words;
  for (KeyChunk chunk : chunks)
    words.push_back(LookupRewriter::loadKey(builder, frame, chunk.offset,
                                            builder.getIntNTy(chunk.width * 8),
                                            table + ".absent.key"));
  BasicBlock *ask = BasicBlock::Create(llvmContext, table + ".absent.ask", function, frame.tail);
  BranchInst::Create(frame.tail, ask);
  BasicBlock *compare = frame.head;
  for (const Bytes &absentKey : keys) {
    builder.SetInsertPoint(compare);
    Value *match = nullptr;
    for (size_t i = 0; i < chunks.size(); ++i) {
      Value *equal = builder.CreateICmpEQ(
          words[i], ConstantInt::get(words[i]->getType(),
                                     chunkValue(absentKey, chunks[i], dl.isLittleEndian())));
      match = match ? builder.CreateAnd(match, equal) : equal;
    }
    BasicBlock *matched = BasicBlock::Create(llvmContext, table + ".absent", function, ask);
    BasicBlock *next = BasicBlock::Create(llvmContext, table + ".absent.next", function, ask);
    builder.CreateCondBr(match, matched, next);
    builder.SetInsertPoint(matched);
    TableEntry entry;
    entry.key = absentKey;
    builder.CreateCondBr(stillUnwritten(builder, entry), frame.tail, next);
    frame.result->addIncoming(ConstantPointerNull::get(cast<PointerType>(lookup.getType())),
                              matched);
    compare = next;
  }
  builder.SetInsertPoint(compare);
  builder.CreateBr(ask);
  LookupRewriter::closeFrame(lookup, frame, LookupRewriter::CallKept::OnMissPath, ask);
}

} // namespace

PreservedAnalyses HeavyHitterFastPathPass::run(Module &module, ModuleAnalysisManager &mam) {
  if (context.hotKeys.empty())
    return PreservedAnalyses::all();
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  std::set<std::string> writeGuarded;
  if (context.writeGuards)
    writeGuarded = writeGuardedTables(info, *context.catalog, *context.writeGuards);
  LLVMContext &llvmContext = module.getContext();
  bool littleEndian = module.getDataLayout().isLittleEndian();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        auto hot = context.hotKeys.find(site.id);
        if (hot == context.hotKeys.end() || hot->second.empty())
          return false;
        // A table small enough is turned whole into code, or was declined
        // by the passes that do it. A trie read whole holds prefixes, not
        // the answers to lookups of the hot keys.
        bool written = !info.isReadOnly(site.table);
        if (written && !writeGuarded.count(site.table))
          return false; // accepted with writes guarded, but they are not counted
        if (!written && contents.complete &&
            (contents.entries.size() <= context.inlineLimit ||
             table.match == TableMatch::LongestPrefix))
          return declineSite(context, site, "heavy-hitter-fast-path",
                             "table read whole: not a fast-path candidate");
        if (site.key.constantKey)
          return declineSite(context, site, "heavy-hitter-fast-path",
                             "constant key: constant-key-lookup's");
        if (context.noCompareChains)
          return declineSite(context, site, "heavy-hitter-fast-path", *context.noCompareChains);
        std::vector<const TableEntry *> entries;
        std::vector<Bytes> absent; // written tables: answered null under their count
        unsigned uncounted = 0;
        for (const Bytes &key : hot->second) {
          if (key.size() != table.keySize)
            continue;
          std::optional<const TableEntry *> answer = hotKeyAnswer(contents, key, written);
          if (!answer)
            continue; // left to the lookup
          if (written && !context.writeCounts.count(writeBucket(
                             site.table, key, context.writeGuards->bucketBits, littleEndian))) {
            ++uncounted; // no write count read before the snapshot
            continue;
          }
          if (*answer)
            entries.push_back(*answer);
          else
            absent.push_back(key);
        }
        if (entries.empty() && absent.empty() && uncounted)
          return declineSite(context, site, "heavy-hitter-fast-path",
                             "no write count read for its hot keys (the running version has "
                             "not counted the table's writes for a whole period yet)");
        if (entries.empty() && absent.empty())
          return declineSite(context, site, "heavy-hitter-fast-path",
                             "no hot key present in the table");
        // Per entry: still the count read before the snapshot.
        auto unwritten = [&](IRBuilderBase &builder, const TableEntry &entry) -> Value * {
          uint32_t bucket =
              writeBucket(site.table, entry.key, context.writeGuards->bucketBits, littleEndian);
          FunctionCallee count = module.getOrInsertFunction(
              context.writeGuards->countFunction, Type::getInt64Ty(llvmContext),
              Type::getInt32Ty(llvmContext));
          Value *now = builder.CreateCall(count, {builder.getInt32(bucket)},
                                          site.table + ".writes");
          return builder.CreateICmpEQ(now, builder.getInt64(context.writeCounts.at(bucket)),
                                      site.table + ".unwritten");
        };
        if (!entries.empty())
          rewriter.replaceWithDispatch(
              *site.call, *site.signature.keyArg, entries, site.table, ChainLowering::Constants,
              LookupRewriter::OnMiss::KeepLookup,
              written ? LookupRewriter::EntryGuard(unwritten) : LookupRewriter::EntryGuard());
        if (!absent.empty())
          answerAbsent(rewriter, *site.call, *site.signature.keyArg, absent, site.table,
                       table.keySize, unwritten);
        if (context.log) {
          std::string compared =
              entries.empty() ? ""
                              : std::to_string(entries.size()) +
                                    " hot keys compared before the lookup";
          std::string answeredNull =
              absent.empty() ? ""
                             : std::to_string(absent.size()) + " absent ones answered null";
          context.log->record(site, "heavy-hitter-fast-path", true,
                              compared + (compared.empty() || answeredNull.empty() ? "" : ", ") +
                                  answeredNull +
                                  (written ? ", each under its write count" : ""));
          std::vector<TableEntry> &inlined = context.log->inlined[site.table];
          for (const TableEntry *entry : entries)
            inlined.push_back(*entry);
        }
        return true;
      },
      /*writesGuarded=*/context.writeGuards.has_value());
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
