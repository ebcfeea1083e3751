// Scratch copies read and written in batches (MapAccess::forEachSlot,
// forEachListedSlot, updateBatch), or for a plain ARRAY in memory (mapped:
// BPF_F_MMAPABLE), hold exactly what copies written slot by slot hold: the
// same rows for an ARRAY, a PERCPU_ARRAY and a HASH (whose key walk then
// visits the same order), with a partly filled batch at the end, and dump
// them as lookups read them; and the image of a large array lists the live
// map's slots exactly as lookups one by one read them.
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "runtime/ScratchMaps.h"
#include "TestMaps.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <linux/bpf.h>

#include <cstring>
#include <map>
#include <random>
#include <set>

namespace morpheus::testing {
namespace {

Bytes indexBytes(uint32_t index) {
  Bytes key(4);
  std::memcpy(key.data(), &index, 4);
  return key;
}

// Every entry of the map behind `fd`, in the kernel's key order, read one
// lookup at a time.
std::vector<std::pair<Bytes, Bytes>> entriesOneByOne(int fd, const bpf::MapLayout &layout) {
  std::vector<std::pair<Bytes, Bytes>> entries;
  size_t row = runtime::rowSize(layout);
  bpf::MapAccess map(fd, layout.name);
  EXPECT_THAT_ERROR(bpf::forEachKey(fd, layout.keySize, layout.name,
                                    [&](const Bytes &key) {
                                      Bytes value(row);
                                      auto found = map.lookup(key, value);
                                      EXPECT_THAT_EXPECTED(found, llvm::Succeeded());
                                      if (found && *found)
                                        entries.emplace_back(key, value);
                                      else
                                        llvm::consumeError(found.takeError());
                                      return true;
                                    }),
                    llvm::Succeeded());
  return entries;
}

struct BatchCase {
  const char *name;
  uint32_t type, keySize, valueSize, maxEntries;
};

class BatchFilledCopy : public ::testing::TestWithParam<BatchCase> {};

TEST_P(BatchFilledCopy, EqualsTheCopyFilledSlotBySlot) {
  const BatchCase &kind = GetParam();
  bpf::MapLayout layout =
      mapLayout(kind.name, kind.type, kind.keySize, kind.valueSize, kind.maxEntries);
  auto live = bpf::createMap(layout);
  ASSERT_THAT_EXPECTED(live, llvm::Succeeded());
  bpf::MapAccess liveMap(live->get(), kind.name);
  size_t row = runtime::rowSize(layout);
  bool array = bpf::isArrayMap(kind.type);

  // A loader's state: random values, every fifth slot or key left zero;
  // for an array every slot below 3,500, for the hash 3,500 keys. The
  // listing names most of them (and, for the array, slots beyond its end
  // and twice over), so the copy is written in 2 full batches and a part.
  std::mt19937 random(7);
  runtime::CopySizing sizing;
  sizing.window = 256;
  std::vector<Bytes> &listed = sizing.keys[kind.name];
  for (uint32_t i = 0; i < 3500; ++i) {
    Bytes key = array ? indexBytes(i) : Bytes(kind.keySize);
    if (!array)
      for (uint8_t &byte : key)
        byte = uint8_t(random());
    Bytes value(row, 0);
    if (i % 5)
      for (uint8_t &byte : value)
        byte = uint8_t(random());
    ASSERT_THAT_ERROR(liveMap.update(key, value), llvm::Succeeded());
    if (i % 7)
      listed.push_back(key);
  }
  if (array) {
    listed.push_back(indexBytes(kind.maxEntries));
    listed.push_back(indexBytes(kind.maxEntries + 100));
    listed.push_back(indexBytes(3));
  }

  auto image = runtime::MapImage::read(runtime::LiveMaps{{{kind.name, live->get()}}, {}}, {},
                                       sizing);
  ASSERT_THAT_EXPECTED(image, llvm::Succeeded());
  ASSERT_EQ(image->maps().size(), 1u);
  const runtime::MapImage::Map &imaged = image->maps().front();
  size_t written = 0;
  for (const auto &[key, value] : imaged.rows)
    written += !array || std::any_of(value.begin(), value.end(), [](uint8_t b) { return b; });
  EXPECT_GT(written, 2 * bpf::MapAccess::SlotBatch);
  EXPECT_NE(written % bpf::MapAccess::SlotBatch, 0u) << "no partly filled last batch";

  auto copies = runtime::ScratchMaps::create(*image);
  ASSERT_THAT_EXPECTED(copies, llvm::Succeeded());
  int batched = (*copies)->fd(0);
  auto copyLayout = bpf::layoutOf(batched, kind.name);
  ASSERT_THAT_EXPECTED(copyLayout, llvm::Succeeded());
  EXPECT_EQ(bool(copyLayout->flags & BPF_F_MMAPABLE), kind.type == BPF_MAP_TYPE_ARRAY)
      << "a plain array's copy is mapped, no other";

  // The same copy, written one slot at a time as the image lists it.
  auto bySlot = bpf::createMap(imaged.layout, {.fixedHashSeed = true});
  ASSERT_THAT_EXPECTED(bySlot, llvm::Succeeded());
  bpf::MapAccess slotCopy(bySlot->get(), kind.name);
  for (const auto &[key, value] : imaged.rows)
    ASSERT_THAT_ERROR(slotCopy.update(key, value), llvm::Succeeded());

  auto batchedEntries = entriesOneByOne(batched, imaged.layout);
  auto slotEntries = entriesOneByOne(bySlot->get(), imaged.layout);
  EXPECT_EQ(batchedEntries.size(), slotEntries.size());
  EXPECT_TRUE(batchedEntries == slotEntries)
      << "the batch-filled copy differs from the one filled slot by slot (or walks its keys "
         "in another order)";
  // The copy's dump (from memory for the mapped array) reads what lookups
  // read: every slot of an array, every entry of the hash.
  auto dumped = (*copies)->dump(0, {});
  ASSERT_THAT_EXPECTED(dumped, llvm::Succeeded());
  std::map<Bytes, Bytes> fromDump = dumped->entries;
  for (size_t slot = 0; dumped->row && slot * dumped->row < dumped->flat.size(); ++slot) {
    Bytes value(dumped->flat.begin() + slot * dumped->row,
                dumped->flat.begin() + (slot + 1) * dumped->row);
    fromDump[indexBytes(uint32_t(slot))] = value;
  }
  std::map<Bytes, Bytes> looked(slotEntries.begin(), slotEntries.end());
  EXPECT_TRUE(fromDump == looked) << "the dump differs from what lookups read";
  // And both hold the live values of what they copied.
  for (const auto &[key, value] : imaged.rows) {
    Bytes held(row);
    auto found = liveMap.lookup(key, held);
    ASSERT_THAT_EXPECTED(found, llvm::Succeeded());
    ASSERT_TRUE(*found);
    EXPECT_EQ(held, value) << "key " << toHex(key);
  }
}

INSTANTIATE_TEST_SUITE_P(
    ScratchMaps, BatchFilledCopy,
    ::testing::Values(BatchCase{"batch_array", BPF_MAP_TYPE_ARRAY, 4, 12, 5000},
                      BatchCase{"batch_percpu", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 12, 5000},
                      BatchCase{"batch_hash", BPF_MAP_TYPE_HASH, 8, 12, 6000}),
    [](const ::testing::TestParamInfo<BatchCase> &info) { return std::string(info.param.name); });

TEST(ScratchMaps, TheImageOfALargeArrayListsTheLiveSlotsAsLookupsReadThem) {
  // A firewall's port classes: 131,072 slots, about half of them not the
  // common class, all of those listed, plus a few slots holding it.
  constexpr uint32_t Slots = 131072;
  bpf::MapLayout layout = mapLayout("port_classes", BPF_MAP_TYPE_ARRAY, 4, 4, Slots);
  auto live = bpf::createMap(layout);
  ASSERT_THAT_EXPECTED(live, llvm::Succeeded());
  std::mt19937 random(11);
  std::vector<uint32_t> keys(Slots), classes(Slots);
  for (uint32_t i = 0; i < Slots; ++i) {
    keys[i] = i;
    classes[i] = random() % 2 ? 1 + random() % 255 : 0;
  }
  ASSERT_THAT_ERROR(bpf::MapAccess(live->get(), "port_classes")
                        .updateBatch({reinterpret_cast<const uint8_t *>(keys.data()), Slots * 4},
                                     {reinterpret_cast<const uint8_t *>(classes.data()), Slots * 4},
                                     Slots),
                    llvm::Succeeded());
  runtime::CopySizing sizing;
  sizing.window = 256;
  std::set<uint32_t> listed;
  for (uint32_t i = 0; i < Slots; ++i)
    if (classes[i] || i % 1000 == 0)
      listed.insert(i);
  for (uint32_t i : listed)
    sizing.keys["port_classes"].push_back(indexBytes(i));

  auto image = runtime::MapImage::read(runtime::LiveMaps{{{"port_classes", live->get()}}, {}},
                                       {}, sizing);
  ASSERT_THAT_EXPECTED(image, llvm::Succeeded());
  const runtime::MapImage::Map &imaged = image->maps().front();
  // What the image held when every listed slot was one lookup: the window's
  // slots that are not zero, and every listed slot whatever its value.
  std::map<Bytes, Bytes> expected;
  for (uint32_t i = 0; i < Slots; ++i) {
    if (!(i < 256 && classes[i]) && !listed.count(i))
      continue;
    uint32_t value = 0;
    ASSERT_EQ(bpf_map_lookup_elem(live->get(), &i, &value), 0);
    Bytes bytes(4);
    std::memcpy(bytes.data(), &value, 4);
    expected[indexBytes(i)] = bytes;
  }
  std::map<Bytes, Bytes> rows(imaged.rows.begin(), imaged.rows.end());
  EXPECT_EQ(rows.size(), imaged.rows.size()) << "a slot imaged twice";
  EXPECT_EQ(rows.size(), expected.size());
  EXPECT_TRUE(rows == expected) << "the image differs from the live slots";
  EXPECT_EQ(imaged.layout.maxEntries, Slots) << "every listed slot fits the copy";
}

} // namespace
} // namespace morpheus::testing
