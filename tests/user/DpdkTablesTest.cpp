// DPDK's own tables behind the user-space table API (backend/user/
// DpdkTables): rte_lpm answers as our LPM kinds and a brute-force longest
// match for random and nested prefixes at every length, at every bound and
// its neighbours, through inserts, value changes and deletes; the snapshot
// the core reads (TableSet::read, the rules as given) answers what rte_lpm
// answers; rte_hash answers as our hash table through present and absent
// keys, updates and deletes up to full. In the DPDK test binary: these
// tables and the ports share the process's one EAL (backend/user/Eal.h).
#include "LpmProbe.h"
#include "UserRouter.h"
#include "backend/user/TableSet.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <cstring>
#include <map>
#include <random>

namespace morpheus::user {
namespace {

using testing::addressesAround;
using testing::longestMatch;
using testing::lpmKey;
using testing::nestedRoutes;
using testing::Route;

std::unique_ptr<Table> make(mu_table_kind kind, uint32_t keySize, uint32_t valueSize,
                            uint32_t maxEntries) {
  auto table = makeTable("t", {uint32_t(kind), keySize, valueSize, maxEntries});
  EXPECT_TRUE(bool(table)) << (table ? "" : toString(table.takeError()));
  return table ? std::move(*table) : nullptr;
}

// What `table` answers for `address` (a full-length key): the value, or
// nullopt.
std::optional<uint32_t> answer(Table &table, uint32_t address) {
  Bytes key = lpmKey(32, address);
  auto *value = static_cast<const uint32_t *>(table.lookup(key.data()));
  return value ? std::optional<uint32_t>(*value) : std::nullopt;
}

// The routes a table's entries (forEach: what the snapshot reads) hold.
std::vector<Route> routesIn(const Table &table) {
  std::vector<Route> routes;
  table.forEach([&](const Bytes &key, const void *value) {
    Route route;
    std::memcpy(&route.length, key.data(), 4);
    route.address = (uint32_t(key[4]) << 24) | (uint32_t(key[5]) << 16) |
                    (uint32_t(key[6]) << 8) | key[7];
    std::memcpy(&route.value, value, 4);
    routes.push_back(route);
    return true;
  });
  return routes;
}

// The three LPM kinds over the same rules: every bound of every rule and
// its neighbours (and random addresses) answer as the brute-force longest
// match over `routes`, and as the longest match over what each table's
// snapshot lists; the entries listed are the rules given, in one order.
void expectAllAnswerAsTheLongestMatch(const std::vector<Table *> &tables,
                                      const std::vector<Route> &routes, const char *when) {
  std::vector<Route> listed = routesIn(*tables.front());
  ASSERT_EQ(listed.size(), routes.size()) << when;
  for (Table *table : tables) {
    ASSERT_EQ(table->size(), routes.size()) << table->info().typeName << " " << when;
    std::vector<Route> own = routesIn(*table);
    ASSERT_EQ(own.size(), listed.size());
    for (size_t i = 0; i < own.size(); ++i)
      ASSERT_TRUE(own[i].length == listed[i].length && own[i].address == listed[i].address &&
                  own[i].value == listed[i].value)
          << table->info().typeName << " entry " << i << " " << when;
  }
  for (uint32_t address : addressesAround(routes)) {
    std::optional<uint32_t> expected = longestMatch(routes, address);
    ASSERT_EQ(longestMatch(listed, address), expected) << std::hex << address << " " << when;
    for (Table *table : tables)
      ASSERT_EQ(answer(*table, address), expected)
          << table->info().typeName << " address " << std::hex << address << " " << when;
  }
}

// Nested prefixes at every length 0..32 and disjoint ones, then random
// prefixes around a few bases (so they nest and overlap), values changed
// and rules deleted, the /0 rule among them: rte_lpm (which has no /0 of
// its own) answers as linear, DIR-24-8 and the longest match after every
// step batch.
TEST(UserDpdkTables, RteLpmAnswersAsTheOtherLpmKindsAndTheLongestMatch) {
  auto rte = make(MU_LPM_RTE, 8, 4, 512), dir24 = make(MU_LPM_DIR24, 8, 4, 512),
       linear = make(MU_LPM_LINEAR, 8, 4, 512);
  ASSERT_TRUE(rte && dir24 && linear);
  EXPECT_EQ(rte->info().typeName, "lpm_rte");
  EXPECT_EQ(rte->info().match, core::TableMatch::LongestPrefix);
  std::vector<Table *> tables = {rte.get(), dir24.get(), linear.get()};
  std::map<std::pair<uint32_t, uint32_t>, uint32_t> rules; // (length, first) -> value
  auto routes = [&] {
    std::vector<Route> all;
    for (const auto &[prefix, value] : rules)
      all.push_back({prefix.first, prefix.second, value});
    return all;
  };
  auto store = [&](const Route &route) {
    Bytes key = lpmKey(route.length, route.address); // bits beyond the length set too
    for (Table *table : tables)
      ASSERT_TRUE(table->update(key.data(), &route.value)) << table->info().typeName;
    rules[{route.length, route.first()}] = route.value;
  };
  auto erase = [&](uint32_t length, uint32_t first) {
    Bytes key = lpmKey(length, first);
    for (Table *table : tables)
      ASSERT_TRUE(table->remove(key.data())) << table->info().typeName;
    rules.erase({length, first});
  };

  for (const Route &route : nestedRoutes())
    store(route);
  expectAllAnswerAsTheLongestMatch(tables, routes(), "nested");
  // Withdraw every other nested length (the /0 included): their addresses
  // fall back to the next shorter rule.
  for (uint32_t length = 0; length <= 32; length += 2)
    erase(length, Route{length, 0x0a0b0c0d, 0}.first());
  expectAllAnswerAsTheLongestMatch(tables, routes(), "every other length withdrawn");

  std::mt19937 random(23);
  const uint32_t bases[] = {0x0a000000, 0x0a0b0c00, 0xc0a80100, 0xac100000, 0xffffff00};
  for (int step = 0; step < 600; ++step) {
    if (step % 4 == 3 && !rules.empty()) {
      auto victim = std::next(rules.begin(), random() % rules.size());
      erase(victim->first.first, victim->first.second);
    } else if (step % 7 == 6 && !rules.empty()) { // a new value for a known rule
      auto known = std::next(rules.begin(), random() % rules.size());
      store({known->first.first, known->first.second, uint32_t(random())});
    } else if (rules.size() < 500) {
      uint32_t length = random() % 33;
      store({length, uint32_t(bases[random() % 5] + random() % 8192), uint32_t(random())});
    }
    if (step % 50 == 49)
      expectAllAnswerAsTheLongestMatch(tables, routes(), "random");
  }
  // Everything withdrawn: nothing answers.
  while (!rules.empty())
    erase(rules.begin()->first.first, rules.begin()->first.second);
  expectAllAnswerAsTheLongestMatch(tables, routes(), "all withdrawn");
  EXPECT_EQ(answer(*rte, 0x0a0b0c0d), std::nullopt);
}

TEST(UserDpdkTables, RteLpmRefusesWhatItCannotHold) {
  auto table = make(MU_LPM_RTE, 8, 4, 2);
  ASSERT_TRUE(table);
  uint32_t value = 1;
  EXPECT_FALSE(table->update(lpmKey(33, 0x0a000000).data(), &value));
  EXPECT_TRUE(table->update(lpmKey(8, 0x0a000000).data(), &value));
  EXPECT_TRUE(table->update(lpmKey(0, 0).data(), &value));
  EXPECT_FALSE(table->update(lpmKey(16, 0x0a0a0000).data(), &value)); // full
  EXPECT_TRUE(table->update(lpmKey(8, 0x0a000000).data(), &value));   // known: a new value
  EXPECT_FALSE(table->remove(lpmKey(16, 0x0a0a0000).data()));
  EXPECT_EQ(table->size(), 2u);
  auto wrongKey = makeTable("routes", {MU_LPM_RTE, 20, 4, 4});
  ASSERT_FALSE(bool(wrongKey));
  EXPECT_NE(toString(wrongKey.takeError()).find("routes"), std::string::npos);
}

// The snapshot the core specializes from (TableSet::read, the probe
// handler's routes on rte_lpm read whole, and probed keys) lists the rules
// given, and its longest match is what the table answers.
TEST(UserDpdkTables, TheSnapshotOfAnRteLpmAnswersAsTheTable) {
  HandlerOptions options;
  options.cflags = {"-DLPM_KIND=MU_LPM_RTE"};
  auto probe = testing::loadLpmProbe(options);
  ASSERT_TRUE(probe);
  std::vector<Route> routes = nestedRoutes();
  for (const Route &route : routes)
    ASSERT_THAT_ERROR(probe->tables().update("routes", lpmKey(route.length, route.first()),
                                             testing::bytesOfValue<uint32_t>(route.value)),
                      llvm::Succeeded());
  Table *table = probe->tables().find("routes");
  ASSERT_TRUE(table);
  EXPECT_EQ(table->kind(), MU_LPM_RTE);
  core::ReadPlan plan;
  plan["routes"].wholeTableLimit = 4096;
  auto snapshot = probe->tables().read(plan);
  ASSERT_THAT_EXPECTED(snapshot, llvm::Succeeded());
  const core::TableContents &contents = snapshot->at("routes");
  ASSERT_TRUE(contents.complete);
  ASSERT_EQ(contents.entries.size(), routes.size());
  std::vector<Route> listed;
  for (const core::TableEntry &entry : contents.entries) {
    ASSERT_TRUE(entry.value && entry.value->size() == 4);
    Route route;
    std::memcpy(&route.length, entry.key.data(), 4);
    route.address = (uint32_t(entry.key[4]) << 24) | (uint32_t(entry.key[5]) << 16) |
                    (uint32_t(entry.key[6]) << 8) | entry.key[7];
    std::memcpy(&route.value, entry.value->data(), 4);
    listed.push_back(route);
  }
  for (uint32_t address : addressesAround(routes)) {
    EXPECT_EQ(longestMatch(listed, address), answer(*table, address)) << std::hex << address;
    EXPECT_EQ(longestMatch(routes, address), answer(*table, address)) << std::hex << address;
  }
}

// rte_hash against our hash table and a map: random inserts, new values,
// deletes of present and absent keys, refused inserts when full; every key
// present or absent answers alike, values stay where a lookup found them
// while other keys come and go, and both list the same entries.
TEST(UserDpdkTables, RteHashAnswersAsOurHashTable) {
  auto rte = make(MU_HASH_RTE, 12, 8, 100), ours = make(MU_HASH, 12, 8, 100);
  ASSERT_TRUE(rte && ours);
  EXPECT_EQ(rte->info().typeName, "rte_hash");
  EXPECT_EQ(rte->info().match, core::TableMatch::Exact);
  std::map<Bytes, uint64_t> reference;
  std::mt19937 random(5);
  auto keyOf = [](uint32_t n) {
    Bytes key(12, 0);
    std::memcpy(key.data(), &n, 4);
    key[8] = uint8_t(n * 7); // bytes past the first word matter
    return key;
  };
  Bytes pinnedKey = keyOf(1000);
  uint64_t pinnedValue = 77;
  ASSERT_TRUE(rte->update(pinnedKey.data(), &pinnedValue));
  ASSERT_TRUE(ours->update(pinnedKey.data(), &pinnedValue));
  reference[pinnedKey] = pinnedValue;
  void *pinned = rte->lookup(pinnedKey.data());
  for (int step = 0; step < 6000; ++step) {
    Bytes key = keyOf(random() % 300);
    if (random() % 3 == 0) {
      bool present = reference.erase(key) == 1;
      EXPECT_EQ(rte->remove(key.data()), present);
      EXPECT_EQ(ours->remove(key.data()), present);
    } else {
      uint64_t value = random();
      bool room = reference.count(key) || reference.size() < 100;
      EXPECT_EQ(rte->update(key.data(), &value), room) << step;
      EXPECT_EQ(ours->update(key.data(), &value), room) << step;
      if (room)
        reference[key] = value;
    }
    ASSERT_EQ(rte->size(), reference.size());
    ASSERT_EQ(ours->size(), reference.size());
  }
  EXPECT_EQ(rte->lookup(pinnedKey.data()), pinned); // never deleted: never moved
  for (uint32_t n = 0; n < 300; ++n) {
    Bytes key = keyOf(n);
    auto *value = static_cast<const uint64_t *>(rte->lookup(key.data()));
    auto *own = static_cast<const uint64_t *>(ours->lookup(key.data()));
    auto expected = reference.find(key);
    ASSERT_EQ(value != nullptr, expected != reference.end()) << n;
    ASSERT_EQ(own != nullptr, expected != reference.end()) << n;
    if (value) {
      EXPECT_EQ(*value, expected->second) << n;
      EXPECT_EQ(*own, expected->second) << n;
    }
  }
  auto entries = [](const Table &table) {
    std::map<Bytes, uint64_t> all;
    table.forEach([&](const Bytes &key, const void *value) {
      uint64_t v;
      std::memcpy(&v, value, 8);
      all[key] = v;
      return true;
    });
    return all;
  };
  EXPECT_EQ(entries(*rte), reference);
  EXPECT_EQ(entries(*ours), reference);
}

} // namespace
} // namespace morpheus::user
