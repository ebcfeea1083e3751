#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/Snapshot.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <linux/bpf.h>
#include <nlohmann/json.hpp>

namespace morpheus::bpf {
namespace {

using core::Bytes;

TEST(HexBytes, AcceptsTheFormsOperatorsType) {
  Bytes expected = {0x0a, 0x00, 0x00, 0x01};
  for (const char *text : {"0a000001", "0a 00 00 01", "0x0a 0x00 0x00 0x01", "0A:00:00:01",
                           "0x0a000001"})
    EXPECT_EQ(cantFail(parseHexBytes(text, "key")), expected) << text;
  EXPECT_EQ(cantFail(parseJsonBytes(nlohmann::json::array({"0x0a", "0x00", "0x00", "0x01"}),
                                    "key")),
            expected);
}

TEST(HexBytes, RejectsMalformedInputNamingTheField) {
  for (const char *text : {"", "0a0", "zz", "0a 0g"}) {
    auto parsed = parseHexBytes(text, "value of entry 3");
    ASSERT_FALSE(bool(parsed)) << text;
    EXPECT_NE(llvm::toString(parsed.takeError()).find("value of entry 3"), std::string::npos);
  }
  auto number = parseJsonBytes(nlohmann::json(42), "key");
  EXPECT_FALSE(bool(number));
  llvm::consumeError(number.takeError());
}

TEST(HexBytes, RoundTripsThroughToHex) {
  Bytes bytes = {0, 1, 0xab, 0xff};
  EXPECT_EQ(toHex(bytes), "00 01 ab ff");
  EXPECT_EQ(cantFail(parseHexBytes(toHex(bytes), "x")), bytes);
}

class Snapshot : public ::testing::Test {
protected:
  core::TableCatalog catalog = {
      {"policy", tableInfoFor("policy", BPF_MAP_TYPE_HASH, 4, 2, 16)},
      {"counters", tableInfoFor("counters", BPF_MAP_TYPE_PERCPU_ARRAY, 4, 2, 4)}};

  std::string error(const char *document) {
    auto parsed = parseSnapshot(nlohmann::json::parse(document), catalog, "state.json");
    if (parsed)
      return "";
    return llvm::toString(parsed.takeError());
  }
};

TEST_F(Snapshot, ParsesEntriesAsCompleteTables) {
  auto snapshot = parseSnapshot(
      nlohmann::json::parse(R"({"maps": {"policy": [{"key": "01000000", "value": "0200"}]}})"),
      catalog, "state.json");
  ASSERT_THAT_EXPECTED(snapshot, llvm::Succeeded());
  const core::TableContents &policy = snapshot->at("policy");
  EXPECT_TRUE(policy.complete);
  ASSERT_EQ(policy.entries.size(), 1u);
  EXPECT_EQ(*policy.entries[0].value, (Bytes{2, 0}));
  // Complete: a key that is not listed is known to be absent.
  std::optional<const core::TableEntry *> absent = policy.known({9, 9, 9, 9});
  ASSERT_TRUE(absent.has_value());
  EXPECT_EQ(*absent, nullptr);
  EXPECT_FALSE(snapshot->count("counters"));
}

TEST_F(Snapshot, PerCpuValuesCollapseOnlyWhenEqual) {
  auto snapshot = parseSnapshot(nlohmann::json::parse(R"({"maps": {"counters": [
      {"key": "00000000", "values": ["0100", "0100"]},
      {"key": "01000000", "values": ["0100", {"cpu": 1, "value": "0200"}]}]}})"),
                                catalog, "state.json");
  ASSERT_THAT_EXPECTED(snapshot, llvm::Succeeded());
  const auto &entries = snapshot->at("counters").entries;
  EXPECT_EQ(*entries[0].value, (Bytes{1, 0}));
  EXPECT_FALSE(entries[1].value.has_value());
}

TEST_F(Snapshot, ErrorsNameTheFileMapAndEntry) {
  EXPECT_NE(error(R"({"tables": {}})").find("\"maps\""), std::string::npos);
  EXPECT_NE(error(R"({"maps": {"nosuch": []}})").find("map 'nosuch' is not a map"),
            std::string::npos);
  std::string wrongKey =
      error(R"({"maps": {"policy": [{"key": "01", "value": "0200"}]}})");
  EXPECT_NE(wrongKey.find("state.json: map 'policy' entry 0"), std::string::npos) << wrongKey;
  EXPECT_NE(wrongKey.find("key has 1 bytes, the map's keys have 4"), std::string::npos);
  EXPECT_NE(error(R"({"maps": {"policy": [{"key": "01000000"}]}})").find("needs \"value\""),
            std::string::npos);
  EXPECT_NE(error(R"({"maps": {"policy": [{"key": "01000000", "value": "02"}]}})")
                .find("value has 1 bytes"),
            std::string::npos);
}

TEST_F(Snapshot, RoundTripsThroughJson) {
  core::TableSnapshot original;
  original["policy"].complete = true;
  original["policy"].entries.push_back({{1, 2, 3, 4}, Bytes{5, 6}});
  auto parsed = parseSnapshot(snapshotToJson(original), catalog, "round trip");
  ASSERT_TRUE(bool(parsed));
  EXPECT_EQ(parsed->at("policy").entries, original["policy"].entries);
}

// An array as readTable's source, counting the slots it hands out.
class CountedArray : public TableSource {
public:
  explicit CountedArray(std::vector<uint32_t> values) : values(std::move(values)) {}
  Error forEachKey(llvm::function_ref<bool(const Bytes &)> visit) override {
    for (uint32_t index = 0; index < values.size(); ++index)
      if (!visit(bytesOf(index)))
        break;
    return Error::success();
  }
  Expected<std::optional<core::TableEntry>> lookup(const Bytes &key) override {
    uint32_t index = 0;
    std::memcpy(&index, key.data(), sizeof(index));
    ++lookups;
    return std::optional(core::TableEntry{key, bytesOf(values.at(index))});
  }
  Expected<bool> forEachSlot(llvm::function_ref<bool(core::TableEntry &&)> visit) override {
    for (uint32_t index = 0; index < values.size(); ++index) {
      ++slotsRead;
      if (!visit({bytesOf(index), bytesOf(values[index])}))
        break;
    }
    return true;
  }
  std::vector<uint32_t> values;
  size_t slotsRead = 0, lookups = 0;
};

// A content read stops once no pass could use it: more slots differ from
// every value than contentDiffering, and more distinct values than
// contentValues were seen. It keeps the keys asked for.
TEST(ArrayContentRead, StopsOnceNoPassCouldUseTheListing) {
  core::TableInfo info = tableInfoFor("ring", BPF_MAP_TYPE_ARRAY, 4, 4, 100000);
  core::TableReadRequest request;
  request.wholeTableLimit = 8;
  request.contentDiffering = 8;
  request.contentValues = 0;
  request.keys = {bytesOf(uint32_t(99999))};

  // Mostly zero, 5 slots set, the last one of them at the end: read whole.
  std::vector<uint32_t> sparse(100000, 0);
  for (uint32_t slot : {3u, 70u, 5000u, 64000u, 99999u})
    sparse[slot] = slot + 1;
  CountedArray few(sparse);
  auto read = readTable(few, info, request);
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  EXPECT_TRUE(read->complete);
  EXPECT_EQ(read->unlistedValue, bytesOf(uint32_t(0)));
  ASSERT_EQ(read->entries.size(), 5u);
  EXPECT_EQ(few.slotsRead, 100000u);

  // A ring: every slot one of 4 values. At the 12th slot 9 differ from
  // the most common value (3 slots each): no value leaves 8 listed.
  std::vector<uint32_t> ring(100000);
  for (uint32_t slot = 0; slot < ring.size(); ++slot)
    ring[slot] = slot % 4 + 1;
  CountedArray many(ring);
  read = readTable(many, info, request);
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  EXPECT_FALSE(read->complete);
  EXPECT_FALSE(read->unlistedValue);
  EXPECT_EQ(many.slotsRead, 12u);
  ASSERT_EQ(read->entries.size(), 1u); // the key asked for, probed
  EXPECT_EQ(read->entries[0].key, bytesOf(uint32_t(99999)));
  EXPECT_EQ(read->entries[0].value, bytesOf(uint32_t(99999 % 4 + 1)));
  EXPECT_TRUE(read->probedKeys.count(bytesOf(uint32_t(99999))));

  // The same ring within region-as-table's classes: read whole.
  request.contentValues = 255;
  CountedArray classes(ring);
  read = readTable(classes, info, request);
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  EXPECT_TRUE(read->complete);
  EXPECT_EQ(classes.slotsRead, 100000u);
  EXPECT_EQ(read->entries.size(), 75000u);
  EXPECT_EQ(classes.lookups, 0u);

  // Past the classes too (300 values): stopped once the 256th showed.
  for (uint32_t slot = 0; slot < ring.size(); ++slot)
    ring[slot] = slot % 300 + 1;
  CountedArray distinct(ring);
  read = readTable(distinct, info, request);
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  EXPECT_FALSE(read->complete);
  EXPECT_EQ(distinct.slotsRead, 256u);

  // Without bounds (a request planReads did not make) nothing stops.
  CountedArray unbounded(ring);
  read = readTable(unbounded, info, core::TableReadRequest{.wholeTableLimit = 8});
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  EXPECT_TRUE(read->complete);
  EXPECT_EQ(unbounded.slotsRead, 100000u);
}

} // namespace
} // namespace morpheus::bpf
