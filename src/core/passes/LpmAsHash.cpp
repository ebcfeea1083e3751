//===- LpmAsHash.cpp - a trie becomes derived hashes, one per length ----===//
//
// A lookup in a read-only LPM trie whose prefixes have a few lengths L1 >
// L2 > ... (every /24 of a routing table, the /32s, /48s and /64s of an
// IPv6 one, any key size whose data is whole 32-bit words) is, for a key
// of the whole width, an exact match on the key's first L1 bits, else on
// its first L2 bits, and so on: it becomes "per length, longest first,
// mask the key's data to L bits and probe that length's derived hash
// table keyed by the masked data; the first found answers". Each table
// (PrefixHash, TrieRepresentation.h) is built from the live trie: open
// addressing with linear probes and no wrap, every entry at most
// `probes - 1` slots after its home (a layout is searched over a few
// multipliers and sizes until it fits MaxHashProbes), a slot holding the
// entry's number + 1 and its masked data words; the tables lie one after
// the other in one global. At most MaxHashLengths lengths. This matters
// where lpm-as-array has no table (IPv6, keys of other sizes, a leading
// word of more than 4 values) and where a few lengths make 128 KiB of
// 16-8-8 table a few KiB of hash.
//
// The tables are built only where the cost model (TrieRepresentation.h)
// predicts them the cheapest eligible representation of the trie, against
// the trie, lpm-as-code's search and lpm-as-array's table (every length
// priced as probed, as a key in no longer prefix probes them); their
// memory is priced as a derived table's (MemoryNsPerKiB).
//
// Correctness. A key whose prefix length p is the data's whole width W
// (every packet lookup of a whole address) is covered by every stored
// prefix of its bits, so the trie answers it with the longest prefix whose
// L bits are the key's for its length L, or null: probing the lengths
// longest first, the first length whose table holds the key's L bits
// names that prefix (two prefixes of one length cannot both hold them),
// and a key no table holds is in no prefix. Any other p keeps the real lookup, on that
// path only, as in lpm-as-code and lpm-as-array: the kernel answers p > W
// with null and p < L with null too, and the user-space backend's tables
// as the kernel does, but the backend's own lookup needs no second
// derivation of those answers. For p
// = W the key's first ceil(L/32) words are loaded as the program's
// loads read them (through an opaque copy of the key pointer, so bytes the
// program never wrote read as the helper reads them), masked to L bits with
// the same per-word masks each table was built with (host bits of stored
// and looked-up keys alike are ignored, as the trie ignores them), hashed
// as the builder hashed (prefixHashHome), and compared with each slot from
// the home on: an empty slot or `probes` slots without a match mean no
// entry of that length has these bits (linear probing, no deletions: a present key lies
// within `probes` slots of its home with no empty slot before it); a match
// yields entry i of `__morpheus.TABLE.values`, the array every table pass
// hands value addresses from, so a hit reads as the trie's value and
// distinct entries keep distinct addresses. The program guard covers the
// tables like every inlined value: a control-plane update through Morpheus
// bumps it first, and the next cycle rebuilds them from the live trie
// (a new length is one more table, or past MaxHashLengths another
// representation or none).
//
// Why ARRAY-like memory, not a kernel HASH map of Morpheus's own: a hash
// map's lookup is a helper call (~30 ns here, more than the trie's ~11-20
// ns at a few prefixes), while the table here is a constant global in the
// constant section, which the BPF loader turns into a frozen read-only
// ARRAY map loaded with the program: its reads are plain loads the
// verifier bounds. It inherits lpm-as-array's life cycle: rebuilt at every
// specialization, created and filled before the swap, never pinned nor
// known to a control plane, a scratch copy per scratch program. The bounds
// the verifier needs (the home below the home count, the entry below the
// entry count) are checked on opaque copies the indexes are computed from;
// they always hold, and their failure answers null.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key)
// becomes
//   %p != W: the real lookup
//   per length, longest first, its words masked to it:
//     %h = (((0 ^ w0) * M) ^ w1) * M ...,  home = %h >> (64 - bits)
//     probe k: tag = slot[base + home + k][0]; 0: the next length (after
//     the last: null); words equal: entry tag - 1
//===----------------------------------------------------------------------===//

#include "core/OpaqueValue.h"
#include "core/passes/TablePasses.h"
#include "core/passes/TrieRepresentation.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>

using namespace llvm;

#define DEBUG_TYPE "lpm-as-hash"

ALWAYS_ENABLED_STATISTIC(TriesAsHashes, "trie lookups replaced by probes of derived hashes");
ALWAYS_ENABLED_STATISTIC(HashesDerived, "derived hashes, one per prefix length");
ALWAYS_ENABLED_STATISTIC(SitesDeclined,
                         "trie lookups left to the lookup or another representation");

namespace morpheus::core {

namespace {

// "N prefixes of length L as a derived hash of H home slots, probes: at
// most P (B bytes)", or for several lengths "N prefixes of K lengths (L1,
// L2, ...) as derived hashes probed longest first, H home slots in all,
// probes: at most P per length (B bytes)"; then what other prefix lengths
// get.
std::string describeHashes(const std::vector<PrefixHash> &hashes, const TableContents &contents,
                           const std::string &otherLengths) {
  uint64_t homes = 0, bytes = 0;
  uint32_t probes = 0;
  std::string lengths;
  for (const PrefixHash &hash : hashes) {
    homes += uint64_t(1) << hash.homeBits;
    bytes += hash.bytes();
    probes = std::max(probes, hash.probes);
    lengths += (lengths.empty() ? "" : ", ") + std::to_string(hash.length);
  }
  std::string prefixes = std::to_string(contents.entries.size()) + " prefixes of ";
  std::string detail =
      hashes.size() == 1
          ? prefixes + "length " + lengths + " as a derived hash of " + std::to_string(homes) +
                " home slots, probes: at most " + std::to_string(probes)
          : prefixes + std::to_string(hashes.size()) + " lengths (" + lengths +
                ") as derived hashes probed longest first, " + std::to_string(homes) +
                " home slots in all, probes: at most " + std::to_string(probes) + " per length";
  return detail + " (" + std::to_string(bytes) + " bytes); " + otherLengths;
}

} // namespace

PreservedAnalyses LpmAsHashPass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const DataLayout &dl = module.getDataLayout();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (table.match != TableMatch::LongestPrefix)
          return false;
        TrieCandidates candidates = trieCandidates(site, table, contents, context, dl);
        if (!buildsChosenRepresentation(context, site, Decider::LpmAsHashPass, candidates,
                                        Representation::DerivedHash, candidates.whyNoHash))
          return false;
        const std::vector<PrefixHash> &hashes = candidates.hashes;
        LLVMContext &llvmContext = module.getContext();
        // One global per trie, whatever the number of its sites: every
        // length's table, one after the other.
        GlobalVariable *slots = rewriter.derivedTable(site.table, "hash", [&] {
          std::vector<uint32_t> all;
          for (const PrefixHash &hash : hashes)
            all.insert(all.end(), hash.slots.begin(), hash.slots.end());
          return ConstantDataArray::get(llvmContext, ArrayRef<uint32_t>(all));
        });

        CallBase &lookup = *site.call;
        auto *pointerType = cast<PointerType>(lookup.getType());
        IRBuilder<> builder(llvmContext);
        LookupRewriter::Frame frame =
            rewriter.openFrame(lookup, *site.signature.keyArg, site.table, builder, 3);
        BasicBlock *tail = frame.tail;
        PHINode *result = frame.result;
        Function *function = frame.head->getParent();
        auto block = [&](const Twine &suffix) {
          return BasicBlock::Create(llvmContext, site.table + suffix, function, tail);
        };
        Type *i32 = builder.getInt32Ty(), *i64 = builder.getInt64Ty();

        uint32_t width = 8 * (table.keySize - PrefixLengthBytes);
        Value *length = prefixLengthToTest(builder, frame, site, width);
        // The key's data masked to each length, word by word (the longest
        // length has the most words).
        std::vector<std::vector<Value *>> masked(hashes.size());
        for (uint32_t word = 0; word < hashes.front().words; ++word) {
          Value *data = LookupRewriter::loadKey(builder, frame, PrefixLengthBytes + 4 * word, i32,
                                                site.table + ".data");
          for (size_t j = 0; j < hashes.size(); ++j)
            if (word < hashes[j].words)
              masked[j].push_back(
                  builder.CreateAnd(data, hashes[j].masks[word], site.table + ".masked"));
        }
        BasicBlock *hashing = block(".hash");
        BasicBlock *miss = block(".miss");
        BasicBlock *slow = branchOnPrefixLength(builder, frame, site, length, width, hashing);

        BasicBlock *hit = nullptr; // after the first probe, as the blocks run
        PHINode *tag = PHINode::Create(i32, 0, site.table + ".tag");
        // Longest first: the first length holding the key's bits is the
        // longest prefix that covers it; not found at one length, the next.
        for (size_t j = 0; j < hashes.size(); ++j) {
          const PrefixHash &hash = hashes[j];
          const std::vector<Value *> &words = masked[j];
          BasicBlock *notHere = j + 1 < hashes.size() ? block(".hash") : miss;
          builder.SetInsertPoint(hashing);
          // prefixHashHome: h = (h ^ word) * multiplier from h = 0.
          Value *h = nullptr;
          for (Value *word : words) {
            Value *wide = builder.CreateZExt(word, i64);
            h = builder.CreateMul(h ? builder.CreateXor(h, wide) : wide,
                                  builder.getInt64(hash.multiplier));
          }
          if (!h)
            h = builder.getInt64(0);
          // Checked and used as one opaque value (the verifier's bound).
          Value *home = opaqueCopy(builder, builder.CreateLShr(h, 64 - hash.homeBits),
                                   site.table + ".home");
          BasicBlock *probe = block(".probe0");
          if (!hit)
            hit = block(".hit");
          builder.CreateCondBr(
              builder.CreateICmpULT(home, builder.getInt64(uint64_t(1) << hash.homeBits)),
              probe, notHere);

          uint32_t stride = 1 + hash.words;
          for (uint32_t k = 0; k < hash.probes; ++k) {
            builder.SetInsertPoint(probe);
            Value *at = builder.CreateMul(builder.CreateAdd(home, builder.getInt64(k)),
                                          builder.getInt64(stride));
            if (hash.base)
              at = builder.CreateAdd(at, builder.getInt64(hash.base));
            auto slotWord = [&](uint32_t index, const Twine &slotName) {
              Value *offset = index ? builder.CreateAdd(at, builder.getInt64(index)) : at;
              return builder.CreateLoad(i32, builder.CreateInBoundsGEP(i32, slots, offset),
                                        slotName);
            };
            Value *slotTag = slotWord(0, site.table + ".slot.tag");
            BasicBlock *compare = block(".compare" + Twine(k));
            builder.CreateCondBr(builder.CreateICmpEQ(slotTag, builder.getInt32(0)), notHere,
                                 compare);
            builder.SetInsertPoint(compare);
            Value *same = builder.getTrue();
            for (uint32_t word = 0; word < hash.words; ++word) {
              Value *equal = builder.CreateICmpEQ(slotWord(1 + word, site.table + ".slot.data"),
                                                  words[word]);
              same = word ? builder.CreateAnd(same, equal) : equal;
            }
            BasicBlock *next = k + 1 < hash.probes ? block(".probe" + Twine(k + 1)) : notHere;
            tag->addIncoming(slotTag, compare);
            builder.CreateCondBr(same, hit, next);
            probe = next;
          }
          hashing = notHere;
        }

        // The slot's entry, below the entry count.
        builder.SetInsertPoint(hit);
        builder.Insert(tag);
        Value *entry = opaqueCopy(
            builder, builder.CreateSub(builder.CreateZExt(tag, i64), builder.getInt64(1)),
            site.table + ".entry.number");
        BasicBlock *found = block(".found");
        builder.CreateCondBr(
            builder.CreateICmpULT(entry, builder.getInt64(contents.entries.size())), found,
            miss);
        builder.SetInsertPoint(found);
        Value *pointer = rewriter.entryPointer(builder, site.table, entry);
        builder.CreateBr(tail);
        result->addIncoming(pointer, found);
        miss->moveBefore(tail);
        builder.SetInsertPoint(miss);
        builder.CreateBr(tail);
        result->addIncoming(ConstantPointerNull::get(pointerType), miss);
        // Any other prefix length: the backend's own answer.
        closeTrieFrame(builder, lookup, frame, slow);
        ++TriesAsHashes;
        HashesDerived += hashes.size();

        recordTrieDecision(context, site, Decider::LpmAsHashPass, SiteOutcome::Applied,
                           describeHashes(hashes, contents, otherPrefixLengths(site, width)),
                           candidates.choice);
        if (context.log)
          context.log->inlined[site.table] = contents.entries;
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
