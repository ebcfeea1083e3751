// Sub-batches with prefetching (EventLoop::prefetching, mu_prefetch): the
// router's own prefetch function (MU_PREFETCH) is found and JIT-compiled;
// the one derived from its code (core/PrefetchStage.h) asks for the
// routes; with either, every sub-batch size treats packets and tables
// exactly as the loop without prefetching does, and either alone changes
// nothing; a prefetch function that writes is refused at load, named.
#include "SubBatches.h"
#include "UserRouter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::user {
namespace {

using namespace testing;

// Two routers on equal tables, each specialized (sub-batches run the
// installed version; the prefetch function is the generic one's).
std::pair<std::unique_ptr<Handler>, std::unique_ptr<Handler>>
configuredRouters(HandlerOptions::Prefetch prefetch) {
  auto plain = loadRouter({}, {}, HandlerOptions::Prefetch::None);
  auto prefetched = loadRouter({}, {}, prefetch);
  for (Handler *router : {plain.get(), prefetched.get()}) {
    if (!router)
      return {};
    configure(router->tables());
    auto cycle = router->specialize();
    EXPECT_THAT_EXPECTED(cycle, llvm::Succeeded());
    if (cycle)
      EXPECT_EQ(cycle->outcome, core::CycleOutcome::Installed);
  }
  return {std::move(plain), std::move(prefetched)};
}

TEST(UserPrefetch, SubBatchesWithPrefetchingTreatPacketsAsWithout) {
  auto [plain, prefetched] = configuredRouters(HandlerOptions::Prefetch::OwnElseDerived);
  ASSERT_TRUE(plain && prefetched);
  EXPECT_FALSE(plain->prefetcher());
  EXPECT_EQ(prefetched->prefetchOrigin().kind, PrefetchStageOrigin::Kind::Written);
  ReplayRing ring = ringOf(samplePackets(), 5);
  expectPrefetchChangesNothing(*prefetched, ring);
  expectSubBatchesTreatPacketsAsWithout(*plain, *prefetched, ring);
}

TEST(UserPrefetch, TheStageDerivedFromTheRouterAsksForItsRoutesAndTreatsPacketsAsWithout) {
  auto [plain, derived] = configuredRouters(HandlerOptions::Prefetch::Derived);
  ASSERT_TRUE(plain && derived);
  const PrefetchStageOrigin &origin = derived->prefetchOrigin();
  ASSERT_EQ(origin.kind, PrefetchStageOrigin::Kind::Derived) << origin.declined;
  EXPECT_THAT(origin.tables, ::testing::ElementsAre("routes"));
  EXPECT_EQ(describe(origin).rfind("derived from the handler: prefetches ", 0), 0u)
      << describe(origin);
  ReplayRing ring = ringOf(samplePackets(), 5);
  expectPrefetchChangesNothing(*derived, ring);
  expectSubBatchesTreatPacketsAsWithout(*plain, *derived, ring);
}

TEST(UserPrefetch, APrefetchFunctionThatWritesIsRefusedNamingIt) {
  HandlerOptions options;
  options.entry = "counting";
  auto handler = Handler::load(std::string(MORPHEUS_SOURCE_DIR) + "/tests/user/handlers/bad_prefetch.c",
                               options);
  ASSERT_FALSE(handler);
  std::string message = toString(handler.takeError());
  EXPECT_NE(message.find("prefetch function 'counting_prefetch'"), std::string::npos) << message;
}

// `reflect` looks nothing up: nothing to derive, and the reason is said.
TEST(UserPrefetch, AHandlerThatLooksNothingUpGetsNoDerivedStageAndSaysWhy) {
  HandlerOptions options;
  options.entry = "reflect";
  auto handler =
      Handler::load(std::string(MORPHEUS_SOURCE_DIR) + "/tests/user/handlers/stateless.c", options);
  ASSERT_THAT_EXPECTED(handler, llvm::Succeeded());
  EXPECT_FALSE((*handler)->prefetcher());
  EXPECT_EQ((*handler)->prefetchOrigin().kind, PrefetchStageOrigin::Kind::None);
  EXPECT_THAT(describe((*handler)->prefetchOrigin()),
              ::testing::HasSubstr("no path reaches a lookup with a per-packet key"));
}

} // namespace
} // namespace morpheus::user
