// Tables that become code (core/passes/LpmAsCode, ...) answer exactly as the
// kernel's own lookup, for every key, on the real kernel. Programs:
// tests/programs/.
#include "Corpus.h"
#include "KernelSupport.h"
#include "core/passes/PrefixIntervals.h"
#include "support/packet/Packet.h"

#include <bpf/bpf.h>
#include <llvm/Testing/Support/Error.h>
#include <cstring>

#include <algorithm>
#include <arpa/inet.h>
#include <array>
#include <linux/bpf.h>
#include <linux/in.h>

namespace morpheus::testing {
namespace {

using packet::PacketBuilder;
using packet::parseMac;

struct V4Key {
  uint32_t prefixlen;
  uint32_t addr; // network order
};

struct V6Key {
  uint32_t prefixlen;
  std::array<uint8_t, 16> addr;
};

Bytes ipv4Packet(uint32_t daddr, uint8_t tos) {
  return PacketBuilder()
      .ethernet(parseMac("02:00:00:00:00:02"), parseMac("02:00:00:00:00:01"))
      .ipv4({.daddr = daddr, .tos = tos})
      .udp(1000, 53)
      .build();
}

Bytes ipv6Packet(const std::array<uint8_t, 16> &daddr, uint8_t hopLimit) {
  return PacketBuilder()
      .ethernet(parseMac("02:00:00:00:00:02"), parseMac("02:00:00:00:00:01"))
      .ipv6({.daddr = daddr, .hopLimit = hopLimit})
      .udp(1000, 53)
      .build();
}

// Prefixes of one address nested at every length, each stored with the
// address's own host bits (the trie ignores them), each its own value; then
// every address one bit away from it (the boundary of each length), the
// address itself and its neighbours, the extremes, each with prefix lengths
// on both sides of the stored ones and beyond the maximum.
TEST(LpmAsCode, NestedPrefixesAtEveryLengthAnswerAsTheTrie) {
  CorpusProgram program("lpm_nested.bpf.c");
  ASSERT_TRUE(program.ok());
  const uint32_t base = 0x0a7b2d43; // 10.123.45.67
  for (uint32_t length = 0; length <= 32; ++length)
    program.set("routes4", V4Key{length, htonl(base)}, uint32_t(100 + length));
  std::array<uint8_t, 16> base6{0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56, 0x78,
                                0x9a, 0xbc, 0xde, 0xf0, 0x0f, 0xed, 0xcb, 0xa9};
  std::vector<uint32_t> lengths6;
  for (uint32_t length = 0; length <= 128; length += length < 64 ? 2 : 7)
    lengths6.push_back(length);
  lengths6.push_back(127);
  lengths6.push_back(128);
  for (uint32_t length : lengths6)
    program.set("routes6", V6Key{length, base6}, uint32_t(200 + length));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (const char *table : {"routes4", "routes6"}) {
    const core::SiteDecision *applied = CorpusProgram::decision(report, table, true);
    ASSERT_NE(applied, nullptr) << table << " not turned into code:\n" << report.describe();
    EXPECT_EQ(applied->pass, "lpm-as-code");
  }

  std::vector<uint32_t> addresses{base, base - 1, base + 1, 0, 0xffffffff, 0x0a000000};
  for (uint32_t bit = 0; bit < 32; ++bit)
    addresses.push_back(base ^ (1u << bit));
  size_t hits = 0, compared = 0;
  for (uint32_t address : addresses)
    for (uint8_t tos : {0, 1, 7, 8, 24, 31, 32, 33, 200}) {
      Bytes packet = ipv4Packet(address, tos);
      RunResult original = program.original(packet);
      hits += original.verdict == XDP_TX;
      EXPECT_EQ(program.active(packet), original)
          << "address " << std::hex << address << std::dec << ", prefix length " << int(tos);
      ++compared;
    }
  std::vector<std::array<uint8_t, 16>> addresses6{base6, {}};
  addresses6.back().fill(0xff);
  for (uint32_t bit = 0; bit < 128; ++bit) {
    std::array<uint8_t, 16> flipped = base6;
    flipped[bit / 8] ^= uint8_t(0x80 >> (bit % 8));
    addresses6.push_back(flipped);
  }
  for (const auto &address : addresses6)
    for (uint8_t hopLimit : {64, 0, 1, 63, 65, 127, 128, 129, 255}) {
      Bytes packet = ipv6Packet(address, hopLimit);
      RunResult original = program.original(packet);
      hits += original.verdict == XDP_TX;
      EXPECT_EQ(program.active(packet), original) << "hop limit " << int(hopLimit);
      ++compared;
    }
  EXPECT_GT(hits, compared / 2) << "premise: most lookups hit some prefix";
  EXPECT_LT(hits, compared) << "premise: some miss (prefix length beyond the maximum)";
}

// What constant-key-lookup inlines for a constant trie key (core::trieAnswer,
// from the trie's prefixes) is what the kernel's own trie answers: a real
// LPM_TRIE with prefixes nested at every length and random ones, asked at
// every address one bit from the nested base, each prefix's bounds and
// random addresses, each at every key length from 0 to 33.
TEST(ConstantKeyLookup, EveryConstantTrieKeyIsAnsweredAsTheKernelsTrie) {
  LIBBPF_OPTS(bpf_map_create_opts, noPrealloc, .map_flags = BPF_F_NO_PREALLOC);
  Fd trie{bpf_map_create(BPF_MAP_TYPE_LPM_TRIE, "const_keys", sizeof(V4Key), sizeof(uint32_t),
                         256, &noPrealloc)};
  ASSERT_GE(trie.fd, 0) << strerror(errno);
  const uint32_t base = 0x0a7b2d43; // 10.123.45.67
  std::vector<std::pair<uint32_t, uint32_t>> prefixes; // (address, length)
  for (uint32_t length = 0; length <= 32; ++length)
    prefixes.push_back({base, length});
  uint32_t seed = 777;
  auto random = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 1) ^ (seed << 15); };
  for (int i = 0; i < 60; ++i)
    prefixes.push_back({random(), 4 + random() % 29});
  auto keyBytes = [](uint32_t length, uint32_t address) {
    V4Key key{length, htonl(address)};
    Bytes bytes(sizeof(key));
    std::memcpy(bytes.data(), &key, sizeof(key));
    return bytes;
  };
  std::vector<core::TableEntry> entries;
  for (size_t i = 0; i < prefixes.size(); ++i) {
    Bytes key = keyBytes(prefixes[i].second, prefixes[i].first);
    uint32_t value = 100 + i;
    ASSERT_EQ(bpf_map_update_elem(trie.fd, key.data(), &value, BPF_ANY), 0) << strerror(errno);
    entries.push_back({key, Bytes(reinterpret_cast<uint8_t *>(&value),
                                  reinterpret_cast<uint8_t *>(&value) + sizeof(value))});
  }
  // A later update of an equal prefix (other host bits) replaced the
  // earlier one in the kernel: keep the last per prefix, as a dump would.
  std::vector<core::TableEntry> stored;
  for (size_t i = entries.size(); i-- > 0;) {
    uint32_t length = prefixes[i].second;
    uint32_t mask = length == 0 ? 0 : ~0u << (32 - length);
    bool shadowed = std::any_of(stored.begin(), stored.end(), [&](const core::TableEntry &e) {
      V4Key other;
      std::memcpy(&other, e.key.data(), sizeof(other));
      return other.prefixlen == length && (ntohl(other.addr) & mask) == (prefixes[i].first & mask);
    });
    if (!shadowed)
      stored.push_back(entries[i]);
  }

  std::vector<uint32_t> addresses{base, base - 1, base + 1, 0, 0xffffffff};
  for (uint32_t bit = 0; bit < 32; ++bit)
    addresses.push_back(base ^ (1u << bit));
  for (const auto &[address, length] : prefixes) {
    uint32_t host = length == 32 ? 0 : ~0u >> length;
    for (uint32_t bound : {address & ~host, address | host})
      for (uint32_t near : {bound - 1, bound, bound + 1})
        addresses.push_back(near);
  }
  for (int i = 0; i < 200; ++i)
    addresses.push_back(random());
  size_t hits = 0, compared = 0;
  for (uint32_t address : addresses)
    for (uint32_t length = 0; length <= 33; ++length) {
      Bytes key = keyBytes(length, address);
      uint32_t kernelValue = 0;
      bool kernelHit = bpf_map_lookup_elem(trie.fd, key.data(), &kernelValue) == 0;
      auto answer = core::trieAnswer(stored, key, 32, /*littleEndian=*/true);
      ASSERT_THAT_EXPECTED(answer, llvm::Succeeded());
      ASSERT_EQ(*answer != nullptr, kernelHit)
          << std::hex << address << std::dec << "/" << length;
      if (kernelHit) {
        uint32_t modelValue;
        std::memcpy(&modelValue, (*answer)->value->data(), sizeof(modelValue));
        EXPECT_EQ(modelValue, kernelValue) << std::hex << address << std::dec << "/" << length;
        ++hits;
      }
      ++compared;
    }
  EXPECT_GT(hits, compared / 4) << "premise: many keys hit some prefix";
  EXPECT_LT(hits, compared) << "premise: some miss";
}

// The same nested prefixes, and 30 more of random lengths and addresses,
// with an inline limit of 8: the IPv4 trie becomes a derived 16-8-8 table
// (lpm-as-array); the IPv6 one, which has none, keeps its lookup. Every
// address one bit from the nested base, every prefix's first and last
// address and their neighbours, and random addresses, each with prefix
// lengths on both sides of 32; then a route changed through Morpheus is
// seen by the very next packet.
TEST(LpmAsArray, NestedAndRandomPrefixesAnswerAsTheTrie) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.inlineLimit = 8;
  CorpusProgram program("lpm_nested.bpf.c", options);
  ASSERT_TRUE(program.ok());
  const uint32_t base = 0x0a7b2d43; // 10.123.45.67
  std::vector<std::pair<uint32_t, uint32_t>> prefixes; // (address, length)
  for (uint32_t length = 0; length <= 32; ++length)
    prefixes.push_back({base, length});
  uint32_t seed = 12345;
  auto random = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 1) ^ (seed << 15); };
  for (int i = 0; i < 30; ++i)
    prefixes.push_back({random(), 8 + random() % 25});
  for (size_t i = 0; i < prefixes.size(); ++i)
    program.set("routes4", V4Key{prefixes[i].second, htonl(prefixes[i].first)}, uint32_t(100 + i));
  std::array<uint8_t, 16> base6{0x20, 0x01, 0x0d, 0xb8};
  for (uint32_t length = 0; length <= 128; length += 8)
    program.set("routes6", V6Key{length, base6}, uint32_t(200 + length));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *applied = CorpusProgram::decision(report, "routes4", true);
  ASSERT_NE(applied, nullptr) << report.describe();
  EXPECT_EQ(applied->pass, "lpm-as-array");
  EXPECT_EQ(CorpusProgram::decision(report, "routes6", true), nullptr) << report.describe();

  std::vector<uint32_t> addresses{base, base - 1, base + 1, 0, 0xffffffff, 0x0a000000};
  for (uint32_t bit = 0; bit < 32; ++bit)
    addresses.push_back(base ^ (1u << bit));
  for (auto [address, length] : prefixes) {
    uint32_t host = length == 0 ? 0xffffffff : length == 32 ? 0 : 0xffffffffu >> length;
    uint32_t firstAddress = address & ~host, lastAddress = address | host;
    for (uint32_t at : {firstAddress - 1, firstAddress, firstAddress + 1, lastAddress - 1,
                        lastAddress, lastAddress + 1})
      addresses.push_back(at);
  }
  for (int i = 0; i < 100; ++i)
    addresses.push_back(random());
  size_t hits = 0, compared = 0;
  for (uint32_t address : addresses)
    for (uint8_t tos : {0, 7, 24, 31, 32, 33}) {
      Bytes packet = ipv4Packet(address, tos);
      RunResult original = program.original(packet);
      hits += original.verdict == XDP_TX;
      EXPECT_EQ(program.active(packet), original)
          << "address " << std::hex << address << std::dec << ", prefix length " << int(tos);
      ++compared;
    }
  EXPECT_GT(hits, compared / 2) << "premise: most lookups hit some prefix";
  EXPECT_LT(hits, compared) << "premise: some miss";

  // The /24 around the base answers another value from now on.
  RunResult before = program.active(ipv4Packet(base ^ 0x80u, 0));
  program.set("routes4", V4Key{24, htonl(base)}, uint32_t(999));
  for (uint32_t address : {base ^ 1u, base ^ 0x80u, base}) {
    Bytes packet = ipv4Packet(address, 0);
    RunResult original = program.original(packet);
    EXPECT_EQ(program.active(packet), original) << std::hex << address;
  }
  RunResult after = program.active(ipv4Packet(base ^ 0x80u, 0));
  EXPECT_EQ(after.verdict, uint32_t(XDP_TX));
  EXPECT_NE(after.output, before.output) << "the new route's value is in the packet";
}

// An IPv6 trie larger than the inline limit with prefixes of several
// lengths: read whole, and no derived representation takes it (lpm-as-array
// is IPv4 only, lpm-as-hash one length only), so it keeps its lookup; the
// hot destinations the traffic shows get a fast path in front of it, each
// hot key compared whole and answered by the prefix that holds it
// (core::trieAnswer). Hot, cold and one-bit-away addresses, at prefix
// lengths on both sides of the stored ones, answer as the original; a
// prefix changed through Morpheus is seen by the very next packet.
TEST(HeavyHitterFastPath, HotKeysOfATrieReadWholeAreAnsweredByTheirPrefixes) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.inlineLimit = 8;
  options.traffic.mode = core::ProfileMode::Naive;
  CorpusProgram program("lpm_nested.bpf.c", options);
  ASSERT_TRUE(program.ok());
  std::array<uint8_t, 16> base6{0x20, 0x01, 0x0d, 0xb8, 0x12, 0x34, 0x56, 0x78,
                                0x9a, 0xbc, 0xde, 0xf0, 0x0f, 0xed, 0xcb, 0xa9};
  for (uint32_t length = 0; length <= 128; length += 8)
    program.set("routes6", V6Key{length, base6}, uint32_t(200 + length));
  auto flipped = [&](uint32_t bit) {
    std::array<uint8_t, 16> address = base6;
    address[bit / 8] ^= uint8_t(0x80 >> (bit % 8));
    return address;
  };
  // Answered by /128, /96 and /16: hot.
  std::vector<std::array<uint8_t, 16>> hot{base6, flipped(100), flipped(20)};

  core::CycleReport instrumented = program.cycle();
  ASSERT_TRUE(instrumented.installed()) << instrumented.describe();
  for (int round = 0; round < 40; ++round)
    for (const auto &address : hot)
      program.active(ipv6Packet(address, 64));
  for (uint32_t bit = 0; bit < 8; ++bit)
    program.active(ipv6Packet(flipped(bit * 13 + 1), 64));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *fastPath = nullptr;
  for (const core::SiteDecision &decision : report.log.decisions)
    if (decision.table == "routes6" && decision.pass == "heavy-hitter-fast-path")
      fastPath = &decision;
  ASSERT_NE(fastPath, nullptr) << report.log.toText();
  EXPECT_TRUE(fastPath->applied) << fastPath->detail;
  EXPECT_EQ(fastPath->detail, "3 hot keys compared before the lookup");

  std::vector<std::array<uint8_t, 16>> addresses = hot;
  addresses.push_back({});
  for (uint32_t bit = 0; bit < 128; ++bit)
    addresses.push_back(flipped(bit));
  size_t hits = 0, compared = 0;
  for (const auto &address : addresses)
    for (uint8_t hopLimit : {64, 0, 8, 95, 96, 97, 127, 128, 129}) {
      Bytes packet = ipv6Packet(address, hopLimit);
      RunResult original = program.original(packet);
      hits += original.verdict == XDP_TX;
      EXPECT_EQ(program.active(packet), original) << "hop limit " << int(hopLimit);
      ++compared;
    }
  EXPECT_GT(hits, compared / 2) << "premise: most lookups hit some prefix";
  EXPECT_LT(hits, compared) << "premise: some miss (prefix length beyond the maximum)";

  // The /96 that answers the second hot address answers another value now.
  RunResult before = program.active(ipv6Packet(hot[1], 64));
  program.set("routes6", V6Key{96, base6}, uint32_t(999));
  RunResult after = program.active(ipv6Packet(hot[1], 64));
  EXPECT_EQ(after, program.original(ipv6Packet(hot[1], 64)));
  EXPECT_NE(after.output, before.output) << "the new value is in the packet";
}

struct LeadingKey {
  uint32_t prefixlen;
  uint32_t leading; // host order, like the firewall's generation
  uint32_t addr;    // network order
};

// The firewall's trie shape (lpm_leading.bpf.c): keys are a leading word
// (the packet's IP id) then the address. Both leading words 0 and 1 (the
// firewall's two generations) hold prefixes nested at every length around
// bases of their own, and 15 random prefixes each; with an inline limit of
// 8 the trie becomes one derived table per leading word (lpm-as-array).
// Every address one bit from each base, every prefix's bounds and their
// neighbours, random addresses, under both leading words and others (2,
// 256, 65,535), with prefix lengths on both sides of the stored ones, of 64
// and beyond; then a prefix changed through Morpheus under generation 1 is
// seen by the very next packet.
TEST(LpmAsArray, LeadingWordPrefixesAnswerAsTheTrie) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.inlineLimit = 8;
  CorpusProgram program("lpm_leading.bpf.c", options);
  ASSERT_TRUE(program.ok());
  const uint32_t bases[2] = {0x0a7b2d43, 0x0a7b2e00}; // 10.123.45.67, 10.123.46.0
  struct Prefix {
    uint32_t leading, address, length;
  };
  std::vector<Prefix> prefixes;
  uint32_t seed = 4242;
  auto random = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 1) ^ (seed << 15); };
  for (uint32_t leading : {0u, 1u}) {
    for (uint32_t length = 0; length <= 32; ++length)
      prefixes.push_back({leading, bases[leading], length});
    for (int i = 0; i < 15; ++i)
      prefixes.push_back({leading, random(), 8 + random() % 25});
  }
  for (size_t i = 0; i < prefixes.size(); ++i)
    program.set("prefixes",
                LeadingKey{32 + prefixes[i].length, prefixes[i].leading, htonl(prefixes[i].address)},
                uint32_t(100 + i));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *applied = CorpusProgram::decision(report, "prefixes", true);
  ASSERT_NE(applied, nullptr) << report.describe();
  EXPECT_EQ(applied->pass, "lpm-as-array");
  EXPECT_NE(applied->detail.find("derived 16-8-8 tables, one per leading word (2 words)"),
            std::string::npos)
      << applied->detail;

  auto packet = [](uint32_t daddr, uint16_t leading, uint8_t tos) {
    return PacketBuilder()
        .ethernet(parseMac("02:00:00:00:00:02"), parseMac("02:00:00:00:00:01"))
        .ipv4({.daddr = daddr, .tos = tos, .id = leading})
        .udp(1000, 53)
        .build();
  };
  std::vector<uint32_t> addresses{0, 0xffffffff, 0x0a000000};
  for (uint32_t base : bases) {
    for (uint32_t at : {base, base - 1, base + 1})
      addresses.push_back(at);
    for (uint32_t bit = 0; bit < 32; ++bit)
      addresses.push_back(base ^ (1u << bit));
  }
  size_t everyLength = addresses.size();
  for (const Prefix &prefix : prefixes) {
    uint32_t host = prefix.length == 0    ? 0xffffffff
                    : prefix.length == 32 ? 0
                                          : 0xffffffffu >> prefix.length;
    uint32_t first = prefix.address & ~host, last = prefix.address | host;
    for (uint32_t at : {first - 1, first, first + 1, last - 1, last, last + 1})
      addresses.push_back(at);
  }
  for (int i = 0; i < 50; ++i)
    addresses.push_back(random());
  size_t hits = 0, compared = 0;
  auto compare = [&](uint32_t address, uint16_t leading, uint8_t tos) {
    Bytes bytes = packet(address, leading, tos);
    RunResult original = program.original(bytes);
    hits += original.verdict == XDP_TX;
    EXPECT_EQ(program.active(bytes), original)
        << "address " << std::hex << address << std::dec << ", leading word " << leading
        << ", prefix length " << int(tos);
    ++compared;
  };
  for (size_t i = 0; i < addresses.size(); ++i) {
    for (uint16_t leading : {0, 1, 2})
      compare(addresses[i], leading, 0); // the whole key: prefix length 64
    if (i < everyLength)
      for (uint16_t leading : {0, 1, 2, 256, 0xffff})
        for (uint8_t tos : {31, 32, 33, 48, 63, 64, 65, 200})
          compare(addresses[i], leading, tos);
  }
  EXPECT_GT(hits, compared / 3) << "premise: many lookups hit some prefix";
  EXPECT_LT(hits, compared) << "premise: some miss";

  // Generation 1's /24 around its base answers another value from now on.
  const uint32_t changed = bases[1] ^ 0x80u;
  RunResult before = program.active(packet(changed, 1, 0));
  program.set("prefixes", LeadingKey{32 + 24, 1, htonl(bases[1])}, uint32_t(999));
  for (uint32_t address : {bases[1] ^ 1u, changed, bases[1]})
    for (uint16_t leading : {0, 1}) {
      Bytes bytes = packet(address, leading, 0);
      EXPECT_EQ(program.active(bytes), program.original(bytes)) << std::hex << address;
    }
  RunResult after = program.active(packet(changed, 1, 0));
  EXPECT_EQ(after.verdict, uint32_t(XDP_TX));
  EXPECT_NE(after.output, before.output) << "the new prefix's value is in the packet";
}

struct TaggedKey {
  uint32_t prefixlen;
  uint32_t tag;  // host order
  uint32_t addr; // network order
};

// Tries whose prefixes share one length (lpm_single_length.bpf.c), each
// past the inline limit: 300 IPv4 /24s, 100 IPv6 /64s and 200 /56s of a
// leading word then an IPv4 address under 10 leading words (where
// lpm-as-array has no table: IPv6, more than 4 leading words) all become
// derived hashes (lpm-as-hash). Every prefix's address, its host bits and
// its neighbours on both sides, addresses one bit away, random ones, each
// with prefix lengths below, at and above the stored one, at the maximum
// and beyond; then, through Morpheus, a value changed, a prefix added and a
// prefix of another length added are each seen by the very next packet.
TEST(LpmAsHash, PrefixesOfOneLengthAnswerAsTheTrie) {
  CorpusProgram program("lpm_single_length.bpf.c");
  ASSERT_TRUE(program.ok());
  uint32_t seed = 777;
  auto random = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 1) ^ (seed << 15); };
  std::vector<uint32_t> prefixes4; // /24s, host order, host bits set at random
  for (int i = 0; i < 300; ++i)
    prefixes4.push_back((0x0a000000 | (random() & 0x00ffff00)) + (random() & 0xff));
  prefixes4.push_back(0x0a7b2d00); // 10.123.45.0/24 and its neighbour blocks
  prefixes4.push_back(0x0a7b2e00);
  for (size_t i = 0; i < prefixes4.size(); ++i)
    program.set("routes4", V4Key{24, htonl(prefixes4[i])}, uint32_t(100 + i));
  std::vector<std::array<uint8_t, 16>> prefixes6;
  for (int i = 0; i < 100; ++i) {
    std::array<uint8_t, 16> address{0x20, 0x01, 0x0d, 0xb8};
    for (size_t byte = 4; byte < 16; ++byte)
      address[byte] = uint8_t(random());
    prefixes6.push_back(address);
    program.set("routes6", V6Key{64, address}, uint32_t(200 + i));
  }
  struct Tagged {
    uint32_t tag, address;
  };
  std::vector<Tagged> tagged;
  for (int i = 0; i < 200; ++i)
    tagged.push_back({uint32_t(i % 10), (0xc0a80000 | (random() & 0xffff00)) + (random() & 0xff)});
  for (size_t i = 0; i < tagged.size(); ++i)
    program.set("tagged", TaggedKey{56, tagged[i].tag, htonl(tagged[i].address)},
                uint32_t(5000 + i));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (const char *table : {"routes4", "routes6", "tagged"}) {
    const core::SiteDecision *applied = CorpusProgram::decision(report, table, true);
    ASSERT_NE(applied, nullptr) << table << ":\n" << report.log.toText();
    EXPECT_EQ(applied->pass, "lpm-as-hash") << applied->detail;
  }

  auto packet4 = [](uint32_t daddr, uint16_t id, uint8_t tos) {
    return PacketBuilder()
        .ethernet(parseMac("02:00:00:00:00:02"), parseMac("02:00:00:00:00:01"))
        .ipv4({.daddr = daddr, .tos = tos, .id = id})
        .udp(1000, 53)
        .build();
  };
  size_t hits = 0, compared = 0;
  auto compare4 = [&](uint32_t address, uint16_t id, uint8_t tos) {
    Bytes bytes = packet4(address, id, tos);
    RunResult original = program.original(bytes);
    hits += original.verdict == XDP_TX;
    EXPECT_EQ(program.active(bytes), original)
        << "address " << std::hex << address << std::dec << ", id " << id << ", prefix length "
        << int(tos);
    ++compared;
  };
  const uint8_t lengths4[] = {0, 1, 23, 24, 25, 31, 32, 33, 200};
  for (uint32_t prefix : prefixes4) {
    uint32_t first = prefix & 0xffffff00, last = first | 0xff;
    for (uint32_t at : {prefix, first - 1, first, last, last + 1, prefix ^ 0x100u, prefix ^ 0x800000u})
      compare4(at, 0, 0);
  }
  for (size_t i = 0; i < 40; ++i)
    for (uint8_t tos : lengths4)
      compare4(prefixes4[i] ^ (i < 20 ? 0 : 1u << (i % 32)), 0, tos);
  for (int i = 0; i < 100; ++i)
    compare4(random(), 0, 0);
  // tagged: every prefix under its own tag and its neighbours', each
  // address's neighbours, prefix lengths around 56 and 64.
  const uint8_t lengths12[] = {0, 24, 32, 55, 56, 57, 63, 64, 65, 255};
  for (size_t i = 0; i < tagged.size(); ++i) {
    auto [tag, address] = tagged[i];
    uint32_t first = address & 0xffffff00;
    for (uint16_t id : {uint16_t(tag), uint16_t(tag + 1), uint16_t(tag + 256)})
      for (uint32_t at : {address, first - 1, first | 0xff, (first | 0xff) + 1})
        compare4(at, id, 0);
    if (i < 20)
      for (uint8_t tos : lengths12)
        compare4(address, uint16_t(tag), tos);
  }
  size_t hits4 = hits, compared4 = compared;
  // (the verdict counts routes4 hits only; tagged answers show in the bytes)
  EXPECT_GT(hits4, compared4 / 8) << "premise: many lookups hit a prefix";
  EXPECT_LT(hits4, compared4) << "premise: some miss";

  const uint8_t hopLimits[] = {64, 0, 1, 63, 65, 127, 128, 129, 255};
  for (size_t i = 0; i < prefixes6.size(); ++i) {
    std::array<uint8_t, 16> host = prefixes6[i];
    for (size_t byte = 8; byte < 16; ++byte)
      host[byte] = uint8_t(random()); // host bits: the trie ignores them
    std::vector<std::array<uint8_t, 16>> addresses{prefixes6[i], host};
    for (uint32_t bit : {63u, 62u, 32u, 7u, 64u, 127u}) {
      std::array<uint8_t, 16> flipped = prefixes6[i];
      flipped[bit / 8] ^= uint8_t(0x80 >> (bit % 8));
      addresses.push_back(flipped);
    }
    for (const auto &address : addresses)
      for (uint8_t hopLimit : hopLimits) {
        if (i >= 20 && hopLimit != 64)
          continue;
        Bytes bytes = ipv6Packet(address, hopLimit);
        RunResult original = program.original(bytes);
        hits += original.verdict == XDP_TX;
        EXPECT_EQ(program.active(bytes), original) << "IPv6 prefix " << i << ", hop limit "
                                                   << int(hopLimit);
        ++compared;
      }
  }
  EXPECT_GT(hits - hits4, (compared - compared4) / 4) << "premise: many IPv6 lookups hit";
  EXPECT_LT(hits - hits4, compared - compared4) << "premise: some IPv6 lookups miss";

  // Through Morpheus: a value changed, a /24 added, then a /16 (another
  // length) added, each seen by the very next packet.
  const uint32_t changed = prefixes4[0], added = 0x0b0c0d00, wider = 0x0a7b0000;
  RunResult before = program.active(packet4(changed, 0, 0));
  program.set("routes4", V4Key{24, htonl(changed)}, uint32_t(999));
  RunResult after = program.active(packet4(changed, 0, 0));
  EXPECT_EQ(after, program.original(packet4(changed, 0, 0)));
  EXPECT_NE(after.output, before.output) << "the new value is in the packet";
  EXPECT_EQ(program.active(packet4(added + 1, 0, 0)).verdict, uint32_t(XDP_DROP));
  program.set("routes4", V4Key{24, htonl(added)}, uint32_t(1000));
  EXPECT_EQ(program.active(packet4(added + 1, 0, 0)).verdict, uint32_t(XDP_TX));
  program.set("routes4", V4Key{16, htonl(wider)}, uint32_t(1001));
  for (uint32_t at : {wider + 1, 0x0a7b2d05u, 0x0a7bff01u, added + 1, changed})
    for (uint8_t tos : {0, 16, 24})
      EXPECT_EQ(program.active(packet4(at, 0, tos)), program.original(packet4(at, 0, tos)))
          << std::hex << at << std::dec << " /" << int(tos);
  // The next cycle: two lengths now, a hash each among the candidates
  // (the model chooses between them and the 16-8-8 table); every prefix
  // and its neighbours again, and the /16's own.
  report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *routes = CorpusProgram::decision(report, "routes4", true);
  ASSERT_NE(routes, nullptr) << report.log.toText();
  EXPECT_TRUE(routes->pass == "lpm-as-hash" || routes->pass == "lpm-as-array") << routes->detail;
  ASSERT_TRUE(routes->choice) << routes->detail;
  EXPECT_TRUE(routes->choice->predictionFor(core::Representation::DerivedHash)) << routes->detail;
  for (uint32_t prefix : prefixes4) {
    uint32_t first = prefix & 0xffffff00, last = first | 0xff;
    for (uint32_t at : {prefix, first - 1, last + 1})
      compare4(at, 0, 0);
  }
  for (uint32_t at : {wider - 1, wider, wider + 1, 0x0a7b2d05u, 0x0a7bff01u, wider + 0xffff,
                      wider + 0x10000, added + 1, changed})
    for (uint8_t tos : {0, 16, 24, 32})
      compare4(at, 0, tos);
}

// routes6 (lpm_single_length.bpf.c) with prefixes of four lengths nested
// in one another past the inline limit: /32s, /48s inside them, /64s inside
// those, a /128 host inside some: a derived hash per length, probed longest
// first (lpm-as-hash; lpm-as-array has no IPv6 table). Every prefix's
// address with and without host bits, one bit flipped just inside and just
// outside its length and at the top, under the whole key and, for some,
// prefix lengths around every stored one; then, through Morpheus, a /56
// between a /48 and its /64 is seen by the very next packet, and the next
// cycle probes five lengths.
TEST(LpmAsHash, PrefixesOfSeveralLengthsAreProbedLongestFirst) {
  CorpusProgram program("lpm_single_length.bpf.c");
  ASSERT_TRUE(program.ok());
  uint32_t seed = 4242;
  auto random = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 1) ^ (seed << 15); };
  using Address = std::array<uint8_t, 16>;
  auto withRandomBytes = [&](Address address, size_t from) {
    for (size_t byte = from; byte < 16; ++byte)
      address[byte] = uint8_t(random());
    return address;
  };
  std::vector<std::pair<Address, uint32_t>> prefixes; // address, length
  for (int i = 0; i < 6; ++i) {
    Address at32{0x20, 0x01, uint8_t(random()), uint8_t(random())};
    prefixes.push_back({at32, 32});
    for (int j = 0; j < 3; ++j) {
      Address at48 = at32;
      at48[4] = uint8_t(random()), at48[5] = uint8_t(random());
      prefixes.push_back({at48, 48});
      for (int k = 0; k < 3; ++k) {
        Address at64 = at48;
        at64[6] = uint8_t(random()), at64[7] = uint8_t(random());
        prefixes.push_back({at64, 64});
        if (k == 0)
          prefixes.push_back({withRandomBytes(at64, 8), 128});
      }
    }
  }
  for (size_t i = 0; i < prefixes.size(); ++i)
    program.set("routes6", V6Key{prefixes[i].second, prefixes[i].first}, uint32_t(300 + i));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *applied = CorpusProgram::decision(report, "routes6", true);
  ASSERT_NE(applied, nullptr) << report.log.toText();
  EXPECT_EQ(applied->pass, "lpm-as-hash") << applied->detail;
  EXPECT_NE(applied->detail.find("4 lengths (128, 64, 48, 32)"), std::string::npos)
      << applied->detail;

  size_t hits = 0, compared = 0;
  auto compare = [&](const Address &address, uint8_t hopLimit) {
    Bytes bytes = ipv6Packet(address, hopLimit);
    RunResult original = program.original(bytes);
    hits += original.verdict == XDP_TX;
    ++compared;
    EXPECT_EQ(program.active(bytes), original) << "hop limit " << int(hopLimit);
  };
  auto flipped = [](Address address, uint32_t bit) {
    address[bit / 8] ^= uint8_t(0x80 >> (bit % 8));
    return address;
  };
  const uint8_t hopLimits[] = {0, 31, 32, 33, 47, 48, 63, 65, 127, 128, 129, 255};
  for (size_t i = 0; i < prefixes.size(); ++i) {
    auto [address, length] = prefixes[i];
    std::vector<Address> addresses{address, withRandomBytes(address, length / 8), flipped(address, 0)};
    if (length < 128)
      addresses.push_back(flipped(address, length)); // just outside: a shorter prefix's
    addresses.push_back(flipped(address, length - 1)); // just inside its last bit
    for (const Address &at : addresses) {
      compare(at, 64); // the whole key
      if (i < 12)
        for (uint8_t hopLimit : hopLimits)
          compare(at, hopLimit);
    }
  }
  for (int i = 0; i < 50; ++i)
    compare(withRandomBytes({0x20, 0x01}, 2), 64);
  EXPECT_GT(hits, compared / 3) << "premise: many lookups hit a prefix";
  EXPECT_LT(hits, compared) << "premise: some miss";

  // Through Morpheus: a /56 between the first /48 and its first /64.
  Address at56 = prefixes[2].first; // the first /64
  at56[7] = 0;
  const Address inside56 = flipped(prefixes[2].first, 63); // under the /56, not the /64
  RunResult before = program.active(ipv6Packet(inside56, 64));
  program.set("routes6", V6Key{56, at56}, uint32_t(999));
  RunResult after = program.active(ipv6Packet(inside56, 64));
  EXPECT_EQ(after, program.original(ipv6Packet(inside56, 64)));
  EXPECT_NE(after.output, before.output) << "the /56's value is in the packet";
  report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  applied = CorpusProgram::decision(report, "routes6", true);
  ASSERT_NE(applied, nullptr) << report.log.toText();
  EXPECT_NE(applied->detail.find("5 lengths (128, 64, 56, 48, 32)"), std::string::npos)
      << applied->detail;
  for (const Address &at : {inside56, prefixes[2].first, flipped(at56, 55), flipped(at56, 47),
                            withRandomBytes(at56, 7)})
    for (uint8_t hopLimit : {64, 56, 55, 57, 64 + 1})
      compare(at, hopLimit);
}

// Read-only hashes of small key domains (small_key_domain.bpf.c), each past
// the inline limit, become direct indexes (hash-as-array): 300 UDP ports
// (16-bit keys), 200 32-bit ids in 100,000..100,999 (a bounds check first)
// and 100 TOS values of a per-CPU hash (one value on every CPU). Every key
// held and its neighbours, the range's ends and beyond, every 97th port and
// id, every TOS (values differ in every byte: constant-fields takes none);
// then, through Morpheus, a value changed, a key added inside
// the range and one outside it, each seen by the very next packet.
TEST(HashAsArray, SmallKeyDomainsAnswerAsTheMap) {
  CorpusProgram program("small_key_domain.bpf.c");
  ASSERT_TRUE(program.ok());
  uint32_t seed = 99;
  auto random = [&] { return seed = seed * 1103515245u + 12345u, (seed >> 1) ^ (seed << 15); };
  std::vector<uint16_t> ports; // host order
  for (int i = 0; i < 300; ++i)
    ports.push_back(uint16_t(random()));
  ports.push_back(0);
  ports.push_back(0xffff);
  for (size_t i = 0; i < ports.size(); ++i)
    program.set("ports", uint16_t(htons(ports[i])), uint32_t(1000 + i));
  std::vector<uint16_t> ids; // the IP id: the key is id + 100,000
  for (int i = 0; i < 200; ++i)
    ids.push_back(uint16_t(100 + random() % 900));
  for (size_t i = 0; i < ids.size(); ++i)
    program.set("ids", uint32_t(ids[i] + 100000), uint64_t(random()) << 32 | i);
  for (uint32_t tos = 0; tos < 200; tos += 2)
    program.set("marks", uint8_t(tos), uint32_t(7000 + tos));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (const char *table : {"ports", "ids", "marks"}) {
    const core::SiteDecision *applied = CorpusProgram::decision(report, table, true);
    ASSERT_NE(applied, nullptr) << table << ":\n" << report.log.toText();
    EXPECT_EQ(applied->pass, "hash-as-array") << applied->detail;
  }

  auto packet = [](uint16_t port, uint16_t id, uint8_t tos) {
    return PacketBuilder()
        .ethernet(parseMac("02:00:00:00:00:02"), parseMac("02:00:00:00:00:01"))
        .ipv4({.daddr = 0x0a000001, .tos = tos, .id = id})
        .udp(1000, port)
        .build();
  };
  size_t hits = 0, compared = 0;
  auto compare = [&](uint16_t port, uint16_t id, uint8_t tos) {
    Bytes bytes = packet(port, id, tos);
    RunResult original = program.original(bytes);
    hits += original.verdict == XDP_TX;
    EXPECT_EQ(program.active(bytes), original)
        << "port " << port << ", id " << id << ", tos " << int(tos);
    ++compared;
  };
  for (uint16_t port : ports)
    for (int delta : {-1, 0, 1})
      compare(uint16_t(port + delta), 0, 0);
  for (uint32_t port = 0; port < 65536; port += 97)
    compare(uint16_t(port), uint16_t(port), uint8_t(port));
  for (uint16_t id : ids)
    for (int delta : {-1, 0, 1})
      compare(ports[0], uint16_t(id + delta), 1);
  for (uint16_t id : {0, 1, 99, 100, 999, 1000, 1001, 65535})
    compare(ports[1], id, 2);
  for (uint32_t tos = 0; tos < 256; ++tos)
    compare(ports[2], ids[0], uint8_t(tos));
  EXPECT_GT(hits, compared / 4) << "premise: many lookups hit";
  EXPECT_LT(hits, compared) << "premise: some miss";

  // Through Morpheus: a value changed, an id added inside the range, one
  // outside it, each seen by the very next packet.
  Bytes changed = packet(ports[3], ids[1], 4);
  RunResult before = program.active(changed);
  program.set("ports", uint16_t(htons(ports[3])), uint32_t(4242));
  RunResult after = program.active(changed);
  EXPECT_EQ(after, program.original(changed));
  EXPECT_NE(after.output, before.output) << "the new value is in the packet";
  uint16_t inside = 0, outside = 5000;
  while (std::find(ids.begin(), ids.end(), inside + 100) != ids.end())
    ++inside;
  inside += 100;
  for (uint16_t id : {inside, outside}) {
    Bytes bytes = packet(ports[0], id, 0);
    RunResult missing = program.active(bytes);
    program.set("ids", uint32_t(id + 100000), uint64_t(0xabcdef0012345678ull));
    RunResult added = program.active(bytes);
    EXPECT_EQ(added, program.original(bytes)) << "id " << id;
    EXPECT_NE(added.output, missing.output) << "id " << id << ": the new entry is in the packet";
  }
  // The next cycle: still direct indexes (the range now reaches 5,000).
  report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *idsDecision = CorpusProgram::decision(report, "ids", true);
  ASSERT_NE(idsDecision, nullptr) << report.log.toText();
  EXPECT_EQ(idsDecision->pass, "hash-as-array");
  for (uint16_t id : {inside, outside, uint16_t(outside + 1), ids[5]})
    EXPECT_EQ(program.active(packet(ports[0], id, 0)), program.original(packet(ports[0], id, 0)));
}

struct Rule {
  uint32_t action;
  uint32_t mark;
};

// 100 rules, one action: the action is a constant, every hit and miss
// answers as the original; a rule changed through Morpheus afterwards is
// seen on the very next packet (the guard covers the whole table).
TEST(ConstantFields, AFieldEqualInEveryEntryIsAConstantUnderTheGuard) {
  CorpusProgram program("constant_field.bpf.c");
  ASSERT_TRUE(program.ok());
  const uint32_t first = 0x0a010000;
  for (uint32_t i = 0; i < 100; ++i)
    program.set("rules", uint32_t(htonl(first + i)), Rule{XDP_TX, 1000 + i});
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *applied = CorpusProgram::decision(report, "rules", true);
  ASSERT_NE(applied, nullptr) << report.log.toText();
  EXPECT_EQ(applied->pass, "constant-fields");
  EXPECT_NE(applied->detail.find("action"), std::string::npos) << applied->detail;

  for (uint32_t i = 0; i < 102; ++i) {
    Bytes packet = ipv4Packet(first + i, 0);
    RunResult original = program.original(packet);
    EXPECT_EQ(original.verdict, i < 100 ? uint32_t(XDP_TX) : uint32_t(XDP_PASS));
    EXPECT_EQ(program.active(packet), original) << "rule " << i;
  }
  program.set("rules", uint32_t(htonl(first + 5)), Rule{XDP_DROP, 5});
  Bytes changed = ipv4Packet(first + 5, 0);
  EXPECT_EQ(program.original(changed).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.active(changed), program.original(changed));
}

// 100 rules with ports 0..9 below the program's bound of 16, which it
// checks, then uses as an index into an array value (per-port TOS bytes):
// the port's load is bounded by the rules' range, the check goes, and the
// verifier still accepts the index (the clamp bounds it). Every rule's
// packet and others answer as the original; rules changed
// through Morpheus to ports 12 and 20 (past the bound: ABORTED) are seen by
// the very next packet; the next cycle, whose range [0, 20] decides no
// check, answers as the original too.
TEST(ConstantFields, AFieldsRangeBoundsTheLoadAndTheVerifierStillSeesTheBound) {
  CorpusProgram program("value_range.bpf.c");
  ASSERT_TRUE(program.ok());
  const uint32_t first = 0x0a020000;
  for (uint32_t i = 0; i < 100; ++i)
    program.set("rules", uint32_t(htonl(first + i)), Rule{i % 10, 1000 + i});
  std::array<uint8_t, 16> tosByPort;
  for (uint8_t port = 0; port < 16; ++port)
    tosByPort[port] = uint8_t(0x10 + port);
  program.set("port_tos", uint32_t(0), tosByPort);
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *applied = CorpusProgram::decision(report, "rules", true);
  ASSERT_NE(applied, nullptr) << report.log.toText();
  EXPECT_EQ(applied->pass, "constant-fields");
  EXPECT_NE(applied->detail.find("`port` (bytes 0..3) in [0, 9]"), std::string::npos) << applied->detail;

  auto compareAll = [&](const char *when) {
    for (uint32_t i = 0; i < 102; ++i) {
      Bytes packet = ipv4Packet(first + i, 0);
      RunResult original = program.original(packet);
      EXPECT_EQ(program.active(packet), original) << when << ", rule " << i;
    }
  };
  compareAll("first cycle");
  program.set("rules", uint32_t(htonl(first + 5)), Rule{12, 5});
  program.set("rules", uint32_t(htonl(first + 6)), Rule{20, 6});
  EXPECT_EQ(program.original(ipv4Packet(first + 6, 0)).verdict, uint32_t(XDP_ABORTED));
  compareAll("after the change");
  core::CycleReport next = program.cycle();
  ASSERT_TRUE(next.installed()) << next.describe();
  compareAll("next cycle");
}

struct AclKey {
  uint8_t protocol;
  uint8_t padding[3];
  uint32_t address; // network order
};

// 100 rules, TCP and UDP only: packets of every protocol, to ruled and
// other addresses, answer as the original; a rule for another protocol
// added through Morpheus is seen on the very next packet.
TEST(BranchInjection, AFewValuedKeyFieldIsTestedBeforeTheLookup) {
  CorpusProgram program("acl_protocols.bpf.c");
  ASSERT_TRUE(program.ok());
  const uint32_t first = 0x0a020000;
  for (uint32_t i = 0; i < 100; ++i)
    program.set("acl", AclKey{uint8_t(i % 2 ? IPPROTO_UDP : IPPROTO_TCP), {0, 0, 0}, htonl(first + i)},
                uint32_t(i % 3 ? XDP_DROP : XDP_TX));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *applied = CorpusProgram::decision(report, "acl", true);
  ASSERT_NE(applied, nullptr) << report.log.toText();
  EXPECT_EQ(applied->pass, "branch-injection");

  for (uint8_t protocol : {IPPROTO_TCP, IPPROTO_UDP, IPPROTO_ICMP})
    for (uint32_t i : {0u, 1u, 2u, 57u, 99u, 100u, 1000u}) {
      Bytes packet = buildPacket({.protocol = protocol, .daddr = first + i});
      EXPECT_EQ(program.active(packet), program.original(packet))
          << "protocol " << int(protocol) << ", rule " << i;
    }
  EXPECT_EQ(program.original(buildPacket({.protocol = IPPROTO_TCP, .daddr = first + 2})).verdict,
            uint32_t(XDP_DROP)) << "premise: rule 2 (TCP) drops";
  program.set("acl", AclKey{IPPROTO_ICMP, {0, 0, 0}, htonl(first)}, uint32_t(XDP_DROP));
  Bytes icmp = buildPacket({.protocol = IPPROTO_ICMP, .daddr = first});
  EXPECT_EQ(program.original(icmp).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.active(icmp), program.original(icmp));
}

} // namespace
} // namespace morpheus::testing
