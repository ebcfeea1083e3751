#include "core/passes/TrieRepresentation.h"
#include "support/Error.h"

#include <llvm/ADT/Statistic.h>

#include <algorithm>
#include <functional>
#include <map>
#include <set>

namespace morpheus::core {

namespace {

constexpr uint32_t IPv4Bits = 32;
constexpr uint32_t FirstLevelBits = 16, ChunkBits = 8;

// The leading words (the top 32 of 64 data bits) under which some key
// finds a prefix, in order, or none when there are more than
// MaxLeadingWords (a prefix shorter than the leading word covers many).
std::optional<std::vector<uint32_t>> leadingWords(const std::vector<PrefixInterval> &intervals) {
  std::set<uint32_t> words;
  for (size_t i = 0; i < intervals.size(); ++i) {
    if (!intervals[i].entry)
      continue;
    PrefixAddress last =
        i + 1 < intervals.size() ? intervals[i + 1].start - 1 : (PrefixAddress(1) << 64) - 1;
    for (PrefixAddress word = intervals[i].start >> IPv4Bits; word <= last >> IPv4Bits; ++word)
      if (words.insert(uint32_t(word)).second && words.size() > MaxLeadingWords)
        return std::nullopt;
  }
  return std::vector<uint32_t>(words.begin(), words.end());
}

// Multipliers tried in turn for the derived hash (odd 64-bit constants:
// Fibonacci hashing's, then others of mixed bits), at each table size.
constexpr uint64_t HashMultipliers[] = {
    0x9e3779b97f4a7c15ull, 0xc2b2ae3d27d4eb4full, 0x165667b19e3779f9ull,
    0xd6e8feb86659fd93ull, 0xff51afd7ed558ccdull, 0xc4ceb9fe1a85ec53ull,
    0x94d049bb133111ebull, 0xbf58476d1ce4e5b9ull};

// The derived hash of the `members` of `entries` (their indexes; prefixes
// of one length, checked by the caller), or why there is none: home slots
// from twice the members up to eight times, each with every multiplier,
// the first layout whose members all lie within MaxHashProbes slots of
// their homes.
Expected<PrefixHash> buildPrefixHash(const std::vector<TableEntry> &entries,
                                     const std::vector<size_t> &members, uint32_t length,
                                     uint32_t keySize, bool littleEndian) {
  PrefixHash hash;
  hash.length = length;
  hash.words = (length + 31) / 32;
  if (PrefixLengthBytes + 4 * hash.words > keySize)
    return makeError("prefix data of {0} bytes (read as whole 32-bit words)",
                     keySize - PrefixLengthBytes);
  Bytes maskBytes(4 * hash.words, 0);
  for (uint32_t byte = 0; byte < maskBytes.size(); ++byte) {
    uint32_t bits = std::min<uint32_t>(8, length > 8 * byte ? length - 8 * byte : 0);
    maskBytes[byte] = uint8_t(0xff00u >> bits);
  }
  for (uint32_t word = 0; word < hash.words; ++word)
    hash.masks.push_back(uint32_t(chunkValue(maskBytes, {4 * word, 4}, littleEndian)));
  // Every entry's masked words; two entries of one masked prefix cannot
  // both be in a trie (an update of the second replaces the first).
  std::vector<std::vector<uint32_t>> keys;
  std::set<std::vector<uint32_t>> seen;
  for (size_t member : members) {
    std::vector<uint32_t> words;
    for (uint32_t word = 0; word < hash.words; ++word)
      words.push_back(uint32_t(chunkValue(entries[member].key, {PrefixLengthBytes + 4 * word, 4},
                                          littleEndian)) &
                      hash.masks[word]);
    if (!seen.insert(words).second)
      return makeError("two entries of one prefix in the snapshot");
    keys.push_back(std::move(words));
  }
  uint32_t stride = 1 + hash.words;
  uint32_t minBits = 1;
  while ((uint64_t(1) << minBits) < 2 * members.size())
    ++minBits;
  for (uint32_t bits = minBits; bits <= minBits + 2; ++bits) {
    uint64_t homes = uint64_t(1) << bits;
    if ((homes + MaxHashProbes - 1) * stride * sizeof(uint32_t) > HashBytesLimit)
      break;
    for (uint64_t multiplier : HashMultipliers) {
      std::vector<uint32_t> slots((homes + MaxHashProbes - 1) * stride, 0);
      uint32_t probes = 1;
      uint64_t probed = 0;
      bool fits = true;
      for (size_t i = 0; i < keys.size() && fits; ++i) {
        uint64_t slot = prefixHashHome(keys[i], multiplier, bits);
        uint32_t distance = 0;
        while (distance < MaxHashProbes && slots[(slot + distance) * stride] != 0)
          ++distance;
        fits = distance < MaxHashProbes;
        if (!fits)
          break;
        uint32_t *at = &slots[(slot + distance) * stride];
        at[0] = uint32_t(members[i] + 1);
        std::copy(keys[i].begin(), keys[i].end(), at + 1);
        probes = std::max(probes, distance + 1);
        probed += distance + 1;
      }
      if (!fits)
        continue;
      hash.multiplier = multiplier;
      hash.homeBits = bits;
      hash.probes = probes;
      hash.averageProbes = members.empty() ? 1 : double(probed) / double(members.size());
      // Slots past the last a present key can reach are never read.
      slots.resize((homes + probes - 1) * stride);
      hash.slots = std::move(slots);
      return hash;
    }
  }
  return makeError("no hash layout within {0} probes and {1} bytes", MaxHashProbes,
                   HashBytesLimit);
}

} // namespace

uint64_t prefixHashHome(const std::vector<uint32_t> &words, uint64_t multiplier,
                        uint32_t homeBits) {
  uint64_t h = 0;
  for (uint32_t word : words)
    h = (h ^ word) * multiplier;
  return h >> (64 - homeBits);
}

MultibitShape multibitShape(const std::vector<PrefixInterval> &intervals) {
  // A block is split by a chunk when an interval starts strictly inside it.
  std::set<uint64_t> split16, split24;
  for (const PrefixInterval &interval : intervals) {
    uint64_t start = uint64_t(interval.start);
    if (start & 0xffff)
      split16.insert(start >> 16);
    if (start & 0xff)
      split24.insert(start >> 8);
  }
  MultibitShape shape;
  shape.chunks = split16.size() + split24.size();
  shape.bytes = ((uint64_t(1) << FirstLevelBits) + shape.chunks * (1u << ChunkBits)) * 2;
  shape.loads = !split24.empty() ? 3 : !split16.empty() ? 2 : 1;
  return shape;
}

TrieCandidates trieCandidates(const AccessSite &site, const TableInfo &table,
                              const TableContents &contents, const TablePassContext &context,
                              const llvm::DataLayout &dl) {
  TrieCandidates out;
  auto &noSearch = out.whyNoSearch;
  auto &noDerived = out.whyNoDerived;
  if (!context.enabledPasses.count(passOf(Representation::PrefixSearch)))
    noSearch = SiteDecline{SiteOutcome::NotEligible, "lpm-as-code does not run"};
  auto &noHash = out.whyNoHash;
  if (!context.enabledPasses.count(passOf(Representation::DerivedArray)))
    noDerived = SiteDecline{SiteOutcome::NotEligible, "lpm-as-array does not run"};
  if (!context.enabledPasses.count(passOf(Representation::DerivedHash)))
    noHash = SiteDecline{SiteOutcome::NotEligible, "lpm-as-hash does not run"};
  if (context.noCompareChains) {
    SiteDecline off{SiteOutcome::CompareChainsOff, *context.noCompareChains};
    noSearch = noSearch.value_or(off);
    noDerived = noDerived.value_or(off);
    noHash = noHash.value_or(off);
  }
  if (!contents.complete || contents.entries.size() > context.inlineLimit)
    noSearch = noSearch.value_or(SiteDecline{
        SiteOutcome::OverInlineLimit,
        "more than " + std::to_string(context.inlineLimit) + " prefixes"});
  if (context.indexLoweredSites.count(site.id))
    noSearch = noSearch.value_or(SiteDecline{SiteOutcome::OverVerifierBudget,
                                             "over the verifier's path budget (no index "
                                             "lowering for prefix searches yet)"});
  uint32_t dataBytes = table.keySize > PrefixLengthBytes ? table.keySize - PrefixLengthBytes : 0;
  if (dataBytes != 1 && dataBytes != 2 && dataBytes != 4 && dataBytes != 8 && dataBytes != 16)
    noSearch = noSearch.value_or(
        SiteDecline{SiteOutcome::NoRepresentation,
                    "prefix data of " + std::to_string(dataBytes) +
                        " bytes (1, 2, 4, 8 or 16 are searched)"});
  if (!derivableTrieKey(table.keySize))
    noDerived = noDerived.value_or(
        SiteDecline{SiteOutcome::NoRepresentation,
                    "prefix data of " + std::to_string(dataBytes) +
                        " bytes (an IPv4 address, alone or after a 32-bit leading word)"});
  if (!contents.complete) {
    SiteDecline notWhole{SiteOutcome::NotReadWhole,
                         "not read whole (more than " + std::to_string(DerivedTrieReadLimit) +
                             " prefixes)"};
    noDerived = noDerived.value_or(notWhole);
    noHash = noHash.value_or(notWhole);
  }
  if (contents.entries.size() >= MaxDerivedSlotNumber)
    noDerived = noDerived.value_or(SiteDecline{
        SiteOutcome::NoRepresentation, std::to_string(contents.entries.size()) + " prefixes"});
  for (const TableEntry &entry : contents.entries)
    if (!entry.value) {
      SiteDecline differ{SiteOutcome::PerCpuValuesDiffer, "per-CPU values differ between CPUs"};
      noSearch = noSearch.value_or(differ);
      noDerived = noDerived.value_or(differ);
      noHash = noHash.value_or(differ);
    }
  if (!noHash) {
    // The entries by prefix length (read as the kernel reads a key's),
    // longest first: a hash each, probed in that order.
    std::map<uint32_t, std::vector<size_t>, std::greater<>> byLength;
    for (size_t i = 0; i < contents.entries.size(); ++i)
      byLength[uint32_t(chunkValue(contents.entries[i].key, {0, PrefixLengthBytes},
                                   dl.isLittleEndian()))]
          .push_back(i);
    uint64_t bytes = 0;
    if (byLength.empty())
      noHash = SiteDecline{SiteOutcome::NoRepresentation, "no prefixes"};
    else if (byLength.size() > MaxHashLengths)
      noHash = SiteDecline{SiteOutcome::NoRepresentation,
                           "prefixes of " + std::to_string(byLength.size()) +
                               " lengths (the derived hash probes at most " +
                               std::to_string(MaxHashLengths) + ")"};
    for (const auto &[length, members] : byLength) {
      if (noHash)
        break;
      auto hash = buildPrefixHash(contents.entries, members, length, table.keySize,
                                  dl.isLittleEndian());
      if (!hash) {
        noHash = SiteDecline{SiteOutcome::NoRepresentation,
                             "length " + std::to_string(length) + ": " +
                                 toString(hash.takeError())};
        break;
      }
      hash->base = bytes / sizeof(uint32_t);
      bytes += hash->bytes();
      out.hashes.push_back(std::move(*hash));
    }
    if (!noHash && bytes > HashBytesLimit)
      noHash = SiteDecline{SiteOutcome::NoRepresentation,
                           "derived hashes of " + std::to_string(bytes) + " bytes (at most " +
                               std::to_string(HashBytesLimit) + ")"};
    if (noHash)
      out.hashes.clear();
  }
  if (!noSearch || !noDerived) {
    auto intervals = prefixIntervals(contents.entries, 8 * dataBytes, dl.isLittleEndian());
    if (!intervals) {
      SiteDecline why{SiteOutcome::NoRepresentation,
                      "snapshot holds " + toString(intervals.takeError())};
      noSearch = noSearch.value_or(why);
      noDerived = noDerived.value_or(why);
    } else {
      out.intervals = std::move(*intervals);
    }
  }
  if (!noDerived) {
    if (dataBytes * 8 == IPv4Bits) {
      out.derived.push_back({std::nullopt, out.intervals, {}});
    } else if (auto words = leadingWords(out.intervals)) {
      if (words->empty())
        noDerived = SiteDecline{SiteOutcome::NoRepresentation, "no prefixes"};
      for (uint32_t word : *words)
        out.derived.push_back({word, intervalsUnder(out.intervals, word, IPv4Bits), {}});
    } else {
      noDerived = SiteDecline{SiteOutcome::NoRepresentation,
                              "a leading word taking more than " +
                                  std::to_string(MaxLeadingWords) +
                                  " values across the prefixes, or prefixes shorter than it"};
    }
    uint64_t bytes = 0;
    for (DerivedTable &derived : out.derived) {
      derived.shape = multibitShape(derived.intervals);
      bytes += derived.shape.bytes;
      if (derived.shape.chunks > MaxDerivedSlotNumber + 1)
        noDerived = noDerived.value_or(
            SiteDecline{SiteOutcome::NoRepresentation,
                        "more than " + std::to_string(MaxDerivedSlotNumber + 1) + " chunks"});
    }
    if (bytes > DerivedBytesLimit)
      noDerived = noDerived.value_or(
          SiteDecline{SiteOutcome::NoRepresentation,
                      "a derived table over " + std::to_string(DerivedBytesLimit) + " bytes"});
  }

  TableShape shape;
  shape.match = TableMatch::LongestPrefix;
  shape.entries = contents.entries.size();
  shape.keySize = table.keySize;
  shape.intervals = out.intervals.size();
  for (const DerivedTable &derived : out.derived) {
    shape.derivedLoads = std::max(shape.derivedLoads, derived.shape.loads);
    shape.leadingCompares += derived.leadingWord ? 1 : 0;
    shape.derivedBytes += derived.shape.bytes;
  }
  for (const PrefixHash &hash : out.hashes) {
    shape.hashLengths.push_back({hash.words, hash.averageProbes});
    shape.hashBytes += hash.bytes();
  }
  std::vector<Representation> eligible;
  if (!noSearch)
    eligible.push_back(Representation::PrefixSearch);
  if (!noDerived)
    eligible.push_back(Representation::DerivedArray);
  if (!noHash)
    eligible.push_back(Representation::DerivedHash);
  out.choice = context.costModel.choose(shape, eligible);
  return out;
}

bool buildsChosenRepresentation(const TablePassContext &context, const AccessSite &site,
                                Decider pass, const TrieCandidates &candidates,
                                Representation representation,
                                const std::optional<SiteDecline> &whyNot) {
  if (whyNot)
    return recordTrieDecision(context, site, pass, whyNot->outcome, whyNot->detail,
                              candidates.choice);
  if (candidates.choice.chosen != representation)
    return recordTrieDecision(context, site, pass, SiteOutcome::NotCheaper,
                              "the cost model prefers the " +
                                  std::string(representationName(candidates.choice.chosen)),
                              candidates.choice);
  return true;
}

llvm::Value *prefixLengthToTest(llvm::IRBuilderBase &builder,
                                const LookupRewriter::Frame &frame, const AccessSite &site,
                                uint32_t widthBits) {
  if (site.key.prefixLength == widthBits)
    return nullptr;
  return LookupRewriter::loadKey(builder, frame, 0, builder.getInt32Ty(),
                                 site.table + ".prefixlen");
}

llvm::BasicBlock *branchOnPrefixLength(llvm::IRBuilderBase &builder,
                                       const LookupRewriter::Frame &frame, const AccessSite &site,
                                       llvm::Value *length, uint32_t widthBits,
                                       llvm::BasicBlock *wholeKey) {
  if (!length) {
    builder.CreateBr(wholeKey);
    return nullptr;
  }
  llvm::BasicBlock *other = llvm::BasicBlock::Create(
      builder.getContext(), site.table + ".other.prefixlen", frame.head->getParent(), frame.tail);
  builder.CreateCondBr(
      builder.CreateICmpEQ(length, builder.getInt32(widthBits), site.table + ".whole.key"),
      wholeKey, other);
  return other;
}

void closeTrieFrame(llvm::IRBuilderBase &builder, llvm::CallBase &lookup,
                    const LookupRewriter::Frame &frame, llvm::BasicBlock *otherLengths) {
  if (!otherLengths) {
    LookupRewriter::closeFrame(lookup, frame, LookupRewriter::CallKept::No);
    return;
  }
  builder.SetInsertPoint(otherLengths);
  builder.CreateBr(frame.tail);
  LookupRewriter::closeFrame(lookup, frame, LookupRewriter::CallKept::OnMissPath, otherLengths);
}

std::string otherPrefixLengths(const AccessSite &site, uint32_t widthBits) {
  if (site.key.prefixLength == widthBits)
    return "every key has prefix length " + std::to_string(widthBits);
  return "other prefix lengths keep the lookup";
}

bool recordTrieDecision(const TablePassContext &context, const AccessSite &site, Decider pass,
                        SiteOutcome outcome, std::string detail,
                        const RepresentationChoice &choice) {
  if (outcome != SiteOutcome::Applied && context.declines)
    ++*context.declines;
  if (context.log) {
    context.log->record(site, pass, outcome, std::move(detail) + "; " + choice.describe());
    context.log->decisions.back().choice = choice;
  }
  return outcome == SiteOutcome::Applied;
}

} // namespace morpheus::core
