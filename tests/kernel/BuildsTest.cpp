// Programs built the way their projects build them: for newer BPF CPUs
// (-mcpu=v3, v4) and with CO-RE relocations against a vmlinux.h generated
// from this kernel's BTF at build time. Each loads under Morpheus, gets its
// configuration specialized, and behaves as the original on the packets
// that exercise it. (Compile databases and host-compiled IR are in
// tests/unit/CliTest.cpp: they need no kernel.)
#include "Corpus.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

namespace morpheus::testing {
namespace {

class BuildsForCpu : public ::testing::TestWithParam<const char *> {};

TEST_P(BuildsForCpu, ConfigurationIsInlinedAndTheCounterFetched) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.cflags = {std::string("-mcpu=") + GetParam()};
  CorpusProgram program("build_mcpu.bpf.c", options);
  ASSERT_TRUE(program.ok());
  program.set("limits", uint32_t(0), uint64_t(1000));
  runtime::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *inlined = CorpusProgram::decision(report, "limits", true);
  ASSERT_NE(inlined, nullptr) << report.log.toText();
  EXPECT_EQ(inlined->pass, "constant-key-lookup");
  for (uint8_t tos : {0x80, 0x01}) {
    Bytes packet = buildPacket({.tos = tos});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "tos " << int(tos);
  }
  EXPECT_EQ(program.active(buildPacket({.tos = 0x80})).verdict, uint32_t(XDP_TX));
  // The counter the program fetches and adds to is live: 5 packets so far.
  uint64_t count = 0;
  uint32_t one = 1;
  ASSERT_EQ(bpf_map_lookup_elem(program.opt().mapFd("limits"), &one, &count), 0);
  EXPECT_EQ(count, 5u);
}

INSTANTIATE_TEST_SUITE_P(Builds, BuildsForCpu, ::testing::Values("v3", "v4"),
                         [](const auto &info) { return std::string(info.param); });

TEST(Builds, CoReAgainstVmlinuxHIsSpecializedAndEquivalent) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.cflags = {std::string("-I") + MORPHEUS_VMLINUX_DIR};
  CorpusProgram program("build_core_vmlinux.bpf.c", options);
  ASSERT_TRUE(program.ok());
  struct CoreConfig {
    uint32_t action;
    uint32_t tos;
  };
  program.set("core_config", uint32_t(0), CoreConfig{XDP_DROP, 7});
  runtime::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *inlined = CorpusProgram::decision(report, "core_config", true);
  ASSERT_NE(inlined, nullptr) << report.log.toText();
  EXPECT_EQ(inlined->pass, "constant-key-lookup");
  for (uint8_t tos : {7, 3}) {
    Bytes packet = buildPacket({.tos = tos});
    EXPECT_EQ(program.active(packet), program.original(packet)) << "tos " << int(tos);
  }
  // The relocated field is read where the kernel has it.
  EXPECT_EQ(program.active(buildPacket({.tos = 7})).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(program.active(buildPacket({.tos = 3})).verdict, uint32_t(XDP_DROP));
}

} // namespace
} // namespace morpheus::testing
