// The user-space tables (backend/user/Table, DpdkTables) against the
// kernel's own maps: each kind and a kernel map of the type whose semantics
// it claims (LPM kinds: BPF_MAP_TYPE_LPM_TRIE; hash: HASH; array: ARRAY)
// get the same changes, must accept and refuse the same ones, and must
// answer every lookup alike: for a trie, keys of every prefix length from
// 0 past the address's width (and lengths far beyond it), around every
// stored prefix and at random. The kernel's lookup from user space is the
// one programs call (the map's map_lookup_elem). Its own binary: it needs
// root, and with DPDK the EAL (once per process).
#include "LpmProbe.h"
#include "backend/user/Table.h"
#include "support/Bytes.h"

#include <gtest/gtest.h>

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cstring>
#include <map>
#include <random>

namespace morpheus::user {
namespace {

// A kernel map of `type`, closed when the test ends.
class KernelMap {
public:
  KernelMap(bpf_map_type type, uint32_t keySize, uint32_t valueSize, uint32_t maxEntries) {
    LIBBPF_OPTS(bpf_map_create_opts, options,
                .map_flags = type == BPF_MAP_TYPE_LPM_TRIE ? uint32_t(BPF_F_NO_PREALLOC) : 0u);
    fd = bpf_map_create(type, "semantics", keySize, valueSize, maxEntries, &options);
    EXPECT_GE(fd, 0) << "bpf_map_create: " << std::strerror(errno);
  }
  ~KernelMap() {
    if (fd >= 0)
      close(fd);
  }
  KernelMap(const KernelMap &) = delete;
  KernelMap &operator=(const KernelMap &) = delete;

  bool update(const Bytes &key, const Bytes &value) {
    return bpf_map_update_elem(fd, key.data(), value.data(), BPF_ANY) == 0;
  }
  bool remove(const Bytes &key) { return bpf_map_delete_elem(fd, key.data()) == 0; }
  std::optional<Bytes> lookup(const Bytes &key, uint32_t valueSize) {
    Bytes value(valueSize);
    if (bpf_map_lookup_elem(fd, key.data(), value.data()))
      return std::nullopt;
    return value;
  }

  int fd = -1;
};

std::unique_ptr<Table> userTable(const std::string &kindName, uint32_t keySize,
                                 uint32_t valueSize, uint32_t maxEntries) {
  static const std::map<std::string, mu_table_kind> kinds = {
      {"MU_LPM_DIR24", MU_LPM_DIR24}, {"MU_LPM_LINEAR", MU_LPM_LINEAR},
      {"MU_LPM_RTE", MU_LPM_RTE},     {"MU_HASH", MU_HASH},
      {"MU_HASH_RTE", MU_HASH_RTE},   {"MU_ARRAY", MU_ARRAY}};
  auto table = makeTable("t", {uint32_t(kinds.at(kindName)), keySize, valueSize, maxEntries});
  EXPECT_TRUE(bool(table)) << (table ? "" : toString(table.takeError()));
  return table ? std::move(*table) : nullptr;
}

// Both answer `key` alike: both nothing, or both the same value bytes.
::testing::AssertionResult sameAnswer(Table &user, KernelMap &kernel, const Bytes &key) {
  uint32_t valueSize = user.info().valueSize;
  auto *value = static_cast<const uint8_t *>(user.lookup(key.data()));
  std::optional<Bytes> expected = kernel.lookup(key, valueSize);
  if (bool(value) != expected.has_value())
    return ::testing::AssertionFailure()
           << "key " << toHex(key) << ": the kernel " << (expected ? "finds" : "has nothing")
           << ", the user table " << (value ? "finds" : "has nothing");
  if (value && Bytes(value, value + valueSize) != *expected)
    return ::testing::AssertionFailure() << "key " << toHex(key) << ": the kernel answers "
                                         << toHex(*expected) << ", the user table "
                                         << toHex(Bytes(value, value + valueSize));
  return ::testing::AssertionSuccess();
}

// { prefix length (host order), address bytes }.
Bytes trieKey(uint32_t length, const Bytes &address) {
  Bytes key(4 + address.size());
  std::memcpy(key.data(), &length, 4);
  std::copy(address.begin(), address.end(), key.begin() + 4);
  return key;
}

struct TrieShape {
  std::string kind;
  uint32_t addressBytes;

  friend std::ostream &operator<<(std::ostream &out, const TrieShape &shape) {
    return out << shape.kind << ", " << shape.addressBytes * 8 << "-bit addresses";
  }
};

std::vector<TrieShape> trieShapes() {
  std::vector<TrieShape> shapes;
  for (const std::string &kind : testing::lpmKinds())
    shapes.push_back({kind, 4});
  // The linear kind takes any address width the kernel's trie does: one
  // byte, an odd width, IPv6.
  for (uint32_t width : {1u, 3u, 16u})
    shapes.push_back({"MU_LPM_LINEAR", width});
  return shapes;
}

class TrieSemantics : public ::testing::TestWithParam<TrieShape> {};

// The same random changes to both (prefixes of every length, nested around
// a few bases, stored with their host bits set or not, the /0 prefix,
// lengths beyond the address, deletes by a key with other host bits,
// replacements when full), then every prefix length 0..width+2 and far
// beyond at addresses inside, beside and outside each stored prefix.
TEST_P(TrieSemantics, EveryKeyIsAnsweredAsTheKernelsTrie) {
  const TrieShape shape = GetParam();
  const uint32_t bits = shape.addressBytes * 8, valueSize = 4, maxEntries = 48;
  auto user = userTable(shape.kind, 4 + shape.addressBytes, valueSize, maxEntries);
  ASSERT_TRUE(user);
  KernelMap kernel(BPF_MAP_TYPE_LPM_TRIE, 4 + shape.addressBytes, valueSize, maxEntries);
  ASSERT_GE(kernel.fd, 0);

  std::mt19937 random(30);
  std::vector<Bytes> bases(3);
  for (Bytes &base : bases)
    for (uint32_t i = 0; i < shape.addressBytes; ++i)
      base.push_back(uint8_t(random()));
  // An address near a base: its leading bytes, random trailing bits.
  auto nearBase = [&] {
    Bytes address = bases[random() % bases.size()];
    uint32_t keep = random() % (bits + 1);
    for (uint32_t bit = keep; bit < bits; ++bit)
      if (random() % 2)
        address[bit / 8] ^= uint8_t(0x80u >> (bit % 8));
    return address;
  };
  auto randomValue = [&] {
    Bytes value(valueSize);
    for (uint8_t &byte : value)
      byte = uint8_t(random());
    return value;
  };
  // The prefixes stored, by (length, address bits beyond it cleared), with
  // the key each was written with (host bits and all).
  std::map<std::pair<uint32_t, Bytes>, Bytes> stored;
  auto prefixOf = [&](const Bytes &key) {
    uint32_t length;
    std::memcpy(&length, key.data(), 4);
    Bytes address(key.begin() + 4, key.end());
    for (uint32_t bit = length; bit < bits; ++bit)
      address[bit / 8] &= uint8_t(~(0x80u >> (bit % 8)));
    return std::pair(length, address);
  };
  auto check = [&](const std::string &when) {
    std::vector<Bytes> addresses;
    for (const auto &[prefix, key] : stored) {
      Bytes address(key.begin() + 4, key.end());
      addresses.push_back(address);
      for (uint32_t bit : {0u, bits / 2, bits - 1}) { // a neighbour a bit away
        Bytes flipped = address;
        flipped[bit / 8] ^= uint8_t(0x80u >> (bit % 8));
        addresses.push_back(flipped);
      }
    }
    for (int i = 0; i < 40; ++i)
      addresses.push_back(nearBase());
    addresses.push_back(Bytes(shape.addressBytes, 0));
    addresses.push_back(Bytes(shape.addressBytes, 0xff));
    std::vector<uint32_t> lengths;
    for (uint32_t length = 0; length <= bits + 2; ++length)
      lengths.push_back(length);
    for (uint32_t length : {bits + 8, 255u, 256u, 0x80000000u, 0xffffffffu})
      lengths.push_back(length);
    unsigned found = 0;
    for (const Bytes &address : addresses)
      for (uint32_t length : lengths) {
        Bytes key = trieKey(length, address);
        ASSERT_TRUE(sameAnswer(*user, kernel, key)) << when;
        found += user->lookup(key.data()) != nullptr;
      }
    EXPECT_GT(found, 0u) << when << ": some keys must find a prefix";
  };

  for (int step = 0; step < 240; ++step) {
    if ((step % 4 == 3 || stored.size() == maxEntries) && !stored.empty()) {
      // A stored prefix deleted by a key with other host bits (the trie
      // deletes by prefix); deleting it again fails in both.
      Bytes victim = std::next(stored.begin(), random() % stored.size())->second;
      uint32_t length = prefixOf(victim).first;
      if (length < bits)
        victim[4 + (bits - 1) / 8] ^= uint8_t(0x80u >> ((bits - 1) % 8));
      ASSERT_TRUE(kernel.remove(victim)) << "premise: delete " << toHex(victim);
      EXPECT_TRUE(user->remove(victim.data())) << "delete " << toHex(victim);
      EXPECT_FALSE(kernel.remove(victim)) << "premise: delete again";
      EXPECT_FALSE(user->remove(victim.data())) << "delete again " << toHex(victim);
      stored.erase(prefixOf(victim));
    } else {
      uint32_t length = step % 17 == 0 ? 0 : step % 13 == 0 ? bits : random() % (bits + 1);
      if (step % 31 == 7)
        length = bits + 1 + random() % 3; // beyond the address: both refuse it
      Bytes key = trieKey(length, nearBase()); // host bits as they come
      Bytes value = randomValue();
      bool accepted = kernel.update(key, value);
      ASSERT_EQ(user->update(key.data(), value.data()), accepted) << "update " << toHex(key);
      if (accepted)
        stored.try_emplace(prefixOf(key), key);
    }
    ASSERT_EQ(user->size(), stored.size());
    if (step % 40 == 39)
      check("after step " + std::to_string(step));
  }
  // Full: replacing a stored prefix's value is accepted by both, a new
  // prefix refused by both.
  while (stored.size() < maxEntries) {
    Bytes key = trieKey(random() % (bits + 1), nearBase());
    Bytes value = randomValue();
    bool accepted = kernel.update(key, value);
    ASSERT_EQ(user->update(key.data(), value.data()), accepted) << "fill " << toHex(key);
    if (accepted)
      stored.try_emplace(prefixOf(key), key);
  }
  ASSERT_EQ(user->size(), size_t(maxEntries));
  Bytes fresh;
  do
    fresh = trieKey(random() % (bits + 1), nearBase());
  while (stored.count(prefixOf(fresh)));
  Bytes value = randomValue();
  EXPECT_FALSE(kernel.update(fresh, value)) << "premise: a new prefix when full";
  EXPECT_FALSE(user->update(fresh.data(), value.data())) << "a new prefix when full";
  ASSERT_TRUE(kernel.update(stored.begin()->second, value)) << "premise: a replacement when full";
  EXPECT_TRUE(user->update(stored.begin()->second.data(), value.data()));
  check("full, a value replaced");
}

INSTANTIATE_TEST_SUITE_P(EveryLpmKind, TrieSemantics, ::testing::ValuesIn(trieShapes()),
                         [](const ::testing::TestParamInfo<TrieShape> &info) {
                           return testing::lpmKindTestName(info.param.kind) + "Address" +
                                  std::to_string(info.param.addressBytes * 8);
                         });

std::vector<std::string> hashKinds() {
#ifdef MORPHEUS_WITH_DPDK
  return {"MU_HASH", "MU_HASH_RTE"};
#else
  return {"MU_HASH"};
#endif
}

class HashSemantics : public ::testing::TestWithParam<std::string> {};

// Inserts, replacements, deletes (of present and absent keys), a full
// table taking replacements but no new key; every key of the domain
// looked up after each round.
TEST_P(HashSemantics, EveryKeyIsAnsweredAsTheKernelsHash) {
  const uint32_t keySize = 6, valueSize = 8, maxEntries = 32;
  auto user = userTable(GetParam(), keySize, valueSize, maxEntries);
  ASSERT_TRUE(user);
  KernelMap kernel(BPF_MAP_TYPE_HASH, keySize, valueSize, maxEntries);
  ASSERT_GE(kernel.fd, 0);
  std::mt19937 random(30);
  auto keyOf = [&](uint32_t index) {
    Bytes key(keySize, 0);
    std::memcpy(key.data(), &index, 4);
    key[5] = uint8_t(index * 7); // a byte beyond the index: the whole key counts
    return key;
  };
  for (int round = 0; round < 8; ++round) {
    for (int step = 0; step < 40; ++step) {
      Bytes key = keyOf(random() % 64);
      if (random() % 3 == 0) {
        bool removed = kernel.remove(key);
        ASSERT_EQ(user->remove(key.data()), removed) << "delete " << toHex(key);
      } else {
        Bytes value(valueSize);
        for (uint8_t &byte : value)
          byte = uint8_t(random());
        bool accepted = kernel.update(key, value);
        ASSERT_EQ(user->update(key.data(), value.data()), accepted) << "update " << toHex(key);
      }
    }
    for (uint32_t index = 0; index < 64; ++index) {
      ASSERT_TRUE(sameAnswer(*user, kernel, keyOf(index))) << "round " << round;
      Bytes other = keyOf(index);
      other[4] ^= 1; // differs from every stored key in one byte
      ASSERT_TRUE(sameAnswer(*user, kernel, other)) << "round " << round;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(EveryHashKind, HashSemantics, ::testing::ValuesIn(hashKinds()),
                         [](const ::testing::TestParamInfo<std::string> &info) {
                           return info.param == "MU_HASH" ? std::string("Hash")
                                                          : std::string("RteHash");
                         });

// Every slot exists (zeroed) below max_entries and none at or beyond it,
// whatever the high bits of the index; updates beyond are refused, and
// deletes always.
TEST(ArraySemantics, EveryIndexIsAnsweredAsTheKernelsArray) {
  const uint32_t valueSize = 12, maxEntries = 10;
  auto user = userTable("MU_ARRAY", 4, valueSize, maxEntries);
  ASSERT_TRUE(user);
  KernelMap kernel(BPF_MAP_TYPE_ARRAY, 4, valueSize, maxEntries);
  ASSERT_GE(kernel.fd, 0);
  std::vector<uint32_t> indexes;
  for (uint32_t index = 0; index < maxEntries + 3; ++index)
    indexes.push_back(index);
  for (uint32_t index : {0x100u, 0x10000u, 0x80000000u, 0xffffffffu, 0xfffffffau})
    indexes.push_back(index);
  Bytes value(valueSize, 0x5a);
  for (uint32_t index : indexes) {
    Bytes key = bytesOf(index);
    ASSERT_TRUE(sameAnswer(*user, kernel, key)) << "before any update";
    bool accepted = kernel.update(key, value);
    EXPECT_EQ(user->update(key.data(), value.data()), accepted) << "update " << index;
    EXPECT_EQ(user->remove(key.data()), kernel.remove(key)) << "delete " << index;
    ASSERT_TRUE(sameAnswer(*user, kernel, key)) << "after an update";
  }
}

} // namespace
} // namespace morpheus::user
