// The user-space backend runs for months too: a cycle that compiles a new
// version must leave no memory behind once the version it replaced is
// gone. A route changes through the tables' guarded API before every
// cycle, so every cycle JIT-compiles and installs a new version. Before
// each version got an LLVMContext of its own (core/PristineBitcode.h),
// these cycles grew the process by about 0.13 MB each, for good.
// Not timed: it asserts memory, not seconds.
#include "UserRouter.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>
#include <unistd.h>

#include <fstream>

namespace morpheus::user {
namespace {

using namespace testing;

double residentMb() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

TEST(UserMemory, CompiledVersionsLeaveNothingBehind) {
  auto router = loadRouter();
  ASSERT_TRUE(router);
  configure(router->tables());
  constexpr unsigned WarmUpCycles = 30, MeasuredCycles = 200;
  constexpr uint32_t Prefixes = 20;
  constexpr double GrowthBoundMb = 5; // the old code: 26 MB
  double warm = 0;
  for (unsigned cycle = 0; cycle < WarmUpCycles + MeasuredCycles; ++cycle) {
    if (cycle == WarmUpCycles)
      warm = residentMb();
    // A port and prefix that change every cycle.
    route_key key = routeKey("10.200.0.0", 24);
    key.addr = htonl(0x0ac80000 | (cycle % Prefixes) << 8);
    route value{};
    value.gateway = htonl(0xc0a80101);
    value.port = cycle % 3;
    ASSERT_THAT_ERROR(router->tables().update("routes", bytesOfValue(key), bytesOfValue(value)),
                      llvm::Succeeded());
    auto specialized = router->specialize();
    ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
    ASSERT_EQ(specialized->outcome, Cycle::Outcome::Installed) << "cycle " << cycle;
  }
  double growth = residentMb() - warm;
  EXPECT_LT(growth, GrowthBoundMb)
      << "resident memory grew by " << growth << " MB over " << MeasuredCycles
      << " compiled cycles (" << growth * 1024 / MeasuredCycles << " KB per cycle)";
  EXPECT_EQ(router->liveVersions(), 2u) << "the generic version and the installed one";
}

} // namespace
} // namespace morpheus::user
