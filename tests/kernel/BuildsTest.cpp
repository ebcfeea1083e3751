// Programs built the way their projects build them: for newer BPF CPUs
// (-mcpu=v3, v4) and with CO-RE relocations against a vmlinux.h generated
// from this kernel's BTF at build time. Each loads under Morpheus, gets its
// configuration specialized, and behaves as the original on the packets
// that exercise it; one built through its compile database runs the
// database's flags; one built for the host and lowered for BPF (Katran's
// build) runs as the BPF build of its source. (The compile database's
// errors and what host-compiled IR refuses are in tests/unit: they need no
// kernel.)
#include "Corpus.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <fstream>

namespace morpheus::testing {
namespace {

class BuildsForCpu : public ::testing::TestWithParam<const char *> {};

TEST_P(BuildsForCpu, ConfigurationIsInlinedAndTheCounterFetched) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.cflags = {std::string("-mcpu=") + GetParam()};
  CorpusProgram program("build_mcpu.bpf.c", options);
  ASSERT_TRUE(program.ok());
  program.set("limits", uint32_t(0), uint64_t(1000));
  core::CycleReport report = program.cycle();
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
  core::CycleReport report = program.cycle();
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

// A program built as its project builds it, through a compile database:
// the header is found only through the database's -I, and the verdict for
// an empty slot is the database's -D. The loaded program is that build
// (the -D decides a packet's verdict), and its specialization answers as
// it does.
TEST(Builds, CompileDatabaseFlagsReachTheProgramThatRuns) {
  std::string project = "/tmp/morpheus-builds-cdb-" + std::to_string(getpid());
  ASSERT_EQ(std::system(("mkdir -p " + project + "/src " + project + "/include").c_str()), 0);
  std::ofstream(project + "/include/verdicts.bpf.h") << "#define EMPTY_SLOT EMPTY_VERDICT\n";
  std::string source = project + "/src/prog.bpf.c";
  std::ofstream(source)
      << "#include <linux/bpf.h>\n#include <bpf/bpf_helpers.h>\n#include \"verdicts.bpf.h\"\n"
         "struct { __uint(type, BPF_MAP_TYPE_ARRAY); __uint(max_entries, 4);"
         " __type(key, __u32); __type(value, __u32); } verdicts SEC(\".maps\");\n"
         "SEC(\"xdp\") int prog(struct xdp_md *ctx) {"
         " __u32 k = ctx->data_end - ctx->data > 100 ? 1 : 0;"
         " __u32 *v = bpf_map_lookup_elem(&verdicts, &k);"
         " return v && *v ? *v : EMPTY_SLOT; }\n"
         "char LICENSE[] SEC(\"license\") = \"GPL\";\n";
  std::string database = project + "/compile_commands.json";
  std::ofstream(database) << "[{\"directory\": \"" << project
                          << "/build\", \"file\": \"../src/prog.bpf.c\", \"command\": \"clang "
                             "-target bpf -O2 -g -c -I ../include -DEMPTY_VERDICT=1 -o prog.o "
                             "../src/prog.bpf.c\"}]\n";
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.compileDatabase = database;
  auto created = runtime::Optimizer::create(source, options);
  EXPECT_EQ(std::system(("rm -rf " + project).c_str()), 0);
  ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
  runtime::Optimizer &opt = **created;
  auto updater = bpf::MapUpdater::forMap(opt.mapFd("verdicts"), "verdicts", &opt.guard());
  ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
  ASSERT_THAT_ERROR(updater->update(bytesOf(uint32_t(0)), bytesOf(uint32_t(XDP_TX))),
                    llvm::Succeeded());
  core::CycleReport report = opt.runCycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  const core::SiteDecision *inlined = CorpusProgram::decision(report, "verdicts", true);
  ASSERT_NE(inlined, nullptr) << report.log.toText();
  for (auto [payload, verdict] : {std::pair{size_t(18), uint32_t(XDP_TX)},
                                  std::pair{size_t(200), uint32_t(XDP_DROP)}}) {
    Bytes packet = buildPacket({.payload = payload});
    RunResult original = runOnce(opt.originalFd(), packet);
    EXPECT_EQ(original.verdict, verdict) << "payload " << payload;
    EXPECT_EQ(runOnce(opt.activeFd(), packet), original) << "payload " << payload;
  }
}

// A program built as Katran builds its data plane: clang for the host
// (`-O2 -g -emit-llvm -c`, no --target=bpf), which Morpheus retargets as
// `llc -march=bpf` would. On the same map states the retargeted program
// answers every packet as the BPF build of the same source does (verdict,
// bytes, the counter it writes), and so does its specialization.
TEST(Builds, HostTargetIrRunsAsTheBpfBuildOfTheSameSource) {
  std::string ir = "/tmp/morpheus-builds-host-" + std::to_string(getpid()) + ".bc";
  ASSERT_EQ(std::system((std::string(MORPHEUS_CLANG) + " -O2 -g -emit-llvm -c " +
                         corpusPath("build_host_target.bpf.c") + " -o " + ir)
                            .c_str()),
            0);
  auto created = runtime::Optimizer::create(ir, CorpusProgram::noShadow());
  unlink(ir.c_str());
  ASSERT_TRUE(bool(created)) << llvm::toString(created.takeError());
  runtime::Optimizer &host = **created;
  CorpusProgram bpfBuild("build_host_target.bpf.c");
  ASSERT_TRUE(bpfBuild.ok());
  struct Backend {
    uint8_t flags;
    uint16_t tos;
    uint32_t address;
    uint64_t packets;
  };
  static_assert(sizeof(Backend) == 16, "the program's struct backend");
  auto configure = [](runtime::Optimizer &opt) {
    for (auto [destination, backend] :
         {std::pair{htonl(0x0a000001), Backend{1, 0x2e, htonl(0x0a000101), 0}},
          std::pair{htonl(0x0a000002), Backend{0, 0x10, htonl(0x0a000102), 0}}}) {
      auto updater = bpf::MapUpdater::forMap(opt.mapFd("backends"), "backends", &opt.guard());
      ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
      ASSERT_THAT_ERROR(updater->update(bytesOf(destination), bytesOf(backend)),
                        llvm::Succeeded());
    }
  };
  configure(host);
  configure(bpfBuild.opt());
  auto counted = [](runtime::Optimizer &opt, uint32_t destination) {
    Backend backend = {};
    uint32_t key = htonl(destination);
    EXPECT_EQ(bpf_map_lookup_elem(opt.mapFd("backends"), &key, &backend), 0);
    return backend.packets;
  };
  auto sameAnswers = [&](const char *which, auto fdOf) {
    for (uint32_t destination : {0x0a000001u, 0x0a000002u, 0x0a000003u})
      for (uint8_t tos : {0, 7}) {
        Bytes packet = buildPacket({.daddr = destination, .tos = tos});
        RunResult retargeted = runOnce(fdOf(host), packet);
        EXPECT_EQ(retargeted, runOnce(fdOf(bpfBuild.opt()), packet))
            << which << ": destination " << std::hex << destination;
      }
    for (uint32_t destination : {0x0a000001u, 0x0a000002u})
      EXPECT_EQ(counted(host, destination), counted(bpfBuild.opt(), destination))
          << which << ": the counter of " << std::hex << destination;
  };
  sameAnswers("original", [](runtime::Optimizer &opt) { return opt.originalFd(); });
  for (runtime::Optimizer *opt : {&host, &bpfBuild.opt()})
    EXPECT_EQ(runOnce(opt->originalFd(), buildPacket({.daddr = 0x0a000001})).verdict,
              uint32_t(XDP_TX));
  EXPECT_EQ(counted(host, 0x0a000001), 3u) << "two packets above, one here";
  ASSERT_TRUE(host.runCycle().installed());
  ASSERT_TRUE(bpfBuild.cycle().installed());
  EXPECT_NE(host.activeFd(), host.originalFd());
  sameAnswers("specialized", [](runtime::Optimizer &opt) { return opt.activeFd(); });
}

} // namespace
} // namespace morpheus::testing
