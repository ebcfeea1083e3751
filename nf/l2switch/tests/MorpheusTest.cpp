// The switch under Morpheus: configured through the control-plane code,
// specialized by one cycle, the specialized program must do exactly what the
// original does for every frame of the semantic tests: verdict, output
// bytes, FDB writes and counters, from the same FDB state each time. Then
// again with the guard tripped (packets handed to the original).
#include "SwitchTestSupport.h"

#include "runtime/Optimizer.h"

#include <bpf/bpf.h>

#include <iostream>
#include <tuple>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::l2switch::testing {
namespace {

// FDB contents as far as both runs must agree: port, flags, and whether the
// entry was (re)stamped since `baselineNs`.
using FdbView = std::map<l2sw_fdb_key, std::tuple<uint32_t, uint32_t, bool>>;

class FdbFixture {
public:
  FdbFixture(int fdbFd, std::map<l2sw_fdb_key, l2sw_fdb_entry> baseline, uint64_t baselineNs)
      : fd(fdbFd), baseline(std::move(baseline)), baselineNs(baselineNs) {}

  // Learned entries back to the baseline; static ones are left alone.
  void reset() {
    for (const auto &[key, entry] : readFdbMap(fd))
      if (!(entry.flags & L2SW_FDB_STATIC))
        bpf_map_delete_elem(fd, &key);
    for (const auto &[key, entry] : baseline)
      ASSERT_EQ(bpf_map_update_elem(fd, &key, &entry, BPF_ANY), 0);
  }

  FdbView view() {
    FdbView out;
    for (const auto &[key, entry] : readFdbMap(fd))
      out[key] = {entry.ifindex, entry.flags, entry.last_seen_ns != baselineNs};
    return out;
  }

private:
  int fd;
  std::map<l2sw_fdb_key, l2sw_fdb_entry> baseline;
  uint64_t baselineNs;
};

void expectSameBehaviour(runtime::Optimizer &opt, int original, int specialized) {
  // Recent enough not to be refreshed, and never the stamp of a new write.
  uint64_t baselineNs = coarseNowNs() - 100000000;
  FdbFixture fdb(opt.mapFd("fdb"), baselineFdb(baselineNs), baselineNs);
  auto stats = [&] { return morpheus::testing::perCpuCounters(opt.mapFd("stats"), STAT_MAX); };
  for (const Ingress &ingress : semanticCorpus()) {
    SCOPED_TRACE(ingress.description);
    uint32_t ifindex = SwitchNetns::get().ifindex(ingress.port);
    fdb.reset();
    std::vector<uint64_t> before = stats();
    RunResult expected = morpheus::testing::runOnce(original, ingress.frame, ifindex);
    std::vector<uint64_t> middle = stats();
    FdbView expectedFdb = fdb.view();
    fdb.reset();
    RunResult actual = morpheus::testing::runOnce(specialized, ingress.frame, ifindex);
    std::vector<uint64_t> after = stats();
    EXPECT_EQ(actual.verdict, expected.verdict);
    EXPECT_EQ(actual.output, expected.output);
    EXPECT_TRUE(fdb.view() == expectedFdb);
    for (size_t stat = 0; stat < STAT_MAX; ++stat)
      EXPECT_EQ(after[stat] - middle[stat], middle[stat] - before[stat]) << "stat " << stat;
  }
}

TEST(Morpheus, SpecializedSwitchBehavesLikeTheOriginal) {
  NetnsGuard netns(SwitchNetns::get().name());
  PinDir pins("l2switch_morpheus");
  runtime::OptimizerOptions options;
  options.pinDir = pins.path();
  auto created = runtime::Optimizer::create(
      morpheus::testing::sourcePath("nf/l2switch/l2switch.bpf.c"), options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &opt = **created;

  TempFile ports("ports.conf", PortsConfig);
  Error err = loadPorts(pins.path(), ports.path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  TempFile statics("static.conf", "02:00:00:00:00:0a 20 a3\n");
  err = loadStatic(pins.path(), statics.path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());

  core::CycleReport report = opt.runCycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  for (const core::SiteDecision &decision : report.log.decisions)
    if (decision.applied)
      std::cout << "specialized " << decision.table << " site #" << decision.site << " ("
                << decision.location << ") by " << decision.pass << ": " << decision.detail
                << "\n";
  int original = opt.originalFd();
  int specialized = opt.activeFd();
  ASSERT_NE(original, specialized);
  // Both port lookups became compares: the specialized code no longer
  // needs the ports table.
  EXPECT_TRUE(nf::testing::usesMap(original, opt.mapFd("ports")));
  EXPECT_FALSE(nf::testing::usesMap(nf::testing::SpecializedAlone(opt).programFd(),
                                    opt.mapFd("ports")));

  expectSameBehaviour(opt, original, specialized);

  opt.guard().bump();
  expectSameBehaviour(opt, original, specialized);
}

} // namespace
} // namespace morpheus::nf::l2switch::testing
