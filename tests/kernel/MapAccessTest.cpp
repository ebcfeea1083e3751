// bpf::MapAccess and the map functions beside it, the only way the layers
// above the backend reach libbpf: a missing key is an answer (false,
// nullopt), every other failure an error naming the map; ranges of array
// slots start where asked and stop at the array's end, listed slots are
// read in ranges, batch writes name the key the kernel refused; queues
// give their elements back in order; maps are created as their layout
// says and owned.
#include "backend/bpf/MapAccess.h"
#include "TestMaps.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cstring>
#include <optional>
#include <vector>

namespace morpheus::testing {
namespace {

TEST(MapAccess, AMissingKeyIsAnAnswerAnyOtherFailureAnErrorNamingTheMap) {
  auto created = bpf::createMap(mapLayout("accessed", BPF_MAP_TYPE_HASH, 4, 8, 4));
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  bpf::MapAccess map(created->get(), "accessed");

  auto absent = map.find<uint64_t>(uint32_t(7));
  ASSERT_THAT_EXPECTED(absent, llvm::Succeeded());
  EXPECT_FALSE(*absent) << "no entry yet";
  ASSERT_THAT_ERROR(map.put(uint32_t(7), uint64_t(700)), llvm::Succeeded());
  auto present = map.find<uint64_t>(uint32_t(7));
  ASSERT_THAT_EXPECTED(present, llvm::Succeeded());
  ASSERT_TRUE(*present);
  EXPECT_EQ(**present, 700u) << "the value written";

  auto added = map.insert(byteView(uint32_t(7)), byteView(uint64_t(1)));
  ASSERT_THAT_EXPECTED(added, llvm::Succeeded());
  EXPECT_FALSE(*added) << "insert leaves an existing key alone";
  EXPECT_EQ(**map.find<uint64_t>(uint32_t(7)), 700u) << "and its value";

  auto removed = map.remove(byteView(uint32_t(7)));
  ASSERT_THAT_EXPECTED(removed, llvm::Succeeded());
  EXPECT_TRUE(*removed) << "the key was there";
  auto again = map.remove(byteView(uint32_t(7)));
  ASSERT_THAT_EXPECTED(again, llvm::Succeeded());
  EXPECT_FALSE(*again) << "deleting a missing key says so, no error";

  // Not a map at all: a failure that is not "no such key".
  FileDescriptor notAMap(dup(STDIN_FILENO));
  ASSERT_TRUE(notAMap.valid());
  auto broken = bpf::MapAccess(notAMap.get(), "gone").find<uint64_t>(uint32_t(7));
  ASSERT_FALSE(bool(broken)) << "a failed read is not an absent key";
  EXPECT_NE(llvm::toString(broken.takeError()).find("map 'gone': cannot read key 07 00 00 00"),
            std::string::npos);
}

TEST(MapAccess, SlotRangesStartWhereAskedAndStopAtTheArraysEnd) {
  auto created = bpf::createMap(mapLayout("slots", BPF_MAP_TYPE_ARRAY, 4, 4, 6));
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  bpf::MapAccess map(created->get(), "slots");
  for (uint32_t slot = 0; slot < 6; ++slot)
    ASSERT_THAT_ERROR(map.put(slot, slot * 10), llvm::Succeeded());

  std::vector<std::pair<uint32_t, uint32_t>> seen;
  auto visit = [&](uint32_t index, const uint8_t *row) {
    uint32_t value;
    std::memcpy(&value, row, 4);
    seen.emplace_back(index, value);
    return true;
  };
  auto visited = map.forEachSlot(2, 3, 4, visit);
  ASSERT_THAT_EXPECTED(visited, llvm::Succeeded());
  EXPECT_EQ(*visited, 3u);
  EXPECT_EQ(seen, (std::vector<std::pair<uint32_t, uint32_t>>{{2, 20}, {3, 30}, {4, 40}}));

  seen.clear();
  visited = map.forEachSlot(4, 5, 4, visit);
  ASSERT_THAT_EXPECTED(visited, llvm::Succeeded());
  EXPECT_EQ(*visited, 2u) << "slots 4 and 5, then the end";
  EXPECT_EQ(seen, (std::vector<std::pair<uint32_t, uint32_t>>{{4, 40}, {5, 50}}));
}

TEST(MapAccess, ListedSlotsAreReadInRangesAndStopAtTheArraysEnd) {
  // Three batches' worth of slots, listed with gaps narrower and wider than
  // ListedSlotGap, across batch boundaries, and beyond the end.
  constexpr uint32_t Slots = 3 * bpf::MapAccess::SlotBatch + 5;
  auto created = bpf::createMap(mapLayout("listed", BPF_MAP_TYPE_ARRAY, 4, 4, Slots));
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  bpf::MapAccess map(created->get(), "listed");
  for (uint32_t slot = 0; slot < Slots; ++slot)
    ASSERT_THAT_ERROR(map.put(slot, slot * 3 + 1), llvm::Succeeded());
  std::vector<uint32_t> listed = {0, 1, 9, 30, 1023, 1024, 1030, 2000, 2047, 2048, 2049,
                                  Slots - 1, Slots, Slots + 3, Slots + 100};
  std::vector<std::pair<uint32_t, uint32_t>> seen, expected;
  for (uint32_t slot : listed)
    if (slot < Slots)
      expected.emplace_back(slot, slot * 3 + 1);
  ASSERT_THAT_ERROR(map.forEachListedSlot(listed, 4,
                                          [&](uint32_t index, const uint8_t *row) {
                                            uint32_t value;
                                            std::memcpy(&value, row, 4);
                                            seen.emplace_back(index, value);
                                          }),
                    llvm::Succeeded());
  EXPECT_EQ(seen, expected) << "each listed slot within the array once, nothing else";

  // A range starting beyond the end visits nothing (the kernel's walk
  // would start over at slot 0).
  auto visited = map.forEachSlot(Slots + 2, 10, 4, [&](uint32_t, const uint8_t *) {
    ADD_FAILURE() << "a slot beyond the end";
    return true;
  });
  ASSERT_THAT_EXPECTED(visited, llvm::Succeeded());
  EXPECT_EQ(*visited, 0u);
  // And a visitor that has seen enough stops the read.
  uint32_t calls = 0;
  visited = map.forEachSlot(0, Slots, 4, [&](uint32_t, const uint8_t *) { return ++calls < 5; });
  ASSERT_THAT_EXPECTED(visited, llvm::Succeeded());
  EXPECT_EQ(*visited, 5u);
  EXPECT_EQ(calls, 5u);
}

TEST(MapAccess, ABatchWriteWritesInOrderAndNamesTheKeyTheKernelRefused) {
  // A hash of 1,500 entries written 2,000 at once: the batches before the
  // full one are written, the key that found it full is named.
  auto created = bpf::createMap(mapLayout("small", BPF_MAP_TYPE_HASH, 4, 8, 1500));
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  bpf::MapAccess map(created->get(), "small");
  std::vector<uint32_t> keys(2000);
  std::vector<uint64_t> values(2000);
  for (uint32_t i = 0; i < 2000; ++i) {
    keys[i] = 1000 + i;
    values[i] = i * 7;
  }
  Error failed = map.updateBatch({reinterpret_cast<const uint8_t *>(keys.data()), 2000 * 4},
                                 {reinterpret_cast<const uint8_t *>(values.data()), 2000 * 8},
                                 2000);
  ASSERT_TRUE(bool(failed));
  std::string message = llvm::toString(std::move(failed));
  // Key 2500 (1000 + 1500) = c4 09 00 00.
  EXPECT_NE(message.find("map 'small': cannot write key c4 09 00 00"), std::string::npos)
      << message;
  for (uint32_t i : {0u, 1023u, 1024u, 1499u}) {
    auto held = map.find<uint64_t>(keys[i]);
    ASSERT_THAT_EXPECTED(held, llvm::Succeeded());
    ASSERT_TRUE(*held) << "key " << keys[i] << " before the refused one";
    EXPECT_EQ(**held, values[i]);
  }
  auto after = map.find<uint64_t>(keys[1501]);
  ASSERT_THAT_EXPECTED(after, llvm::Succeeded());
  EXPECT_FALSE(*after) << "a key after the refused one was written";
}

TEST(MapAccess, QueuesGiveTheirElementsBackInOrderThenSayTheyAreEmpty) {
  auto created = bpf::createMap(mapLayout("queued", BPF_MAP_TYPE_QUEUE, 0, 4, 4));
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  bpf::MapAccess queue(created->get(), "queued");
  ASSERT_THAT_ERROR(queue.push(byteView(uint32_t(1))), llvm::Succeeded());
  ASSERT_THAT_ERROR(queue.push(byteView(uint32_t(2))), llvm::Succeeded());
  std::vector<uint32_t> taken;
  for (;;) {
    uint32_t value = 0;
    auto popped = queue.pop(mutableByteView(value));
    ASSERT_THAT_EXPECTED(popped, llvm::Succeeded());
    if (!*popped)
      break;
    taken.push_back(value);
  }
  EXPECT_EQ(taken, (std::vector<uint32_t>{1, 2}));
}

TEST(MapAccess, MapsAreCreatedAsTheirLayoutSaysAndOpenedByIdUntilFreed) {
  auto created = bpf::createMap(mapLayout("made", BPF_MAP_TYPE_HASH, 8, 16, 32), {.named = true});
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  auto made = bpf::layoutOf(created->get(), "made");
  ASSERT_THAT_EXPECTED(made, llvm::Succeeded());
  EXPECT_EQ(made->type, uint32_t(BPF_MAP_TYPE_HASH));
  EXPECT_EQ(made->keySize, 8u);
  EXPECT_EQ(made->valueSize, 16u);
  EXPECT_EQ(made->maxEntries, 32u);
  EXPECT_EQ(made->kernelName, "made") << "named for the kernel when asked";

  auto opened = bpf::openMapById(made->id, "made");
  ASSERT_THAT_EXPECTED(opened, llvm::Succeeded());
  ASSERT_TRUE(*opened) << "the map is there while an fd holds it";
  opened->reset();
  created->reset();
  // The kernel frees a map after an RCU grace period: asked again, its id
  // names no map (ids are not reused until they wrap).
  std::optional<FileDescriptor> after;
  for (int attempt = 0; attempt < 100; ++attempt) {
    auto again = bpf::openMapById(made->id, "made");
    ASSERT_THAT_EXPECTED(again, llvm::Succeeded());
    after = std::move(*again);
    if (!after)
      break;
    after.reset();
    usleep(10000);
  }
  EXPECT_FALSE(after) << "a freed map's id opens nothing, without an error";

  auto refused = bpf::createMap(mapLayout("refused", BPF_MAP_TYPE_HASH, 0, 8, 4));
  ASSERT_FALSE(bool(refused)) << "a hash map without keys";
  EXPECT_NE(llvm::toString(refused.takeError()).find("map 'refused' (hash): cannot create"),
            std::string::npos);
}

} // namespace
} // namespace morpheus::testing
