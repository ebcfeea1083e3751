//===- LpmAsArray.cpp - a large read-only IPv4 trie becomes a derived array ===//
//
// A lookup in a read-only IPv4 longest-prefix-match table that lpm-as-code
// left (more than `inlineLimit` prefixes, read whole up to
// `DerivedTrieReadLimit`, or a search over the verifier's path budget: the
// derived table adds one value path, not one per interval) becomes two or
// three loads from a derived
// direct-indexed table, a 16-8-8 multibit trie cut from the address
// intervals the prefixes define (PrefixIntervals.h): the first level has a
// slot per /16 block of addresses, and a block that holds more than one
// answer gets a chunk of 256 slots, one per /24 block in it, and so on down
// to single addresses. A slot holds, in 16 bits, either the answer for
// every address of its block (0: none; i + 1: entry i of the snapshot) or,
// with the top bit set, the number of the chunk that splits the block. The
// answer's value is entry i of `__morpheus.TABLE.values` (TableRewriting.h),
// the array every table pass hands value addresses from, so a hit reads as
// the trie's value and distinct entries keep distinct addresses.
//
// A trie whose data is a 32-bit leading word then the address (the
// firewall's `(generation, prefix)` keys) gets one such table per value the
// leading word takes across its prefixes (up to MaxLeadingWords, every
// prefix at least as long as the leading word: TrieRepresentation.h): the
// leading word is compared first and picks its table, cut from the trie's
// intervals under that word (intervalsUnder), so every generation answers
// exactly, whichever one is live; a key of any other leading word lies
// under no prefix and finds none, as in the trie. All the tables are one
// global, one after the other.
//
// The table is built only where the cost model (TrieRepresentation.h)
// predicts it the cheapest eligible representation of the trie (within the
// inline limit lpm-as-code's search may be cheaper, or not).
//
// Why ARRAY-like memory: the derived table is a constant global in the
// constant section, which the BPF loader turns into a frozen read-only
// ARRAY map loaded with the program; the verifier turns its accesses into
// plain loads (no helper call: ~2 ns against the trie's 35-56 ns here).
// The table is rebuilt from the live trie at every specialization, created
// and filled before the swap (it is part of the program being loaded),
// covered by the program guard like every inlined value, never pinned and
// never known to a control plane; a scratch copy of the program (shadow
// validation, fuzzing) loads its own copy. Its size is in the log.
//
// Correctness: the same as lpm-as-code's. Keys whose prefix length is not
// the data's whole width (32, or 64 with a leading word) keep the real
// lookup; for a whole address, the slot chain ends in the
// slot of the only interval its block lies in, which holds that interval's
// answer. The table is read-only for the data plane (TableAccessAnalysis)
// and control-plane writes go through Morpheus, which bumps the program
// guard first. The bounds the verifier needs (a chunk number below the
// chunk count, an entry number below the entry count) are checked on the
// way, each on an opaque copy (core/OpaqueValue.h) the index is computed
// from; they always hold (the table is cut so), and their failure branch,
// a path for the verifier only, answers null rather than the real lookup:
// the verifier then follows a hit with derived values only (when the
// key's prefix length is a constant it sees), not also with the trie's,
// which doubled per trie its walk of the firewall's loop over bitmap words
// and took random rule sets past its 1M-instruction limit.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
// becomes
//   %slot = load i16, (@__morpheus.routes.levels + 2 * (%address >> 16))
//   br (%slot & 0x8000) == 0, answer, chunk   ; chunk: the next 8 bits
//   answer: null when 0, else @__morpheus.routes.values + (%slot - 1) * stride
//===----------------------------------------------------------------------===//

#include "core/OpaqueValue.h"
#include "core/passes/TablePasses.h"
#include "core/passes/TrieRepresentation.h"
#include "support/Error.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>

using namespace llvm;

#define DEBUG_TYPE "lpm-as-array"

ALWAYS_ENABLED_STATISTIC(TriesAsArrays, "trie lookups replaced by a walk of derived 16-8-8 tables");
ALWAYS_ENABLED_STATISTIC(DerivedBytes, "bytes of derived 16-8-8 tables");
ALWAYS_ENABLED_STATISTIC(SitesDeclined,
                         "trie lookups left to the lookup or another representation");

namespace morpheus::core {

namespace {

constexpr uint32_t AddressBits = 32;      // IPv4 addresses
constexpr uint32_t LeadingBits = 32;      // a leading word before the address
constexpr uint32_t FirstLevelBits = 16;   // then 8, then 8
constexpr uint32_t ChunkBits = 8;
constexpr uint32_t ChunkSlots = 1u << ChunkBits;
constexpr uint16_t ChunkFlag = 0x8000;    // a slot naming a chunk
constexpr uint32_t MaxSlotNumber = MaxDerivedSlotNumber; // entries + 1 and chunks both below

// The 16-8-8 table of `intervals`, or why there is none.
Expected<std::vector<uint16_t>> deriveLevels(const std::vector<PrefixInterval> &intervals,
                                             const std::vector<TableEntry> &entries) {
  std::vector<uint16_t> slots(size_t(1) << FirstLevelBits, 0);
  uint32_t chunks = 0;
  // The slot for the block of 2^bits addresses from `start`: its one answer,
  // or a new chunk (filled by the caller) when the block holds several.
  auto slotFor = [&](uint64_t start, uint32_t bits, bool &split) -> uint16_t {
    const PrefixInterval &first = intervalAt(intervals, start);
    uint64_t end = start + (uint64_t(1) << bits); // exclusive
    auto next = std::upper_bound(
        intervals.begin(), intervals.end(), PrefixAddress(start),
        [](PrefixAddress a, const PrefixInterval &interval) { return a < interval.start; });
    split = next != intervals.end() && uint64_t(next->start) < end;
    if (split)
      return uint16_t(ChunkFlag | chunks++);
    return first.entry ? uint16_t(first.entry - entries.data() + 1) : 0;
  };
  // Fills the chunk of `slot` for the block of 2^bits addresses at `start`.
  auto fill = [&](auto &self, size_t slot, uint64_t start, uint32_t bits) -> Error {
    bool split = false;
    slots[slot] = slotFor(start, bits, split);
    if (!split)
      return Error::success();
    if (chunks > MaxSlotNumber + 1)
      return makeError("more than {0} chunks", MaxSlotNumber + 1);
    size_t base = slots.size();
    slots.resize(base + ChunkSlots, 0);
    if (slots.size() * sizeof(uint16_t) > DerivedBytesLimit)
      return makeError("a derived table over {0} bytes", DerivedBytesLimit);
    uint32_t below = bits - ChunkBits;
    for (uint32_t i = 0; i < ChunkSlots; ++i)
      if (Error err = self(self, base + i, start + (uint64_t(i) << below), below))
        return err;
    return Error::success();
  };
  for (uint64_t block = 0; block < (uint64_t(1) << FirstLevelBits); ++block)
    if (Error err = fill(fill, block, block << (AddressBits - FirstLevelBits),
                         AddressBits - FirstLevelBits))
      return err;
  return slots;
}

// Every derived table of one trie's site (one per leading word, or one),
// their slots one after the other in one global.
struct DerivedSlots {
  std::vector<uint16_t> slots;
  std::vector<size_t> bases;       // where each table's slots start
  std::vector<size_t> chunkCounts; // each table's chunks
};

Expected<DerivedSlots> deriveSlots(const TrieCandidates &candidates,
                                   const std::vector<TableEntry> &entries) {
  DerivedSlots derived;
  for (const DerivedTable &table : candidates.derived) {
    auto levels = deriveLevels(table.intervals, entries);
    if (!levels)
      return levels.takeError();
    derived.bases.push_back(derived.slots.size());
    derived.chunkCounts.push_back((levels->size() - (size_t(1) << FirstLevelBits)) /
                                  ChunkSlots);
    derived.slots.insert(derived.slots.end(), levels->begin(), levels->end());
  }
  return derived;
}

// The walk down one site's derived tables, emitted into its lookup frame:
// from the insertion point, each table's slot chain ends in `answer` with
// the slot it found in `found`, or in `miss`.
struct LevelWalk {
  IRBuilder<> &builder;
  const AccessSite &site;
  Function *function;
  BasicBlock *tail;
  GlobalVariable *derived;
  Value *wide; // the address, 64 bits wide
  PHINode *found;
  BasicBlock *answer, *miss;

  BasicBlock *block(const Twine &name) {
    return BasicBlock::Create(builder.getContext(), site.table + name, function, tail);
  }

  Value *loadSlot(Value *index, const Twine &name) {
    Value *at = builder.CreateInBoundsGEP(builder.getInt16Ty(), derived, index);
    return builder.CreateLoad(builder.getInt16Ty(), at, name);
  }

  // The slot chain of the table at `base` with `chunkCount` chunks: the top
  // 16 bits index its first level, then each further level is a chunk's
  // slot for the next 8 bits, while the slot names a chunk (the last
  // level's slots never do).
  void chain(uint64_t base, uint64_t chunkCount) {
    Value *top = builder.CreateLShr(wide, AddressBits - FirstLevelBits);
    if (base)
      top = builder.CreateAdd(top, builder.getInt64(base));
    Value *slot = loadSlot(top, site.table + ".slot0");
    uint32_t consumed = FirstLevelBits;
    for (unsigned level = 1; consumed < AddressBits; ++level) {
      BasicBlock *chunk = block(".chunk" + Twine(level));
      BasicBlock *next = block(".level" + Twine(level));
      found->addIncoming(slot, builder.GetInsertBlock());
      builder.CreateCondBr(
          builder.CreateICmpNE(builder.CreateAnd(slot, ChunkFlag), builder.getInt16(0)), chunk,
          answer);
      builder.SetInsertPoint(chunk);
      // Checked and used as one opaque value: LLVM would otherwise fold the
      // mask into the index and check a register the index is not computed
      // from, and the verifier would lose the bound.
      Value *number = opaqueCopy(builder,
                                 builder.CreateZExt(builder.CreateAnd(slot, ~ChunkFlag & 0xffff),
                                                    builder.getInt64Ty()),
                                 site.table + ".chunk.number");
      builder.CreateCondBr(builder.CreateICmpULT(number, builder.getInt64(chunkCount)), next,
                           miss);
      builder.SetInsertPoint(next);
      consumed += ChunkBits;
      // Opaque too: LLVM would turn the add into an or of disjoint bits,
      // whose bound the verifier widens to the next power of two (past the
      // table's end); the add it bounds exactly.
      Value *bits = opaqueCopy(
          builder,
          builder.CreateAnd(builder.CreateLShr(wide, AddressBits - consumed), ChunkSlots - 1),
          site.table + ".bits");
      Value *at = builder.CreateAdd(
          builder.CreateAdd(builder.CreateShl(number, ChunkBits),
                            builder.getInt64(base + (uint64_t(1) << FirstLevelBits))),
          bits);
      slot = loadSlot(at, site.table + ".slot" + Twine(level));
    }
    found->addIncoming(slot, builder.GetInsertBlock());
    builder.CreateBr(answer);
  }

  // From `select`: the one table's chain, or, with a leading word, the
  // table of `leadingWord`'s value (no prefix lies under any other: they
  // all cover whole leading words, TrieRepresentation).
  void selectAndWalk(BasicBlock *select, const TrieCandidates &candidates,
                     const DerivedSlots &slots, Value *leadingWord) {
    builder.SetInsertPoint(select);
    if (!leadingWord) {
      chain(slots.bases[0], slots.chunkCounts[0]);
      return;
    }
    for (size_t i = 0; i < candidates.derived.size(); ++i) {
      uint32_t value = *candidates.derived[i].leadingWord;
      BasicBlock *table = block(".leading" + Twine(value));
      BasicBlock *other = i + 1 < candidates.derived.size() ? block(".leading.other") : miss;
      builder.CreateCondBr(builder.CreateICmpEQ(leadingWord, builder.getInt32(value)), table,
                           other);
      builder.SetInsertPoint(table);
      chain(slots.bases[i], slots.chunkCounts[i]);
      builder.SetInsertPoint(other);
    }
  }

  // The slot's answer: none, or entry (slot - 1) below the entry count.
  void answerFromSlot(LookupRewriter &rewriter, LookupRewriter::Frame &frame,
                      size_t entryCount, PointerType *pointerType) {
    builder.SetInsertPoint(answer);
    builder.Insert(found);
    BasicBlock *hit = block(".hit");
    miss->insertInto(function, tail);
    builder.CreateCondBr(builder.CreateICmpEQ(found, builder.getInt16(0)), miss, hit);
    builder.SetInsertPoint(miss);
    builder.CreateBr(tail);
    frame.result->addIncoming(ConstantPointerNull::get(pointerType), miss);
    builder.SetInsertPoint(hit);
    Value *entry = opaqueCopy(
        builder,
        builder.CreateSub(builder.CreateZExt(found, builder.getInt64Ty()), builder.getInt64(1)),
        site.table + ".entry.number");
    BasicBlock *value = block(".found");
    builder.CreateCondBr(builder.CreateICmpULT(entry, builder.getInt64(entryCount)), value,
                         miss);
    builder.SetInsertPoint(value);
    Value *pointer = rewriter.entryPointer(builder, site.table, entry);
    builder.CreateBr(tail);
    frame.result->addIncoming(pointer, value);
  }
};

// The decision's detail: the prefixes, the tables they became and their
// size, and the prefix lengths left to the trie.
std::string describeTables(const AccessSite &site, size_t prefixes,
                           const TrieCandidates &candidates, const DerivedSlots &slots,
                           uint32_t dataBits) {
  bool leading = candidates.derived.front().leadingWord.has_value();
  size_t chunkCount = 0;
  for (size_t count : slots.chunkCounts)
    chunkCount += count;
  size_t words = candidates.derived.size();
  std::string tables = leading ? "derived 16-8-8 tables, one per leading word (" +
                                     std::to_string(words) + (words == 1 ? " word)," : " words),")
                               : std::string("a derived 16-8-8 table");
  return std::to_string(prefixes) + " prefixes as " + tables + " of " +
         std::to_string(chunkCount) + " chunks (" +
         std::to_string(slots.slots.size() * sizeof(uint16_t)) + " bytes" +
         (leading ? "; other leading words find no prefix" : "") + "); " +
         otherPrefixLengths(site, dataBits);
}

// Rewrites one lookup of `site` into the walk down `slots`, in its frame.
void rewriteLookup(Module &module, const AccessSite &site, const TableContents &contents,
                   LookupRewriter &rewriter, const TrieCandidates &candidates,
                   const DerivedSlots &slots, uint32_t dataBits) {
  const DataLayout &dl = module.getDataLayout();
  LLVMContext &llvmContext = module.getContext();
  // One derived table per trie, whatever the number of its sites.
  GlobalVariable *derived = rewriter.derivedTable(site.table, "levels", [&] {
    return ConstantDataArray::get(llvmContext, ArrayRef<uint16_t>(slots.slots));
  });

  CallBase &lookup = *site.call;
  auto *pointerType = cast<PointerType>(lookup.getType());
  IRBuilder<> builder(llvmContext);
  LookupRewriter::Frame frame =
      rewriter.openFrame(lookup, *site.signature.keyArg, site.table, builder, 3);
  Function *function = frame.head->getParent();
  auto block = [&](const Twine &name) {
    return BasicBlock::Create(llvmContext, site.table + name, function, frame.tail);
  };

  bool leading = candidates.derived.front().leadingWord.has_value();
  Value *length = prefixLengthToTest(builder, frame, site, dataBits);
  // The key's data in the trie's bit order: first byte most significant.
  auto word = [&](uint32_t offset, const Twine &dataName, const Twine &name) -> Value * {
    Value *data = LookupRewriter::loadKey(builder, frame, offset, builder.getInt32Ty(), dataName);
    return dl.isLittleEndian() ? builder.CreateUnaryIntrinsic(Intrinsic::bswap, data, nullptr, name)
                               : data;
  };
  Value *leadingWord =
      leading ? word(PrefixLengthBytes, site.table + ".leading.data", site.table + ".leading")
              : nullptr;
  Value *address = word(PrefixLengthBytes + (leading ? LeadingBits / 8 : 0),
                        site.table + ".data", site.table + ".address");
  Value *wide = builder.CreateZExt(address, builder.getInt64Ty());
  BasicBlock *select = block(leading ? ".leading.word" : ".level0");
  BasicBlock *answer = block(".answer");
  BasicBlock *slow = branchOnPrefixLength(builder, frame, site, length, dataBits, select);
  // Placed after the hit block (answerFromSlot).
  BasicBlock *miss = BasicBlock::Create(llvmContext, site.table + ".miss");
  PHINode *found = PHINode::Create(builder.getInt16Ty(), 3, site.table + ".slot");

  LevelWalk walk{builder, site, function, frame.tail, derived, wide, found, answer, miss};
  walk.selectAndWalk(select, candidates, slots, leadingWord);
  walk.answerFromSlot(rewriter, frame, contents.entries.size(), pointerType);
  // Any other prefix length: the kernel's own answer.
  closeTrieFrame(builder, lookup, frame, slow);
}

} // namespace

PreservedAnalyses LpmAsArrayPass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const DataLayout &dl = module.getDataLayout();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (table.match != TableMatch::LongestPrefix)
          return false;
        // Sites lpm-as-code rewrote are gone (their call is kept on a miss
        // path); what is left is over its limit or its verifier budget, or
        // a trie the cost model prices cheaper as a derived table.
        TrieCandidates candidates = trieCandidates(site, table, contents, context, dl);
        if (!buildsChosenRepresentation(context, site, Decider::LpmAsArrayPass, candidates,
                                        Representation::DerivedArray, candidates.whyNoDerived))
          return false;
        auto slots = deriveSlots(candidates, contents.entries);
        if (!slots)
          return declineSite(context, site, Decider::LpmAsArrayPass,
                             SiteOutcome::NoRepresentation, toString(slots.takeError()));
        bool leading = candidates.derived.front().leadingWord.has_value();
        uint32_t dataBits = AddressBits + (leading ? LeadingBits : 0);
        rewriteLookup(module, site, contents, rewriter, candidates, *slots, dataBits);
        ++TriesAsArrays;
        DerivedBytes += slots->slots.size() * sizeof(uint16_t);
        recordTrieDecision(
            context, site, Decider::LpmAsArrayPass, SiteOutcome::Applied,
            describeTables(site, contents.entries.size(), candidates, *slots, dataBits),
            candidates.choice);
        if (context.log)
          context.log->inlined[site.table] = contents.entries;
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
