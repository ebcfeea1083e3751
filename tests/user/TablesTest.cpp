// The user-space tables (backend/user/Table): each kind against a plain
// reference model, both LPM implementations against a brute-force longest
// match, and the snapshot they give the core.
#include "LpmProbe.h"
#include "backend/user/TableSet.h"

#include <gtest/gtest.h>

#include <cstring>
#include <map>
#include <random>

namespace morpheus::user {
namespace {

std::unique_ptr<Table> make(mu_table_kind kind, uint32_t keySize, uint32_t valueSize,
                            uint32_t maxEntries) {
  auto table = makeTable("t", {uint32_t(kind), keySize, valueSize, maxEntries});
  EXPECT_TRUE(bool(table)) << (table ? "" : toString(table.takeError()));
  return table ? std::move(*table) : nullptr;
}

using testing::lpmKey;

TEST(UserTables, HashTableIsAMapUntilFull) {
  auto table = make(MU_HASH, 4, 8, 100);
  std::map<uint32_t, uint64_t> reference;
  std::mt19937 random(7);
  for (int step = 0; step < 5000; ++step) {
    uint32_t key = random() % 300;
    if (random() % 3 == 0) {
      EXPECT_EQ(table->remove(&key), reference.erase(key) == 1) << "key " << key;
    } else {
      uint64_t value = random();
      bool room = reference.count(key) || reference.size() < 100;
      EXPECT_EQ(table->update(&key, &value), room) << "key " << key;
      if (room)
        reference[key] = value;
    }
    ASSERT_EQ(table->size(), reference.size());
  }
  for (uint32_t key = 0; key < 300; ++key) {
    auto *value = static_cast<uint64_t *>(table->lookup(&key));
    auto expected = reference.find(key);
    ASSERT_EQ(value != nullptr, expected != reference.end()) << "key " << key;
    if (value) {
      EXPECT_EQ(*value, expected->second) << "key " << key;
    }
  }
}

TEST(UserTables, ArraySlotsAlwaysExistAndStartZeroed) {
  auto table = make(MU_ARRAY, 4, 4, 8);
  uint32_t index = 3, value = 42, outside = 8;
  EXPECT_EQ(*static_cast<uint32_t *>(table->lookup(&index)), 0u);
  EXPECT_TRUE(table->update(&index, &value));
  EXPECT_EQ(*static_cast<uint32_t *>(table->lookup(&index)), 42u);
  EXPECT_EQ(table->lookup(&outside), nullptr);
  EXPECT_FALSE(table->update(&outside, &value));
  EXPECT_FALSE(table->remove(&index));
  EXPECT_EQ(table->size(), 8u);
}

// Both LPM kinds give, for every address, the value of the longest rule
// that covers it, through inserts and deletes (prefixes of every length,
// nested ones included).
TEST(UserTables, LinearAndDir24AgreeWithTheLongestMatch) {
  auto linear = make(MU_LPM_LINEAR, 8, 4, 512);
  auto dir24 = make(MU_LPM_DIR24, 8, 4, 512);
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> rules; // (length, address) -> value
  std::mt19937 random(11);
  auto masked = [](uint32_t address, uint32_t length) {
    return length ? address & ~uint32_t((uint64_t(1) << (32 - length)) - 1) : 0;
  };
  // Addresses near a few bases, so rules nest and overlap.
  const uint32_t bases[] = {0x0a000000, 0x0a0a0a00, 0xc0a80100, 0xac100000};
  auto address = [&] { return bases[random() % 4] + (random() % 4096); };
  for (int step = 0; step < 400; ++step) {
    uint32_t length = random() % 33;
    uint32_t prefix = masked(address(), length);
    Bytes key = lpmKey(length, prefix);
    if (step % 5 == 4 && !rules.empty()) {
      auto victim = std::next(rules.begin(), random() % rules.size());
      Bytes victimKey = lpmKey(victim->first.first, victim->first.second);
      EXPECT_TRUE(linear->remove(victimKey.data()));
      EXPECT_TRUE(dir24->remove(victimKey.data()));
      rules.erase(victim);
    } else {
      uint32_t value = random();
      ASSERT_TRUE(linear->update(key.data(), &value));
      ASSERT_TRUE(dir24->update(key.data(), &value));
      rules[{length, prefix}] = value;
    }
    if (step % 40 != 39)
      continue;
    for (int probe = 0; probe < 2000; ++probe) {
      uint32_t target = probe % 7 == 0 ? uint32_t(random()) : address();
      std::optional<uint32_t> expected;
      for (int length = 32; length >= 0 && !expected; --length)
        if (auto rule = rules.find({uint32_t(length), masked(target, length)}); rule != rules.end())
          expected = rule->second;
      Bytes query = lpmKey(32, target);
      for (Table *table : {linear.get(), dir24.get()}) {
        auto *value = static_cast<uint32_t *>(table->lookup(query.data()));
        ASSERT_EQ(value != nullptr, expected.has_value())
            << table->info().typeName << " address " << std::hex << target;
        if (value) {
          EXPECT_EQ(*value, *expected)
              << table->info().typeName << " address " << std::hex << target;
        }
      }
    }
  }
  EXPECT_EQ(linear->size(), rules.size());
  EXPECT_EQ(dir24->size(), rules.size());
}

TEST(UserTables, LpmRefusesAPrefixLongerThanTheAddress) {
  auto table = make(MU_LPM_LINEAR, 8, 4, 4);
  Bytes key = lpmKey(33, 0x0a000000);
  uint32_t value = 1;
  EXPECT_FALSE(table->update(key.data(), &value));
}

TEST(UserTables, DefinitionsTheRuntimeCannotMakeAreErrorsNamingTheTable) {
  auto badArray = makeTable("config", {MU_ARRAY, 8, 4, 4});
  ASSERT_FALSE(bool(badArray));
  EXPECT_NE(toString(badArray.takeError()).find("config"), std::string::npos);
  auto badDir24 = makeTable("routes", {MU_LPM_DIR24, 20, 4, 4});
  ASSERT_FALSE(bool(badDir24));
  EXPECT_NE(toString(badDir24.takeError()).find("routes"), std::string::npos);
  auto unknown = makeTable("x", {99, 4, 4, 4});
  EXPECT_FALSE(bool(unknown));
  consumeError(unknown.takeError());
}

#ifndef MORPHEUS_WITH_DPDK
// Built without DPDK (-DMORPHEUS_DPDK=OFF, or no libdpdk): DPDK's table
// kinds are refused at load, naming the table and what is missing.
TEST(UserTables, DpdkKindsAreRefusedWithoutDpdk) {
  for (mu_table_kind kind : {MU_HASH_RTE, MU_LPM_RTE}) {
    auto table = makeTable("routes", {uint32_t(kind), 8, 4, 16});
    ASSERT_FALSE(bool(table));
    std::string message = toString(table.takeError());
    EXPECT_NE(message.find("table 'routes'"), std::string::npos) << message;
    EXPECT_NE(message.find("this build has no DPDK"), std::string::npos) << message;
  }
}
#endif

} // namespace
} // namespace morpheus::user
