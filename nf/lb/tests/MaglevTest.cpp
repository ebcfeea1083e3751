// The Maglev table builder on its own: balance, minimal disruption,
// weights, and independence from input order.
#include "Maglev.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>

extern "C" {
#include "lb.h"
}

namespace morpheus::nf::lb {
namespace {

std::vector<MaglevBackend> backends(uint32_t count, uint32_t firstAddress = 0x0a010001) {
  std::vector<MaglevBackend> list;
  for (uint32_t i = 0; i < count; ++i)
    list.push_back({i + 1, firstAddress + i, 1});
  return list;
}

std::map<uint32_t, uint32_t> shares(const std::vector<uint32_t> &table) {
  std::map<uint32_t, uint32_t> count;
  for (uint32_t id : table)
    ++count[id];
  return count;
}

TEST(Maglev, EveryBackendGetsAboutAnEqualShare) {
  for (uint32_t n : {3u, 10u, 100u}) {
    SCOPED_TRACE(std::to_string(n) + " backends");
    std::vector<uint32_t> table = buildMaglevTable(backends(n), LB_RING_SIZE);
    ASSERT_EQ(table.size(), LB_RING_SIZE);
    auto count = shares(table);
    ASSERT_EQ(count.size(), n);
    EXPECT_FALSE(count.count(0)) << "every slot is filled";
    double fair = double(LB_RING_SIZE) / n;
    for (auto [id, slots] : count) {
      // Round-robin turns bound the spread by one slot per backend.
      EXPECT_GE(slots, fair - 1) << "backend " << id;
      EXPECT_LE(slots, fair + 1) << "backend " << id;
    }
  }
}

TEST(Maglev, RemovingOneBackendMovesMostlyItsOwnSlots) {
  const uint32_t n = 100;
  std::vector<MaglevBackend> all = backends(n);
  std::vector<uint32_t> before = buildMaglevTable(all, LB_RING_SIZE);
  const uint32_t removed = 42;
  std::erase_if(all, [&](const MaglevBackend &b) { return b.id == removed; });
  std::vector<uint32_t> after = buildMaglevTable(all, LB_RING_SIZE);

  uint32_t itsSlots = 0, othersMoved = 0;
  for (uint32_t slot = 0; slot < LB_RING_SIZE; ++slot) {
    if (before[slot] == removed) {
      ++itsSlots;
      EXPECT_NE(after[slot], removed);
    } else if (after[slot] != before[slot]) {
      ++othersMoved;
    }
  }
  EXPECT_NEAR(itsSlots, double(LB_RING_SIZE) / n, 1);
  // Maglev trades a little disruption for balance (here ~0.6% of the table
  // moves between survivors); a naive modulo table would move ~99%.
  EXPECT_LT(othersMoved, itsSlots) << "slots of other backends that moved";
  EXPECT_LT(othersMoved, LB_RING_SIZE / 100) << "slots of other backends that moved";
  // What moved is spread over the survivors, not dumped on one of them.
  auto count = shares(after);
  for (auto [id, slots] : count)
    EXPECT_LE(slots, double(LB_RING_SIZE) / (n - 1) + 1) << "backend " << id;
}

TEST(Maglev, AddingOneBackendTakesSlotsFromEveryoneAndMovesLittleElse) {
  std::vector<MaglevBackend> all = backends(10);
  std::vector<uint32_t> before = buildMaglevTable(all, LB_RING_SIZE);
  all.push_back({11, 0x0a0100ff, 1});
  std::vector<uint32_t> after = buildMaglevTable(all, LB_RING_SIZE);
  uint32_t toNew = 0, elsewhere = 0;
  for (uint32_t slot = 0; slot < LB_RING_SIZE; ++slot) {
    if (after[slot] == 11)
      ++toNew;
    else if (after[slot] != before[slot])
      ++elsewhere;
  }
  EXPECT_NEAR(toNew, LB_RING_SIZE / 11.0, 1);
  EXPECT_LT(elsewhere, LB_RING_SIZE / 100);
}

TEST(Maglev, WeightsSetTheShares) {
  std::vector<MaglevBackend> list = {
      {1, 0x0a000001, 1}, {2, 0x0a000002, 2}, {3, 0x0a000003, 1}, {4, 0x0a000004, 0}};
  auto count = shares(buildMaglevTable(list, LB_RING_SIZE));
  EXPECT_FALSE(count.count(4)) << "weight 0 gets no slot";
  EXPECT_NEAR(count[1], LB_RING_SIZE / 4.0, 2);
  EXPECT_NEAR(count[2], LB_RING_SIZE / 2.0, 2);
  EXPECT_NEAR(count[3], LB_RING_SIZE / 4.0, 2);
}

TEST(Maglev, NoWeightedBackendLeavesEverySlotEmpty) {
  std::vector<uint32_t> table = buildMaglevTable({{1, 0x0a000001, 0}}, LB_RING_SIZE);
  EXPECT_EQ(std::count(table.begin(), table.end(), 0u), LB_RING_SIZE);
  table = buildMaglevTable({}, 7);
  EXPECT_EQ(table, std::vector<uint32_t>(7, 0));
}

TEST(Maglev, DependsOnTheSetNotTheOrderAndSlotsFollowTheKey) {
  std::vector<MaglevBackend> list = backends(20);
  std::vector<uint32_t> table = buildMaglevTable(list, LB_RING_SIZE);
  std::reverse(list.begin(), list.end());
  EXPECT_EQ(buildMaglevTable(list, LB_RING_SIZE), table);
  // Renumbering (other real indexes) renames slots but moves none.
  for (MaglevBackend &backend : list)
    backend.id += 1000;
  std::vector<uint32_t> renamed = buildMaglevTable(list, LB_RING_SIZE);
  for (uint32_t slot = 0; slot < LB_RING_SIZE; ++slot)
    ASSERT_EQ(renamed[slot], table[slot] + 1000) << "slot " << slot;
}

TEST(Maglev, EachBackendWalksAFullPermutation) {
  // With one backend every slot is its own; on a small prime table the
  // walk must still visit every slot exactly once.
  std::vector<uint32_t> table = buildMaglevTable({{9, 0x0a000009, 1}}, 13);
  EXPECT_EQ(std::count(table.begin(), table.end(), 9u), 13);
  auto count = shares(buildMaglevTable(backends(5), 13));
  for (auto [id, slots] : count)
    EXPECT_TRUE(slots == 2 || slots == 3) << "backend " << id << ": " << slots;
}

} // namespace
} // namespace morpheus::nf::lb
