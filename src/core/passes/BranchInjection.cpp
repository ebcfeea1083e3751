//===- BranchInjection.cpp - test a few-valued key field before the lookup -===//
//
// A read-only exact-match table too large to become code may still have a
// key field that takes few values across all its entries (an ACL whose
// rules are all TCP or UDP, a table of one VLAN). A key whose field holds
// none of them cannot match any entry, so the lookup is preceded by a test
// of that field against those values, and a key that fails it gets null
// without the helper call. The lookup stays for the keys that pass.
//
// Correctness: a hash lookup returns an entry only when every key byte
// equals the entry's (full-key memcmp, no masks), so a key whose chunk
// differs from that chunk of every entry gets null. The snapshot is the
// whole table (read whole up to `WholeTableReadLimit`); the data plane never
// writes it (TableAccessAnalysis) and control-plane writes go through
// Morpheus, which bumps the program-level guard first: a new entry with
// another value in that field makes the specialized code fall back until
// the next cycle. The key is read through an opaque copy of its pointer
// (core/OpaqueValue), in aligned chunks (the widest the key's alignment
// allows, or narrower), so padding bytes compare as memory holds them, as
// in the helper.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @acl, ptr %key)
// becomes
//   %k = call ptr asm "", "=r,0"(ptr %key)
//   %proto = load i8, ptr (%k + 12)
//   %any = or (icmp eq %proto, 6), (icmp eq %proto, 17)
//   br %any, label %lookup, label %join
//   lookup: %v0 = call ptr inttoptr (i64 1 to ptr)(ptr @acl, ptr %key)
//   join:   %v = phi ptr [ %v0, %lookup ], [ null, %entry ]
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/Transforms/Utils/Local.h>

#include <set>

using namespace llvm;

#define DEBUG_TYPE "branch-injection"

ALWAYS_ENABLED_STATISTIC(SitesFiltered,
                         "lookups behind a test of one key field against the values it takes");
ALWAYS_ENABLED_STATISTIC(SitesDeclined, "lookups of large tables read whole left alone");

namespace morpheus::core {

namespace {

// At most this many values are tested before a lookup: a few compares cost
// far less than the helper call they save (8-35 ns here), many would not.
constexpr size_t MaxInjectedValues = 4;

} // namespace

PreservedAnalyses BranchInjectionPass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const DataLayout &dl = module.getDataLayout();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (table.match != TableMatch::Exact)
          return false; // arrays index, tries match prefixes: no field test
        if (!contents.complete)
          return declineSite(context, site, Decider::BranchInjectionPass,
                             SiteOutcome::NotReadWhole,
                             "table larger than the whole-table read limit of " +
                             std::to_string(WholeTableReadLimit));
        if (contents.entries.size() <= context.inlineLimit)
          return false; // small tables become compare chains
        CallBase &lookup = *site.call;
        Value *key = lookup.getArgOperand(*site.signature.keyArg);
        uint64_t alignment = getKnownAlignment(key, dl).value();
        // The chunk whose values are fewest across the entries, in the
        // widest loads the alignment allows, else narrower ones (a wide
        // load may cover a few-valued field and a many-valued one). The
        // widest that works: narrower chunks would single out padding,
        // which every entry holds as zeros.
        std::optional<KeyChunk> best;
        std::set<uint64_t> bestValues;
        for (uint64_t width = std::min<uint64_t>(alignment, 8); width >= 1 && !best; width /= 2)
          for (KeyChunk chunk : keyChunks(table.keySize, width)) {
            std::set<uint64_t> values;
            for (const TableEntry &entry : contents.entries) {
              values.insert(chunkValue(entry.key, chunk, dl.isLittleEndian()));
              if (values.size() > MaxInjectedValues)
                break;
            }
            if (values.size() <= MaxInjectedValues &&
                (!best || values.size() < bestValues.size())) {
              best = chunk;
              bestValues = std::move(values);
            }
          }
        if (!best)
          return declineSite(context, site, Decider::BranchInjectionPass,
                             SiteOutcome::NoRepresentation,
                             "no key field takes at most " + std::to_string(MaxInjectedValues) +
                             " values across the " + std::to_string(contents.entries.size()) +
                             " entries");

        IRBuilder<> builder(lookup.getContext());
        LookupRewriter::Frame frame =
            rewriter.openFrame(lookup, *site.signature.keyArg, site.table, builder, 2);
        Type *type = builder.getIntNTy(best->width * 8);
        Value *field =
            LookupRewriter::loadKey(builder, frame, best->offset, type, site.table + ".field");
        Value *any = nullptr;
        for (uint64_t value : bestValues) {
          Value *equal = builder.CreateICmpEQ(field, ConstantInt::get(type, value));
          any = any ? builder.CreateOr(any, equal) : equal;
        }
        BasicBlock *call = BasicBlock::Create(lookup.getContext(), site.table + ".lookup",
                                              frame.head->getParent(), frame.tail);
        builder.CreateCondBr(any, call, frame.tail);
        builder.SetInsertPoint(call);
        builder.CreateBr(frame.tail);
        LookupRewriter::closeFrame(lookup, frame, LookupRewriter::CallKept::AsLookup, call);
        frame.result->addIncoming(ConstantPointerNull::get(cast<PointerType>(lookup.getType())),
                                  frame.head);
        ++SitesFiltered;

        if (context.log)
          context.log->record(site, Decider::BranchInjectionPass, SiteOutcome::Applied,
                              "key bytes " + std::to_string(best->offset) + ".." +
                                  std::to_string(best->offset + best->width - 1) + " take " +
                                  std::to_string(bestValues.size()) + " value" +
                                  (bestValues.size() == 1 ? "" : "s") + " across " +
                                  std::to_string(contents.entries.size()) +
                                  " entries: tested before the lookup, others get null");
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
