// The same semantics in every corner of C: pointer identity of looked-up
// values, key bytes the program never wrote, arrays whose unlisted indexes
// still exist, and lookups declared with another return type. Programs:
// tests/programs/.
#include "Corpus.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramSpec.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <cstring>
#include <linux/bpf.h>
#include <linux/in.h>
#include <nlohmann/json.hpp>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::testing {
namespace {

TEST(Semantics, ComparedValuePointersKeepTheirIdentity) {
  CorpusProgram program("pointer_compare.bpf.c");
  ASSERT_TRUE(program.ok());
  // Two addresses whose entries hold equal values: distinct entries.
  program.set("zones", htonl(0x0a000001), uint32_t(5));
  program.set("zones", htonl(0x0a000002), uint32_t(5));
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  Bytes twoEntries = buildPacket({.saddr = 0x0a000001, .daddr = 0x0a000002});
  Bytes oneEntry = buildPacket({.saddr = 0x0a000001, .daddr = 0x0a000001});
  EXPECT_EQ(program.original(twoEntries).verdict, uint32_t(XDP_TX));
  EXPECT_EQ(program.original(oneEntry).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.active(twoEntries), program.original(twoEntries));
  EXPECT_EQ(program.active(oneEntry), program.original(oneEntry));
  const core::SiteDecision *declined = CorpusProgram::decision(report, "zones", false);
  ASSERT_NE(declined, nullptr) << "value pointers compared: the table is not inlined";
  EXPECT_NE(declined->detail.find("compared"), std::string::npos) << declined->detail;
}

struct FlowKey {
  uint8_t protocol;
  uint8_t padding[3];
  uint32_t address;
};
static_assert(sizeof(FlowKey) == 8);

// 256 entries that differ only in the key's padding, which the program
// never writes (tests/programs/padded_key.bpf.c): which one the original
// matches depends on the stale bytes its frames leave there (a dead
// temporary's zeros). The lookup is declined with its reason, and so is
// every other site under the same program (folding `settings` would remove
// the temporary and change the stale bytes); the running version answers
// every packet as the original. On main the lookup was rewritten (a
// compare chain over the entries, with the inline limit at 256) or, with
// the lookup alone declined, `settings` was folded: both matched another
// entry.
TEST(Semantics, LookupsWithUnwrittenKeyBytesAreDeclinedAndAnswerAsTheOriginal) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.inlineLimit = 256;
  CorpusProgram program("padded_key.bpf.c", options);
  ASSERT_TRUE(program.ok());
  program.set("settings", uint32_t(0), uint32_t(1));
  const uint32_t addresses[] = {0x0a000001, 0x0a000002};
  auto pattern = [](uint32_t position) { return uint8_t(position * 7 + 1); };
  for (uint32_t address : addresses) {
    // Zero padding, and every stale triple the pattern can leave
    // (consecutive positions): 128 entries per address.
    program.set("flows", FlowKey{IPPROTO_UDP, {0, 0, 0}, htonl(address)}, uint32_t(7777));
    for (uint32_t position = 0; position < 127; ++position) {
      FlowKey key{IPPROTO_UDP, {pattern(position), pattern(position + 1), pattern(position + 2)},
                  htonl(address)};
      program.set("flows", key, position + (address & 0xff) * 1000);
    }
  }
  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  // The matched entry's value, which the program writes into the packet.
  auto matchedValue = [](const RunResult &run) -> std::string {
    uint32_t value = 0;
    if (run.verdict != XDP_TX || run.output.size() < sizeof(value))
      return "(none)";
    std::memcpy(&value, run.output.data(), sizeof(value));
    return std::to_string(value);
  };
  unsigned matched = 0;
  for (uint32_t address : {0x0a000001u, 0x0a000002u, 0x0a000003u}) {
    Bytes packet = buildPacket({.protocol = IPPROTO_UDP, .daddr = address});
    RunResult original = program.original(packet);
    RunResult active = program.active(packet);
    matched += original.verdict == XDP_TX;
    EXPECT_EQ(active, original) << "address " << std::hex << address << std::dec
                                << ": the original matched the entry of value "
                                << matchedValue(original) << ", the running version "
                                << matchedValue(active);
  }
  EXPECT_EQ(matched, 2u) << "premise: the stale padding matches an entry in the original";
  auto detail = [](const core::SiteDecision *decision) {
    return decision ? decision->detail : std::string("(no decision logged)");
  };
  const core::SiteDecision *declined = CorpusProgram::decision(report, "flows", false);
  EXPECT_NE(detail(declined).find("key bytes 1..3 are never written"), std::string::npos)
      << "the padded lookup is left alone: " << detail(declined);
  const core::SiteDecision *kept = CorpusProgram::decision(report, "settings", false);
  EXPECT_NE(detail(kept).find("runs under 'padded_prog'"), std::string::npos)
      << "nothing under the program is rewritten: " << detail(kept);
  EXPECT_EQ(CorpusProgram::decision(report, "flows", true), nullptr);
  EXPECT_EQ(CorpusProgram::decision(report, "settings", true), nullptr);
}

// Offline: `morpheus specialize` with a snapshot that lists two of the
// array's eight indexes. The others exist (the live array holds values
// there) and a lookup never returns NULL for them.
TEST(Semantics, UnlistedArrayIndexesAreNotNull) {
  auto spec = bpf::ProgramSpec::load(corpusPath("partial_array.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  auto original = bpf::LoadedObject::load((*spec)->originalElf(), (*spec)->objectName(), {});
  ASSERT_THAT_EXPECTED(original, llvm::Succeeded());
  int levels = original->mapFd("levels");
  for (auto [index, level] : {std::pair<uint32_t, uint32_t>{0, 1}, {1, 0}, {5, 0}, {6, 7}})
    ASSERT_EQ(bpf_map_update_elem(levels, &index, &level, BPF_ANY), 0);
  nlohmann::json document = {
      {"maps",
       {{"levels",
         {{{"key", "00000000"}, {"value", "01000000"}}, {{"key", "01000000"}, {"value", "00000000"}}}}}}};
  auto snapshot = bpf::parseSnapshot(document, (*spec)->catalog(), "partial snapshot");
  ASSERT_THAT_EXPECTED(snapshot, llvm::Succeeded());
  auto object = (*spec)->specialize(*snapshot, bpf::SpecializeRequest{});
  ASSERT_THAT_EXPECTED(object, llvm::Succeeded());
  bpf::LoadOptions sharing;
  sharing.maps = {{"levels", levels}};
  auto specialized = bpf::LoadedObject::load(object->elf, (*spec)->objectName(), sharing);
  ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
  for (uint8_t tos = 0; tos < 8; ++tos) {
    Bytes packet = buildPacket({.tos = tos});
    RunResult expected = runOnce(original->programFd("array_prog"), packet);
    EXPECT_NE(expected.verdict, uint32_t(XDP_ABORTED)) << "premise: index " << int(tos);
    EXPECT_EQ(runOnce(specialized->programFd("array_prog"), packet), expected)
        << "index " << int(tos);
  }
}

TEST(Semantics, IntegerReturningLookupIsDeclinedWithItsReason) {
  CorpusProgram program("integer_lookup.bpf.c");
  ASSERT_TRUE(program.ok());
  core::CycleReport report = program.cycle(); // `blocked` is empty
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *declined = CorpusProgram::decision(report, "blocked", false);
  ASSERT_NE(declined, nullptr);
  EXPECT_NE(declined->detail.find("returns i64"), std::string::npos) << declined->detail;
  Bytes packet = buildPacket({.saddr = 0x0a000009});
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_PASS));
  program.set("blocked", htonl(0x0a000009), uint32_t(1));
  EXPECT_EQ(program.original(packet).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.active(packet).verdict, uint32_t(XDP_DROP));
}

} // namespace
} // namespace morpheus::testing
