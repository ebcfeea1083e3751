#include "core/passes/PrefixIntervals.h"

#include <algorithm>

namespace morpheus::core {

namespace {

// One stored prefix: its first address, its last, and its entry.
struct Prefix {
  uint32_t length;
  PrefixAddress first;
  PrefixAddress last;
  const TableEntry *entry;
};

PrefixAddress readAddress(const Bytes &data) {
  PrefixAddress address = 0;
  for (uint8_t byte : data)
    address = (address << 8) | byte;
  return address;
}

PrefixAddress allOnes(uint32_t bits) {
  return bits == 0 ? 0 : (~PrefixAddress(0)) >> (128 - bits);
}

// A key's prefix length (its first PrefixLengthBytes, in the target's order).
uint32_t prefixLength(const Bytes &key, bool littleEndian) {
  uint32_t length = 0;
  for (uint32_t i = 0; i < PrefixLengthBytes; ++i) {
    uint32_t byte = littleEndian ? PrefixLengthBytes - 1 - i : i;
    length = (length << 8) | key[byte];
  }
  return length;
}

// The stored prefixes as address ranges, or why they cannot be.
Expected<std::vector<Prefix>> prefixesOf(const std::vector<TableEntry> &entries,
                                         uint32_t dataBits, bool littleEndian) {
  std::vector<Prefix> prefixes;
  for (const TableEntry &entry : entries) {
    if (entry.key.size() != PrefixLengthBytes + dataBits / 8)
      return makeError("a key of {0} bytes", entry.key.size());
    uint32_t length = prefixLength(entry.key, littleEndian);
    if (length > dataBits)
      return makeError("a stored prefix length of {0} beyond {1}", length, dataBits);
    PrefixAddress address =
        readAddress(Bytes(entry.key.begin() + PrefixLengthBytes, entry.key.end()));
    PrefixAddress hostBits = allOnes(dataBits - length);
    prefixes.push_back({length, address & ~hostBits & allOnes(dataBits),
                        (address | hostBits) & allOnes(dataBits), &entry});
  }
  return prefixes;
}

} // namespace

Expected<const TableEntry *> trieAnswer(const std::vector<TableEntry> &entries, const Bytes &key,
                                        uint32_t dataBits, bool littleEndian) {
  if (key.size() != PrefixLengthBytes + dataBits / 8)
    return makeError("a lookup key of {0} bytes", key.size());
  auto prefixes = prefixesOf(entries, dataBits, littleEndian);
  if (!prefixes)
    return prefixes.takeError();
  uint32_t length = prefixLength(key, littleEndian);
  if (length > dataBits)
    return nullptr;
  PrefixAddress address = readAddress(Bytes(key.begin() + PrefixLengthBytes, key.end()));
  const Prefix *longest = nullptr;
  for (const Prefix &prefix : *prefixes)
    if (prefix.length <= length && prefix.first <= address && address <= prefix.last &&
        (!longest || prefix.length > longest->length))
      longest = &prefix;
  return longest ? longest->entry : nullptr;
}

Expected<std::vector<PrefixInterval>> prefixIntervals(const std::vector<TableEntry> &entries,
                                                      uint32_t dataBits, bool littleEndian) {
  auto prefixes = prefixesOf(entries, dataBits, littleEndian);
  if (!prefixes)
    return prefixes.takeError();
  std::vector<PrefixAddress> bounds{0};
  for (const Prefix &prefix : *prefixes) {
    bounds.push_back(prefix.first);
    if (prefix.last != allOnes(dataBits))
      bounds.push_back(prefix.last + 1);
  }
  std::sort(bounds.begin(), bounds.end());
  bounds.erase(std::unique(bounds.begin(), bounds.end()), bounds.end());
  // Outer prefixes before the ones they contain (a trie holds one entry per
  // prefix; of equal ones, were there any, the first stored answers).
  std::vector<const Prefix *> byStart;
  for (const Prefix &prefix : *prefixes)
    byStart.push_back(&prefix);
  std::sort(byStart.begin(), byStart.end(), [](const Prefix *a, const Prefix *b) {
    if (a->first != b->first)
      return a->first < b->first;
    return a->length != b->length ? a->length < b->length : a > b;
  });
  // A sweep over the bounds: `open` holds the prefixes containing the
  // current bound, each inside the one below it (prefixes nest or are
  // disjoint), so its top is the longest.
  std::vector<const Prefix *> open;
  size_t next = 0;
  std::vector<PrefixInterval> intervals;
  for (PrefixAddress start : bounds) {
    // Every address of [start, next bound) lies in the same prefixes.
    while (!open.empty() && open.back()->last < start)
      open.pop_back();
    for (; next < byStart.size() && byStart[next]->first <= start; ++next)
      open.push_back(byStart[next]);
    const TableEntry *entry = open.empty() ? nullptr : open.back()->entry;
    if (intervals.empty() || intervals.back().entry != entry)
      intervals.push_back({start, entry});
  }
  return intervals;
}

const PrefixInterval &intervalAt(const std::vector<PrefixInterval> &intervals,
                                 PrefixAddress address) {
  auto after = std::upper_bound(
      intervals.begin(), intervals.end(), address,
      [](PrefixAddress a, const PrefixInterval &interval) { return a < interval.start; });
  return *(after - 1); // the first interval starts at 0
}

std::vector<PrefixInterval> intervalsUnder(const std::vector<PrefixInterval> &intervals,
                                           PrefixAddress leading, uint32_t suffixBits) {
  PrefixAddress first = leading << suffixBits, end = (leading + 1) << suffixBits;
  std::vector<PrefixInterval> under{{0, intervalAt(intervals, first).entry}};
  auto next = std::upper_bound(
      intervals.begin(), intervals.end(), first,
      [](PrefixAddress a, const PrefixInterval &interval) { return a < interval.start; });
  for (; next != intervals.end() && next->start < end; ++next)
    under.push_back({next->start - first, next->entry});
  return under;
}

} // namespace morpheus::core
