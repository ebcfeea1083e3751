// Sub-batches with prefetching (EventLoop::prefetching, a handler's
// MU_PREFETCH function, mu_prefetch): the router's prefetch function is
// found and JIT-compiled, every sub-batch size treats packets and tables
// exactly as the loop without prefetching does, and a prefetch function
// that writes is refused at load, named.
#include "UserRouter.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::user {
namespace {

using namespace testing;

TEST(UserPrefetch, SubBatchesWithPrefetchingTreatPacketsAsWithout) {
  auto plain = loadRouter(), prefetched = loadRouter();
  ASSERT_TRUE(plain && prefetched);
  ASSERT_TRUE(prefetched->prefetcher());
  configure(plain->tables());
  configure(prefetched->tables());
  for (Handler *router : {plain.get(), prefetched.get()}) {
    auto cycle = router->specialize();
    ASSERT_THAT_EXPECTED(cycle, llvm::Succeeded());
    ASSERT_EQ(cycle->outcome, Cycle::Outcome::Installed);
  }
  ReplayRing ring = ringOf(samplePackets(), 5);
  for (uint32_t subBatch : {1u, 3u, 8u, 32u}) {
    SCOPED_TRACE("sub-batch " + std::to_string(subBatch));
    auto expected = EventLoop(plain->trampoline(), 16).collect(ring);
    auto actual = EventLoop(prefetched->trampoline(), 16)
                      .prefetching(prefetched->prefetcher(), subBatch)
                      .collect(ring);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
    EXPECT_EQ(prefetched->tables().dump(), plain->tables().dump());
  }
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

} // namespace
} // namespace morpheus::user
