#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapIO.h"

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

} // namespace
} // namespace morpheus::bpf
