// What a longest-prefix-match table answers, address by address: its
// stored prefixes flattened into disjoint address intervals, each with the
// entry the kernel's trie returns for every address in it. Shared by the
// passes that replace a trie lookup (LpmAsCode: a search over the
// intervals; LpmAsArray: a derived direct-indexed array cut from them).
//
// What the kernel returns (kernel/bpf/lpm_trie.c, trie_lookup_elem): null
// when key.prefixlen exceeds the table's max (8 * data bytes); otherwise the
// entry with the longest prefix length L <= key.prefixlen whose first L bits
// equal the key's (bit 0 = the most significant bit of data[0]), or null.
// With key.prefixlen = max every entry qualifies by length, so the answer
// depends only on the address: for each address, the longest stored prefix
// containing it. The stored prefixes nest or are disjoint, so the longest
// one containing an address is constant between consecutive prefix bounds
// (every prefix's first address and the address after its last). Bits of a
// stored key beyond its prefix length are ignored by the trie and masked.
#pragma once

#include "core/Tables.h"
#include "support/Error.h"

#include <cstdint>
#include <vector>

namespace morpheus::core {

using PrefixAddress = unsigned __int128; // data of up to 16 bytes (IPv6)

constexpr uint32_t PrefixLengthBytes = 4; // the key's u32 prefixlen

// An interval of addresses [start, next interval's start) and the entry the
// trie returns for every address in it (null: none covers it).
struct PrefixInterval {
  PrefixAddress start;
  const TableEntry *entry;
};

// What the trie holding `entries` answers a lookup of `key` (a u32 prefix
// length in the target's byte order, then the address): the entry of the
// longest stored prefix no longer than the key's length that contains the
// key's address, or null (also for a key length beyond `dataBits`, which
// the kernel refuses to match). An error says which key cannot be read.
Expected<const TableEntry *> trieAnswer(const std::vector<TableEntry> &entries, const Bytes &key,
                                        uint32_t dataBits, bool littleEndian);

// The intervals of the trie holding `entries` (keys: a u32 prefix length
// in the target's byte order, then `dataBits / 8` bytes of address), in
// address order, adjacent ones with the same answer merged; the first
// starts at address 0. An error says which stored key cannot be read.
Expected<std::vector<PrefixInterval>> prefixIntervals(const std::vector<TableEntry> &entries,
                                                      uint32_t dataBits, bool littleEndian);

// The interval holding `address` (intervals as prefixIntervals returns).
const PrefixInterval &intervalAt(const std::vector<PrefixInterval> &intervals,
                                 PrefixAddress address);

// The answers under one leading word: of `intervals`, those over the
// addresses whose bits above the lowest `suffixBits` are `leading`, as
// intervals over those `suffixBits` (the first starts at 0). Exactly the
// trie's answers for the keys of that leading word, since each interval's
// answer holds for every address in it.
std::vector<PrefixInterval> intervalsUnder(const std::vector<PrefixInterval> &intervals,
                                           PrefixAddress leading, uint32_t suffixBits);

} // namespace morpheus::core
