// The router under Morpheus: configured through its own loaders (which go
// through MapUpdater and so bump the guard), every specialized version must
// treat every packet of the semantic cases exactly as the original does:
// verdict, output bytes and counter moves. Three configurations in turn:
// the test table; a moved neighbour and a default route (first with the
// stale specialized program deferring to the original, then re-specialized);
// the full Stanford table.
#include "RouterFixture.h"

#include "runtime/Optimizer.h"

#include <iostream>
#include <random>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::router::testing {
namespace {

using morpheus::testing::sourcePath;

class RouterUnderMorpheus : public ::testing::Test {
protected:
  void SetUp() override {
    runtime::OptimizerOptions options;
    options.pinDir = pins.path();
    auto created = runtime::Optimizer::create(sourcePath("nf/router/router.bpf.c"), options);
    ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
    optimizer = std::move(*created);
  }

  void specialize() {
    core::CycleReport report = optimizer->runCycle();
    ASSERT_TRUE(report.installed()) << report.describe();
    ASSERT_NE(optimizer->activeFd(), optimizer->originalFd());
    std::cout << "[ cycle " << report.cycle << " ] " << report.instructions << " instructions\n";
    for (const core::SiteDecision &decision : report.log.decisions)
      std::cout << "  " << (decision.applied ? "applied " : "kept    ") << decision.table
                << " site #" << decision.site << " " << decision.pass << ": " << decision.detail
                << "\n";
    lastLog = report.log;
  }

  bool applied(const std::string &table, const std::string &pass) const {
    for (const core::SiteDecision &decision : lastLog.decisions)
      if (decision.applied && decision.table == table && decision.pass == pass)
        return true;
    return false;
  }

  void expectSameBehaviour(const std::vector<Case> &cases) {
    for (const Case &c : cases)
      router::testing::expectSameBehaviour(optimizer->originalFd(), optimizer->activeFd(),
                                           optimizer->mapFd("stats"), c.packet, c.name);
  }

  // Declared first: the optimizer's pins must go before the directory.
  PortInterfaces interfaces;
  TempDir files;
  morpheus::testing::PinDir pins{"nf_router_morpheus"};
  std::unique_ptr<runtime::Optimizer> optimizer;
  core::SpecializationLog lastLog;
};

TEST_F(RouterUnderMorpheus, SpecializedMatchesOriginal) {
  configure(pins.path(), interfaces, files);
  std::vector<Case> cases = baseCases();
  std::vector<Case> withDefault = defaultRouteCases();
  cases.insert(cases.end(), withDefault.begin(), withDefault.end());

  specialize();
  // Six neighbours fit the inline limit: the hash lookup becomes compares.
  EXPECT_TRUE(applied("neighbors", "inline-small-table"));
  // The original program still gives the expected answers...
  for (const Case &c : baseCases())
    expectCase(optimizer->originalFd(), optimizer->mapFd("stats"), c);
  // ...and the specialized one the same.
  expectSameBehaviour(cases);

  // Changes through the loaders trip the guard at once: the specialized
  // program, which has the old neighbour MACs as constants, defers to the
  // original until the next cycle.
  uint64_t version = optimizer->guard().version();
  std::string moved = BaseNeighbors;
  moved.replace(moved.find("02:00:00:00:00:04"), 17, "02:00:00:00:00:44");
  auto changed = loadNeighbors(files.write("moved.txt", moved), {pins.path(), true});
  ASSERT_THAT_EXPECTED(changed, llvm::Succeeded());
  auto added = loadRoutes(files.write("default.txt", DefaultRoute), {pins.path()});
  ASSERT_THAT_EXPECTED(added, llvm::Succeeded());
  EXPECT_GT(optimizer->guard().version(), version);
  packet::Ipv4Options host = toAddress("10.1.2.3");
  RunResult result = morpheus::testing::runOnce(optimizer->activeFd(), arriving(host));
  EXPECT_EQ(result.output, forwarded(host, {0x02, 0, 0, 0, 0, 0x44}, portMac(1)));
  expectSameBehaviour(cases);

  auto restored = loadNeighbors(files.write("neighbors.txt", BaseNeighbors), {pins.path(), true});
  ASSERT_THAT_EXPECTED(restored, llvm::Succeeded());
  specialize();
  for (const Case &c : defaultRouteCases())
    expectCase(optimizer->activeFd(), optimizer->mapFd("stats"), c);
  expectSameBehaviour(cases);

  // The real table: 2,592 routes over four ports, one gateway.
  Error bound = setPort(pins.path(), 3, interfaces.ifindex(3));
  ASSERT_THAT_ERROR(std::move(bound), llvm::Succeeded());
  auto routes = loadRoutes(sourcePath("nf/router/configs/stanford-yozb-routes.txt"),
                           {pins.path(), /*replace=*/true});
  ASSERT_THAT_EXPECTED(routes, llvm::Succeeded());
  auto neighbors = loadNeighbors(sourcePath("nf/router/configs/stanford-neighbors.txt"),
                                 {pins.path(), /*replace=*/true});
  ASSERT_THAT_EXPECTED(neighbors, llvm::Succeeded());
  specialize();
  std::mt19937 random(2592);
  for (int i = 0; i < 300; ++i) {
    packet::Ipv4Options ip = toAddress("0.0.0.0", uint8_t(random() % 4));
    ip.daddr = random();
    router::testing::expectSameBehaviour(optimizer->originalFd(), optimizer->activeFd(),
                                         optimizer->mapFd("stats"), arriving(ip),
                                         "random destination " + std::to_string(i));
  }
  expectSameBehaviour(cases);
}

} // namespace
} // namespace morpheus::nf::router::testing
