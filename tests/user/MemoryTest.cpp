// The user-space backend runs for months too: a cycle that compiles a new
// version must leave no memory behind once the version it replaced is
// gone. A route changes through the tables' guarded API before every
// cycle, so every cycle JIT-compiles and installs a new version. Before
// each version got an LLVMContext of its own (core/PristineBitcode.h),
// these cycles grew the process by about 0.13 MB each, for good.
// Not timed: it asserts memory, not seconds.
#include "ProcessMemory.h"
#include "UserRouter.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>

#include <optional>

namespace morpheus::user {
namespace {

using namespace testing;

TEST(UserMemory, CompiledVersionsLeaveNothingBehind) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  configure(router->tables());
  constexpr unsigned WarmUpCycles = 30, MeasuredCycles = 200;
  // More routes than the inline limit: the routes' table is compiled into
  // arrays of constants, new ones for every change.
  constexpr uint32_t Prefixes = 200;
  route_key key = routeKey("10.200.0.0", 24);
  route value{};
  value.gateway = htonl(0xc0a80101);
  for (uint32_t prefix = 0; prefix < Prefixes; ++prefix) {
    key.addr = htonl(0x0ac80000 | prefix << 8);
    ASSERT_THAT_ERROR(router->tables().update("routes", bytesOfValue(key), bytesOfValue(value)),
                      llvm::Succeeded());
  }
  constexpr double GrowthBoundMb = 5; // the old code: 26 MB
  std::optional<morpheus::testing::MemoryMark> warm;
  for (unsigned cycle = 0; cycle < WarmUpCycles + MeasuredCycles; ++cycle) {
    if (cycle == WarmUpCycles)
      warm.emplace();
    // A route to another port every cycle.
    key.addr = htonl(0x0ac80000 | (cycle % Prefixes) << 8);
    value.port = 1 + cycle % 3;
    ASSERT_THAT_ERROR(router->tables().update("routes", bytesOfValue(key), bytesOfValue(value)),
                      llvm::Succeeded());
    auto specialized = router->specialize();
    ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
    ASSERT_EQ(specialized->outcome, core::CycleOutcome::Installed) << "cycle " << cycle;
  }
  warm->expectAtMost(GrowthBoundMb, MeasuredCycles);
  EXPECT_EQ(router->liveVersions(), 2u) << "the generic version and the installed one";
}

} // namespace
} // namespace morpheus::user
