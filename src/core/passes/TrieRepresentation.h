// Which representation a read-only LPM trie's lookup gets: the trie itself,
// lpm-as-code's search over its address intervals, lpm-as-array's
// derived table, or lpm-as-hash's derived hash (a hash per prefix length),
// each eligible or not for reasons only the trie's contents
// and the pipeline tell, and among the eligible ones the cheapest the cost
// model (core/CostModel.h) predicts. The LPM passes ask the same question
// here and build only what the answer names, so the choice is the model's,
// not the passes' order.
#pragma once

#include "core/CostModel.h"
#include "core/passes/PrefixIntervals.h"
#include "core/passes/TableRewriting.h"

#include <llvm/IR/DataLayout.h>

#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// lpm-as-array's table: 16-bit slots, a chunk number in the low 15 bits,
// at most this many bytes (the calibration measures tables up to 1 MiB:
// past that a load is priced as at 1 MiB, which says nothing of 4).
constexpr uint32_t MaxDerivedSlotNumber = 0x7fff;
constexpr uint64_t DerivedBytesLimit = 4u << 20;

// What lpm-as-array's 16-8-8 table of IPv4 `intervals` holds: its chunks of
// 256 slots, its size, and the loads on its deepest path (1 to 3).
struct MultibitShape {
  size_t chunks = 0;
  uint64_t bytes = 0;
  unsigned loads = 1;
};
MultibitShape multibitShape(const std::vector<PrefixInterval> &intervals);

// A trie whose data is a 32-bit leading word then an IPv4 address (the
// firewall's generation, then a prefix) gets one 16-8-8 table per value the
// leading word takes across its prefixes, at most this many; keys of any
// other leading word find no prefix.
constexpr size_t MaxLeadingWords = 4;

// One of lpm-as-array's 16-8-8 tables: the trie's answers for the IPv4
// addresses under one leading word, or for every key when the data is the
// address alone.
struct DerivedTable {
  // The data's first 32 bits read in the trie's bit order (the first byte
  // most significant); unset: no leading word.
  std::optional<uint32_t> leadingWord;
  std::vector<PrefixInterval> intervals; // over the address's 32 bits
  MultibitShape shape;
};

// One of lpm-as-hash's tables, for the trie's prefixes of one length L:
// the key's data masked to its first L bits, read as the 32-bit words the
// program loads (native order), hashed, and probed linearly from its home
// slot. Every slot is `1 + words` 32-bit words: the entry's number in the
// snapshot + 1 (0: empty), then its masked data. The home slots are
// followed by `probes - 1` more, so a probe never wraps; every entry lies
// at most `probes - 1` slots after its home and no slot between is empty
// (inserted in order, never deleted), so a key not found within `probes`
// slots, or before an empty one, is in no entry of this length.
struct PrefixHash {
  uint32_t length = 0;            // its prefixes' length, in bits
  uint32_t words = 0;             // 32-bit words of data the length covers
  std::vector<uint32_t> masks;    // per word, its bits under the length
  uint64_t multiplier = 0;        // odd
  uint32_t homeBits = 1;          // 2^homeBits home slots
  uint32_t probes = 1;            // most slots a present key probes
  double averageProbes = 1;       // slots a present key probes on average
  std::vector<uint32_t> slots;    // the table, slot after slot
  uint64_t base = 0;              // its first word in the trie's derived hash
  uint64_t bytes() const { return slots.size() * sizeof(uint32_t); }
};

// The home slot of masked data `words` (native 32-bit words): folded into
// 64 bits (h = (h ^ word) * multiplier from 0), the top homeBits bits.
// lpm-as-hash computes the same in the program.
uint64_t prefixHashHome(const std::vector<uint32_t> &words, uint64_t multiplier,
                        uint32_t homeBits);

// The most slots lpm-as-hash probes per length, the most lengths it
// probes (one table each, longest first), and their largest size together.
constexpr uint32_t MaxHashProbes = 4;
constexpr size_t MaxHashLengths = 8;
constexpr uint64_t HashBytesLimit = 1u << 20;

struct TrieCandidates {
  // Why each rewrite cannot serve the site (unset: eligible).
  std::optional<SiteDecline> whyNoSearch, whyNoDerived, whyNoHash;
  // The trie's intervals over its whole data (when either is eligible).
  std::vector<PrefixInterval> intervals;
  // When the derived table is eligible: its tables, in leading-word order.
  std::vector<DerivedTable> derived;
  // When the derived hash is eligible: a table per prefix length, longest
  // first, laid one after the other (PrefixHash::base) in one global.
  std::vector<PrefixHash> hashes;
  RepresentationChoice choice;
};

// The candidates for the lookup of LPM `table` at `site`, whose snapshot is
// `contents`, and the model's choice among the eligible ones. A rewrite
// whose pass is not in the pipeline is not eligible.
TrieCandidates trieCandidates(const AccessSite &site, const TableInfo &table,
                              const TableContents &contents, const TablePassContext &context,
                              const llvm::DataLayout &dl);

// Whether `pass` builds `representation` at `site`: it must be eligible there
// (`whyNot` unset) and the model's choice. When not, the decline is logged
// with the reason, so the LPM passes decline alike.
bool buildsChosenRepresentation(const TablePassContext &context, const AccessSite &site,
                                Decider pass, const TrieCandidates &candidates,
                                Representation representation,
                                const std::optional<SiteDecline> &whyNot);

// What every LPM rewrite tests first: the key's prefix length, loaded at
// the builder, or null when the analysis proved it is the data's whole
// width (`widthBits`) at this call (KeyProvenance::prefixLength: a trie
// probed with a packet's whole address), which needs no test.
llvm::Value *prefixLengthToTest(llvm::IRBuilderBase &builder, const LookupRewriter::Frame &frame,
                                const AccessSite &site, uint32_t widthBits);

// The branch on it, at the builder: keys of the whole width go to
// `wholeKey`, the rewrite's code; any other length to the block returned,
// where closeTrieFrame keeps the kernel's own lookup. Without a length to
// test, straight to `wholeKey`, and the result is null.
llvm::BasicBlock *branchOnPrefixLength(llvm::IRBuilderBase &builder,
                                       const LookupRewriter::Frame &frame, const AccessSite &site,
                                       llvm::Value *length, uint32_t widthBits,
                                       llvm::BasicBlock *wholeKey);

// Closes an LPM rewrite's frame: the lookup kept on `otherLengths`, or
// erased when there is no such path.
void closeTrieFrame(llvm::IRBuilderBase &builder, llvm::CallBase &lookup,
                    const LookupRewriter::Frame &frame, llvm::BasicBlock *otherLengths);

// What the log says of keys of other prefix lengths at `site`.
std::string otherPrefixLengths(const AccessSite &site, uint32_t widthBits);

// Logs `pass`'s decision at `site` with the model's choice (a decline counted
// as declineSite counts it); returns whether it applied.
bool recordTrieDecision(const TablePassContext &context, const AccessSite &site, Decider pass,
                        SiteOutcome outcome, std::string detail,
                        const RepresentationChoice &choice);

} // namespace morpheus::core
