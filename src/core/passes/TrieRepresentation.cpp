#include "core/passes/TrieRepresentation.h"

#include <algorithm>
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

} // namespace

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
    noSearch = "lpm-as-code does not run";
  if (!context.enabledPasses.count(passOf(Representation::DerivedArray)))
    noDerived = "lpm-as-array does not run";
  if (context.noCompareChains) {
    noSearch = noSearch.value_or(*context.noCompareChains);
    noDerived = noDerived.value_or(*context.noCompareChains);
  }
  if (!contents.complete || contents.entries.size() > context.inlineLimit)
    noSearch = noSearch.value_or("more than " + std::to_string(context.inlineLimit) +
                                 " prefixes");
  if (context.indexLoweredSites.count(site.id))
    noSearch = noSearch.value_or("over the verifier's path budget (no index lowering for "
                                 "prefix searches yet)");
  uint32_t dataBytes = table.keySize > PrefixLengthBytes ? table.keySize - PrefixLengthBytes : 0;
  if (dataBytes != 1 && dataBytes != 2 && dataBytes != 4 && dataBytes != 8 && dataBytes != 16)
    noSearch = noSearch.value_or("prefix data of " + std::to_string(dataBytes) +
                                 " bytes (1, 2, 4, 8 or 16 are searched)");
  if (!derivableTrieKey(table.keySize))
    noDerived = noDerived.value_or("prefix data of " + std::to_string(dataBytes) +
                                   " bytes (an IPv4 address, alone or after a 32-bit "
                                   "leading word)");
  if (!contents.complete)
    noDerived = noDerived.value_or("not read whole (more than " +
                                   std::to_string(DerivedTrieReadLimit) + " prefixes)");
  if (contents.entries.size() >= MaxDerivedSlotNumber)
    noDerived = noDerived.value_or(std::to_string(contents.entries.size()) + " prefixes");
  for (const TableEntry &entry : contents.entries)
    if (!entry.value) {
      noSearch = noSearch.value_or("per-CPU values differ between CPUs");
      noDerived = noDerived.value_or("per-CPU values differ between CPUs");
    }
  if (!noSearch || !noDerived) {
    auto intervals = prefixIntervals(contents.entries, 8 * dataBytes, dl.isLittleEndian());
    if (!intervals) {
      std::string why = "snapshot holds " + toString(intervals.takeError());
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
        noDerived = "no prefixes";
      for (uint32_t word : *words)
        out.derived.push_back({word, intervalsUnder(out.intervals, word, IPv4Bits), {}});
    } else {
      noDerived = "a leading word taking more than " + std::to_string(MaxLeadingWords) +
                  " values across the prefixes, or prefixes shorter than it";
    }
    uint64_t bytes = 0;
    for (DerivedTable &derived : out.derived) {
      derived.shape = multibitShape(derived.intervals);
      bytes += derived.shape.bytes;
      if (derived.shape.chunks > MaxDerivedSlotNumber + 1)
        noDerived = noDerived.value_or("more than " + std::to_string(MaxDerivedSlotNumber + 1) +
                                       " chunks");
    }
    if (bytes > DerivedBytesLimit)
      noDerived = noDerived.value_or("a derived table over " +
                                     std::to_string(DerivedBytesLimit) + " bytes");
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
  std::vector<Representation> eligible;
  if (!noSearch)
    eligible.push_back(Representation::PrefixSearch);
  if (!noDerived)
    eligible.push_back(Representation::DerivedArray);
  out.choice = context.costModel.choose(shape, eligible);
  return out;
}

bool buildsChosenRepresentation(const TablePassContext &context, const AccessSite &site,
                                const char *pass, const TrieCandidates &candidates,
                                Representation representation,
                                const std::optional<std::string> &whyNot) {
  if (whyNot)
    return recordTrieDecision(context, site, pass, false, *whyNot, candidates.choice);
  if (candidates.choice.chosen != representation)
    return recordTrieDecision(context, site, pass, false,
                              "the cost model prefers the " +
                                  std::string(representationName(candidates.choice.chosen)),
                              candidates.choice);
  return true;
}

bool recordTrieDecision(const TablePassContext &context, const AccessSite &site,
                        const char *pass, bool applied, std::string detail,
                        const RepresentationChoice &choice) {
  if (context.log) {
    context.log->record(site, pass, applied, std::move(detail) + "; " + choice.describe());
    context.log->decisions.back().choice = choice;
  }
  return applied;
}

} // namespace morpheus::core
