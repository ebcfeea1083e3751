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
// included (user space asked the kernel exactly that lookup, the snapshot's
// probed keys; or, for a trie read whole, the longest of its prefixes that
// holds the key's address and is no longer than the key's prefix length,
// core::trieAnswer, checked against the kernel's trie by
// ConstantKeyLookup.EveryConstantTrieKeyIsAnsweredAsTheKernelsTrie: the
// compare is on the hot key, the value the prefix's) — and every other key reaches the real
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
//
// Per-CPU chains (context.perCpuHotKeys: the profile found the CPUs' hot
// sets different enough to pay for reading the CPU number, TrafficProfile
// decides): the lookup is split by a switch on bpf_get_smp_processor_id
// (which the verifier inlines on x86-64: a load from the per-CPU area, no
// helper call) into one copy of the call per listed CPU and one for every
// other CPU, each with its own chain in front of it, built exactly as the
// global one (the others take the global chain), the copies' results
// joined where the call was. Correct for the same reasons: every copy is
// the same lookup, every chain answers only its keys and only with their
// snapshot answers (under their write counts for written tables), every
// other key reaches a copy's untouched lookup; the CPU a packet runs on
// decides which keys are compared, never an answer. The verifier budget
// counts the keys any arm answers with a value (Pipeline.cpp
// fastPathPaths), and drops the per-CPU chains first.
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/IRBuilder.h>

#include <map>
#include <optional>
#include <set>

using namespace llvm;

#define DEBUG_TYPE "heavy-hitter-fast-path"

ALWAYS_ENABLED_STATISTIC(SitesWithFastPaths, "lookups with a chain of hot keys in front");
ALWAYS_ENABLED_STATISTIC(HotKeysCompared, "hot keys compared in those chains");
ALWAYS_ENABLED_STATISTIC(PerCpuChains, "CPUs given a chain of their own at a lookup");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookups with hot keys left alone");

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

// The keys of one chain, as the chain answers them.
struct Chain {
  std::vector<LookupRewriter::Arm> entries; // answered with the snapshot's value
  std::vector<Bytes> absent; // written tables: answered null under their count
  unsigned uncounted = 0;    // no write count read before the snapshot: left out
  bool empty() const { return entries.empty() && absent.empty(); }
  // Every key the chain compares, for the log.
  std::vector<Bytes> keys() const {
    std::vector<Bytes> every = absent;
    for (const LookupRewriter::Arm &arm : entries)
      every.push_back(*arm.key);
    return every;
  }
  std::string describe(bool written) const {
    std::string compared =
        entries.empty() ? "" : std::to_string(entries.size()) + " hot keys compared before the lookup";
    std::string answeredNull =
        absent.empty() ? "" : std::to_string(absent.size()) + " absent ones answered null";
    return compared + (compared.empty() || answeredNull.empty() ? "" : ", ") + answeredNull +
           (written ? ", each under its write count" : "");
  }
};

// BPF_FUNC_get_smp_processor_id, which the verifier inlines on x86-64
// (a load from the per-CPU area, no helper call: checked with bpftool
// prog dump xlated on 6.18).
constexpr uint64_t GetSmpProcessorId = 8;

// Splits `lookup` by the CPU the packet runs on: a switch on the CPU
// number, in front of it, to one copy of the call per CPU in `cpus` and one
// for every other CPU; the copies' results join where the call was.
// Returns the copies by CPU, the others' under nullopt. Each copy is the
// same lookup (same table, same key): a copy left alone answers as the
// call did.
std::map<std::optional<unsigned>, CallBase *> splitByCpu(CallBase &lookup,
                                                         const std::set<unsigned> &cpus,
                                                         const std::string &table) {
  LLVMContext &llvmContext = lookup.getContext();
  Function *function = lookup.getFunction();
  BasicBlock *head = lookup.getParent();
  BasicBlock *tail = head->splitBasicBlock(&lookup, table + ".cpu.join");
  head->getTerminator()->eraseFromParent();
  IRBuilder<> builder(head);
  FunctionType *helperType = FunctionType::get(builder.getInt64Ty(), false);
  Value *helper = ConstantExpr::getIntToPtr(builder.getInt64(GetSmpProcessorId),
                                            PointerType::getUnqual(llvmContext));
  Value *cpu = builder.CreateTrunc(builder.CreateCall(helperType, helper, {}, table + ".cpu"),
                                   builder.getInt32Ty());
  std::map<std::optional<unsigned>, CallBase *> copies;
  auto arm = [&](const std::string &name) {
    BasicBlock *block = BasicBlock::Create(llvmContext, name, function, tail);
    CallBase *copy = cast<CallBase>(lookup.clone());
    copy->insertInto(block, block->end());
    BranchInst::Create(tail, block);
    return std::make_pair(block, copy);
  };
  auto [others, othersCopy] = arm(table + ".cpu.others");
  copies[std::nullopt] = othersCopy;
  SwitchInst *dispatch = builder.CreateSwitch(cpu, others, unsigned(cpus.size()));
  for (unsigned number : cpus) {
    auto [block, copy] = arm(table + ".cpu" + std::to_string(number));
    dispatch->addCase(builder.getInt32(number), block);
    copies[number] = copy;
  }
  PHINode *joined = PHINode::Create(lookup.getType(), unsigned(copies.size()), "", &lookup);
  for (auto &[number, copy] : copies)
    joined->addIncoming(copy, copy->getParent());
  joined->takeName(&lookup);
  lookup.replaceAllUsesWith(joined);
  lookup.eraseFromParent();
  return copies;
}

} // namespace

PreservedAnalyses HeavyHitterFastPathPass::run(Module &module, ModuleAnalysisManager &mam) {
  if (context.hotKeys.empty() && context.perCpuHotKeys.empty())
    return PreservedAnalyses::all();
  context.declines = &SitesDeclined;
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
        auto perCpu = context.perCpuHotKeys.find(site.id);
        std::vector<Bytes> globalKeys;
        if (hot != context.hotKeys.end())
          globalKeys = hot->second;
        if (globalKeys.empty() && perCpu == context.perCpuHotKeys.end())
          return false;
        // A table small enough is turned whole into code, or was declined
        // by the passes that do it. A larger trie read whole that no derived
        // representation took answers each hot key by the prefix that holds
        // it (hotKeyAnswer).
        bool written = !info.isReadOnly(site.table);
        if (written && !writeGuarded.count(site.table))
          return false; // accepted with writes guarded, but they are not counted
        if (!written && contents.complete && contents.entries.size() <= context.inlineLimit)
          return declineSite(context, site, Decider::HeavyHitterFastPathPass,
                             SiteOutcome::NotEligible,
                             "table read whole: not a fast-path candidate");
        if (site.key.constantKey)
          return declineSite(context, site, Decider::HeavyHitterFastPathPass,
                             SiteOutcome::NotEligible,
                             "constant key: constant-key-lookup's");
        if (context.noCompareChains)
          return declineSite(context, site, Decider::HeavyHitterFastPathPass,
                             SiteOutcome::CompareChainsOff, *context.noCompareChains);
        auto chainOf = [&](const std::vector<Bytes> &keys) {
          Chain chain;
          for (const Bytes &key : keys) {
            if (key.size() != table.keySize)
              continue;
            std::optional<const TableEntry *> answer =
                hotKeyAnswer(contents, table, key, written, littleEndian);
            if (!answer)
              continue; // left to the lookup
            if (written && !context.writeCounts.count(writeBucket(
                               site.table, key, context.writeGuards->bucketBits, littleEndian))) {
              ++chain.uncounted; // no write count read before the snapshot
              continue;
            }
            if (*answer)
              chain.entries.push_back({&key, *answer});
            else
              chain.absent.push_back(key);
          }
          return chain;
        };
        Chain global = chainOf(globalKeys);
        // By CPU; a CPU whose chain is the global one takes it without an
        // arm of its own (all of them: no switch at all).
        std::map<unsigned, Chain> ownChains;
        if (perCpu != context.perCpuHotKeys.end())
          for (const auto &[cpu, keys] : perCpu->second)
            if (keys != globalKeys)
              ownChains[cpu] = chainOf(keys);
        bool anyKey = !global.empty(), anyUncounted = global.uncounted > 0;
        for (const auto &[cpu, chain] : ownChains) {
          anyKey |= !chain.empty();
          anyUncounted |= chain.uncounted > 0;
        }
        if (!anyKey && anyUncounted)
          return declineSite(context, site, Decider::HeavyHitterFastPathPass,
                             SiteOutcome::WriteCountsNotRead,
                             "no write count read for its hot keys (the running version has "
                             "not counted the table's writes for a whole period yet)");
        if (!anyKey)
          return declineSite(context, site, Decider::HeavyHitterFastPathPass,
                             SiteOutcome::NoHotKey,
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
        // The chain in front of `lookup`; a lookup without one is kept as
        // it is (on a CPU's path of its own: no other pass takes it).
        auto build = [&](CallBase &lookup, const Chain &chain) {
          if (chain.empty()) {
            LookupRewriter::keepOnMissPath(lookup);
            return;
          }
          HotKeysCompared += chain.entries.size() + chain.absent.size();
          if (!chain.entries.empty())
            rewriter.replaceWithDispatch(
                lookup, *site.signature.keyArg, chain.entries, site.table,
                ChainLowering::Constants, LookupRewriter::OnMiss::KeepLookup,
                written ? LookupRewriter::EntryGuard(unwritten) : LookupRewriter::EntryGuard());
          if (!chain.absent.empty())
            answerAbsent(rewriter, lookup, *site.signature.keyArg, chain.absent, site.table,
                         table.keySize, unwritten);
        };
        std::string detail;
        if (ownChains.empty()) {
          build(*site.call, global);
          detail = global.describe(written);
        } else {
          std::set<unsigned> cpus;
          for (const auto &[cpu, chain] : ownChains)
            cpus.insert(cpu);
          std::map<std::optional<unsigned>, CallBase *> copies =
              splitByCpu(*site.call, cpus, site.table);
          build(*copies.at(std::nullopt), global);
          detail = "per-CPU chains:";
          for (const auto &[cpu, chain] : ownChains) {
            build(*copies.at(cpu), chain);
            detail += " CPU " + std::to_string(cpu) + ": " +
                      (chain.empty() ? "none" : chain.describe(written)) + ";";
          }
          detail += " other CPUs: " + (global.empty() ? "none" : global.describe(written));
          PerCpuChains += ownChains.size();
        }
        ++SitesWithFastPaths;
        if (context.log) {
          context.log->record(site, Decider::HeavyHitterFastPathPass, SiteOutcome::Applied,
                              detail);
          std::vector<TableEntry> &inlined = context.log->inlined[site.table];
          std::set<const TableEntry *> logged;
          auto logEntries = [&](const Chain &chain) {
            for (const LookupRewriter::Arm &arm : chain.entries)
              if (logged.insert(arm.answer).second)
                inlined.push_back(*arm.answer);
          };
          logEntries(global);
          FastPathKeys &compared = context.log->fastPaths[site.id];
          compared.keys = global.keys();
          for (const auto &[cpu, chain] : ownChains) {
            logEntries(chain);
            compared.perCpu[cpu] = chain.keys();
          }
        }
        return true;
      },
      /*writesGuarded=*/context.writeGuards.has_value());
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
