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
  runtime::CycleReport report = program.cycle();
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

TEST(Semantics, KeyPaddingComparesAsMemoryHoldsIt) {
  CorpusProgram program("padded_key.bpf.c");
  ASSERT_TRUE(program.ok());
  // The control plane writes the key with zero padding; the program's key
  // has 0xff there (the bytes its stack slot held before), so no packet
  // ever matches in the original.
  program.set("flows", FlowKey{IPPROTO_UDP, {0, 0, 0}, htonl(0x0a000001)}, uint32_t(1));
  runtime::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  ASSERT_NE(CorpusProgram::decision(report, "flows", true), nullptr)
      << "the lookup is still inlined";
  Bytes packet = buildPacket({.protocol = IPPROTO_UDP, .daddr = 0x0a000001});
  EXPECT_EQ(program.original(packet).verdict, uint32_t(XDP_PASS))
      << "premise: the padding held non-zero bytes, so the kernel's hash missed";
  EXPECT_EQ(program.active(packet), program.original(packet));
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
  runtime::CycleReport report = program.cycle(); // `blocked` is empty
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
