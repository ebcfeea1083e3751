//===- LpmAsCode.cpp - a small read-only LPM trie becomes a search --------===//
//
// A lookup in a read-only longest-prefix-match table with at most
// `inlineLimit` prefixes becomes a binary search over the disjoint address
// intervals the prefixes cut the address space into, each interval yielding
// the address of the value of the longest prefix covering it (or null),
// exactly as the kernel's trie answers a key whose prefix length is the
// table's maximum (the case of every packet lookup: a whole address). Keys
// with any other prefix length keep the real lookup, on that path only.
//
// What the kernel returns, and why the intervals give it for every
// address: PrefixIntervals.h (shared with lpm-as-array, the derived table
// for tries larger than this pass takes).
//
// The search is built only where the cost model (TrieRepresentation.h)
// predicts it the cheapest eligible representation of the trie: a
// derived table (lpm-as-array) or the trie itself may be cheaper.
//
// Correctness rests on the table not changing while this code runs: the data
// plane never writes it (TableAccessAnalysis), and control-plane writes go
// through Morpheus, which bumps the program-level guard first. The key is
// read as inline-small-table reads it (LookupRewriter::openFrame: memory as
// the helper reads it, never an undef LLVM may pick). Every entry
// keeps its own value address in `__morpheus.TABLE.values`
// (TableRewriting.h), so pointer identity is the kernel's.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
// becomes
//   %k = call ptr asm "", "=r,0"(ptr %key)
//   %len = load i32, ptr %k
//   %data = load i32, ptr (%k + 4)      ; then bswap: network order
//   br (%len == 32), search, slow       ; slow: the original lookup
//   search: icmp ult %address, BOUND ... ; log2(intervals) compares
//   %v = phi ptr [ value of entry i ], ..., [ null ], [ %lookup, slow ]
//===----------------------------------------------------------------------===//

#include "support/Error.h"
#include "core/passes/TablePasses.h"
#include "core/passes/TrieRepresentation.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>

using namespace llvm;

#define DEBUG_TYPE "lpm-as-code"

ALWAYS_ENABLED_STATISTIC(TriesSearched, "trie lookups replaced by a search over address intervals");
ALWAYS_ENABLED_STATISTIC(IntervalsSearched, "address intervals in those searches");
ALWAYS_ENABLED_STATISTIC(SitesDeclined,
                         "trie lookups left to the lookup or another representation");

namespace morpheus::core {

namespace {

ConstantInt *addressConstant(IntegerType *type, PrefixAddress address) {
  uint64_t words[2] = {uint64_t(address), uint64_t(address >> 64)};
  return ConstantInt::get(type->getContext(), APInt(type->getBitWidth(), words));
}

} // namespace

PreservedAnalyses LpmAsCodePass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const DataLayout &dl = module.getDataLayout();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (table.match != TableMatch::LongestPrefix)
          return false;
        TrieCandidates candidates = trieCandidates(site, table, contents, context, dl);
        if (!buildsChosenRepresentation(context, site, Decider::LpmAsCodePass, candidates,
                                        Representation::PrefixSearch, candidates.whyNoSearch))
          return false;
        uint32_t dataBits = 8 * (table.keySize - PrefixLengthBytes);
        const std::vector<PrefixInterval> &intervals = candidates.intervals;

        CallBase &lookup = *site.call;
        LLVMContext &llvmContext = module.getContext();
        auto *pointerType = cast<PointerType>(lookup.getType());
        IRBuilder<> builder(llvmContext);
        LookupRewriter::Frame frame = rewriter.openFrame(
            lookup, *site.signature.keyArg, site.table, builder, intervals.size() + 1);
        BasicBlock *tail = frame.tail;
        PHINode *result = frame.result;
        Function *function = frame.head->getParent();

        // The key as the helper reads it: the prefix length, then the data
        // in network order.
        Value *length = prefixLengthToTest(builder, frame, site, dataBits);
        IntegerType *addressType = builder.getIntNTy(dataBits);
        Value *data = LookupRewriter::loadKey(builder, frame, PrefixLengthBytes, addressType,
                                              site.table + ".data");
        Value *address = data;
        if (dataBits > 8 && dl.isLittleEndian())
          address = builder.CreateUnaryIntrinsic(Intrinsic::bswap, data, nullptr,
                                                 site.table + ".address");

        BasicBlock *search = BasicBlock::Create(llvmContext, site.table + ".search", function, tail);
        BasicBlock *slow = branchOnPrefixLength(builder, frame, site, length, dataBits, search);

        // A balanced search: each compare halves the intervals left.
        auto build = [&](auto &self, BasicBlock *at, size_t low, size_t high) -> void {
          builder.SetInsertPoint(at);
          if (low == high) {
            const TableEntry *entry = intervals[low].entry;
            builder.CreateBr(tail);
            result->addIncoming(entry ? rewriter.valuePointer(site.table, *entry)
                                      : ConstantPointerNull::get(pointerType),
                                at);
            return;
          }
          size_t middle = (low + high + 1) / 2;
          BasicBlock *below = BasicBlock::Create(llvmContext, site.table + ".below", function, tail);
          BasicBlock *above = BasicBlock::Create(llvmContext, site.table + ".above", function, tail);
          builder.CreateCondBr(
              builder.CreateICmpULT(address, addressConstant(addressType,
                                                             intervals[middle].start)),
              below, above);
          self(self, below, low, middle - 1);
          self(self, above, middle, high);
        };
        build(build, search, 0, intervals.size() - 1);

        // Any other prefix length: the kernel's own answer.
        closeTrieFrame(builder, lookup, frame, slow);
        ++TriesSearched;
        IntervalsSearched += intervals.size();

        recordTrieDecision(context, site, Decider::LpmAsCodePass, SiteOutcome::Applied,
                           std::to_string(contents.entries.size()) +
                               " prefixes as a search over " + std::to_string(intervals.size()) +
                               " address intervals; " + otherPrefixLengths(site, dataBits),
                           candidates.choice);
        if (context.log)
          context.log->inlined[site.table] = contents.entries;
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
