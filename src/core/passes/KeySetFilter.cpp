//===- KeySetFilter.cpp - keys a table does not hold miss without a lookup -===//
//
// Packet filters keep their rules in hash tables the control plane fills
// and the data plane only counts in: the program looks a packet's address
// or port up, bumps a hit counter in the value it finds, and acts on the
// flags beside it (xdp-filter's address and port tables, per-CPU hashes).
// The data plane writes such a table, so the passes that fold values leave
// it alone; but it never inserts or deletes a key (TableUsage::keySetWrite
// unset: no update, delete or other writing helper names the table, and it
// never escapes the analysis), so which keys the table holds is the control
// plane's alone. Most packets match no rule, and each of them pays a hash
// lookup to learn so.
//
// At a lookup of such a table, whose snapshot read it whole (within the
// inline limit), the key is compared with every key the table holds; a key
// it holds goes on to the real lookup, untouched, so the program gets the
// live entry and its writes reach the live map; any other key is answered
// null without the lookup.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @ports, ptr %key)
// becomes
//   %k = load i16, ptr %key.memory
//   %d = (zext (%k xor 22)), hidden by an empty asm; %any = (%d | -%d) >> 63
//   %held = icmp eq i64 (and of every key's %any), 0
//   br i1 %held, label %lookup, label %tail
// lookup:
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @ports, ptr %key) ; kept
// tail:
//   %ports.value = phi ptr [ %v, %lookup ], [ null, %head ]
//
// Why it is correct: for a key the compares find, the kernel answers as
// before. For any other key the kernel's lookup returns null exactly when
// the live table does not hold the key, and the live keys are the
// snapshot's while the guard holds: the data plane cannot change them (the
// analysis), the control plane's changes through Morpheus bump the program
// guard first (packets then run the generic code), and other writers'
// (bpftool) are seen by the next cycle's comparison of key sets
// (TableAccessInfo::sameWhereReadOnly keeps every key of such a table),
// the same polled guarantee as every table read from the snapshot. A table
// whose entries the kernel removes unguarded (a devmap, whose entry goes
// with its device: TableInfo::entriesRemovedUnguarded) only ever holds
// fewer keys than the snapshot: a key the snapshot lacks is still absent,
// and one it holds goes to the lookup, which says whether it still is.
// Such a table is filtered though the data plane never writes it (no other
// pass may answer its lookups). The key
// is compared byte for byte as the helper reads it (an opaque copy of the
// key pointer, LookupRewriter::openFrame), so padding compares as memory
// holds it. A hash lookup has no side effect on a miss (LRU tables, whose
// lookups set reference bits, are excluded), so skipping it changes
// nothing but time.
//
// When it pays: a key the table holds now pays the compares and the
// lookup, any other key the compares alone. The pass applies when the
// compares cost at most half the lookup (CostModel: compareNs by chain
// length against the map's lookup), so it is faster whenever at most half
// of the lookups find a key, as in a filter whose rules most traffic does
// not match; an empty table answers null outright. A constant key needs no
// compare: absent from the snapshot, the lookup is null; held, it stays.
//===----------------------------------------------------------------------===//

#include "core/OpaqueValue.h"
#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>

#include <string>

using namespace llvm;

#define DEBUG_TYPE "key-set-filter"

ALWAYS_ENABLED_STATISTIC(SitesFiltered,
                         "lookups that answer keys the table does not hold with null");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookups of hash tables the data plane writes left alone");

namespace morpheus::core {

PreservedAnalyses KeySetFilterPass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  const DataLayout &dl = module.getDataLayout();
  LookupRewriter rewriter(module, context);
  bool changed = false;
  for (const AccessSite &site : info.sites) {
    if (context.untouchable(site.function) || LookupRewriter::keptOnMissPath(*site.call))
      continue;
    if (std::optional<std::string> why = whyNoKeySetFilter(site, info, *context.catalog)) {
      // Said of the hash tables the data plane writes, which are what the
      // pass is for; every other site is another pass's.
      auto table = context.catalog->find(site.table);
      if (site.signature.kind == AccessKind::Lookup && table != context.catalog->end() &&
          table->second.match == TableMatch::Exact &&
          (!info.isReadOnly(site.table) || table->second.entriesRemovedUnguarded))
        declineSite(context, site, Decider::KeySetFilterPass, SiteOutcome::NotEligible, *why);
      continue;
    }
    auto contents = context.snapshot->find(site.table);
    if (contents == context.snapshot->end())
      continue;
    if (!contents->second.complete) {
      declineSite(context, site, Decider::KeySetFilterPass, SiteOutcome::OverInlineLimit,
                  "more keys than the inline limit of " + std::to_string(context.inlineLimit) +
                      ": the table was not read whole");
      continue;
    }
    if (context.noCompareChains) {
      declineSite(context, site, Decider::KeySetFilterPass, SiteOutcome::CompareChainsOff,
                  *context.noCompareChains);
      continue;
    }
    const TableInfo &table = context.catalog->at(site.table);
    const std::vector<TableEntry> &entries = contents->second.entries;
    // A constant key: the compares would fold; the lookup stays while the
    // table holds the key, and is null while it does not.
    if (site.key.constantKey) {
      if (*contents->second.known(*site.key.constantKey)) {
        declineSite(context, site, Decider::KeySetFilterPass, SiteOutcome::KeyPresent,
                    "the table holds the constant key: the lookup answers");
        continue;
      }
      LookupRewriter::replaceWith(*site.call,
                                  ConstantPointerNull::get(cast<PointerType>(site.call->getType())));
      changed = true;
      ++SitesFiltered;
      if (context.log)
        context.log->record(site, Decider::KeySetFilterPass, SiteOutcome::Applied,
                            "the table does not hold the constant key: answered null without "
                            "the lookup");
      continue;
    }
    double lookupNs = context.costModel.originalLookupNs(table.match, entries.size());
    double comparesNs =
        double(entries.size()) * context.costModel.operations().compareNs.at(entries.size());
    if (comparesNs * 2 > lookupNs) {
      declineSite(context, site, Decider::KeySetFilterPass, SiteOutcome::NotCheaper,
                  formatv("the compares over {0} keys ({1:f1} ns) cost more than half the "
                          "lookup ({2:f1} ns)",
                          entries.size(), comparesNs, lookupNs)
                      .str());
      continue;
    }
    auto *pointerType = cast<PointerType>(site.call->getType());
    if (entries.empty()) {
      LookupRewriter::replaceWith(*site.call, ConstantPointerNull::get(pointerType));
    } else {
      IRBuilder<> builder(module.getContext());
      LookupRewriter::Frame frame =
          rewriter.openFrame(*site.call, *site.signature.keyArg, site.table, builder, 2);
      std::vector<Value *> words;
      std::vector<KeyChunk> chunks = keyChunks(table.keySize, frame.keyAlignment);
      for (KeyChunk chunk : chunks)
        words.push_back(LookupRewriter::loadKey(builder, frame, chunk.offset,
                                                builder.getIntNTy(chunk.width * 8),
                                                site.table + ".key"));
      // Branch-free: BPF has no set-on-compare, so each compare LLVM keeps
      // as an i1 becomes a branch, and the verifier walks every
      // combination of them across the sites (six sites of six keys went
      // past its million instructions). Per key, the bits that differ
      // (hidden from LLVM, which would fold the arithmetic back into
      // compares) become 1 when any is set: (d | -d) >> 63; the key is
      // held when some key's is 0, one branch.
      Type *i64 = builder.getInt64Ty();
      Value *allDiffer = nullptr;
      for (const TableEntry &entry : entries) {
        Value *differ = nullptr;
        for (size_t i = 0; i < chunks.size(); ++i) {
          Value *bits = builder.CreateXor(
              words[i], ConstantInt::get(words[i]->getType(),
                                         chunkValue(entry.key, chunks[i], dl.isLittleEndian())));
          bits = builder.CreateZExt(bits, i64);
          differ = differ ? builder.CreateOr(differ, bits) : bits;
        }
        differ = opaqueCopy(builder, differ, site.table + ".differ");
        Value *any = builder.CreateLShr(builder.CreateOr(differ, builder.CreateNeg(differ)), 63,
                                        site.table + ".differs");
        allDiffer = allDiffer ? builder.CreateAnd(allDiffer, any) : any;
      }
      Value *held = builder.CreateICmpEQ(allDiffer, ConstantInt::get(i64, 0),
                                         site.table + ".held");
      Function *function = frame.head->getParent();
      BasicBlock *lookup =
          BasicBlock::Create(module.getContext(), site.table + ".lookup", function, frame.tail);
      builder.CreateCondBr(held, lookup, frame.tail);
      frame.result->addIncoming(ConstantPointerNull::get(pointerType), frame.head);
      builder.SetInsertPoint(lookup);
      builder.CreateBr(frame.tail);
      LookupRewriter::closeFrame(*site.call, frame, LookupRewriter::CallKept::OnMissPath,
                                 lookup);
    }
    changed = true;
    ++SitesFiltered;
    if (context.log)
      context.log->record(
          site, Decider::KeySetFilterPass, SiteOutcome::Applied,
          formatv("a key that is none of the table's {0} keys is answered null without "
                  "the lookup ({1})",
                  entries.size(),
                  table.entriesRemovedUnguarded
                      ? *table.entriesRemovedUnguarded + ", but no key is added without the guard"
                      : std::string("the data plane never adds or removes keys"))
              .str());
  }
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
