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
#include <malloc.h>
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

// The bytes malloc has handed out and not taken back: unlike resident
// memory, not hidden by free memory an earlier test left in the heap.
double heapInUseMb() {
  struct mallinfo2 info = mallinfo2();
  return double(info.uordblks + info.hblkhd) / (1 << 20);
}

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
  double warm = 0, warmHeap = 0;
  for (unsigned cycle = 0; cycle < WarmUpCycles + MeasuredCycles; ++cycle) {
    if (cycle == WarmUpCycles) {
      warm = residentMb();
      warmHeap = heapInUseMb();
    }
    // A route to another port every cycle.
    key.addr = htonl(0x0ac80000 | (cycle % Prefixes) << 8);
    value.port = 1 + cycle % 3;
    ASSERT_THAT_ERROR(router->tables().update("routes", bytesOfValue(key), bytesOfValue(value)),
                      llvm::Succeeded());
    auto specialized = router->specialize();
    ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
    ASSERT_EQ(specialized->outcome, Cycle::Outcome::Installed) << "cycle " << cycle;
  }
  double heapGrowth = heapInUseMb() - warmHeap;
  EXPECT_LT(heapGrowth, GrowthBoundMb)
      << "the heap in use grew by " << heapGrowth << " MB over " << MeasuredCycles
      << " compiled cycles (" << heapGrowth * 1024 / MeasuredCycles << " KB per cycle)";
  double growth = residentMb() - warm;
  EXPECT_LT(growth, GrowthBoundMb)
      << "resident memory grew by " << growth << " MB over " << MeasuredCycles
      << " compiled cycles (" << growth * 1024 / MeasuredCycles << " KB per cycle)";
  EXPECT_EQ(router->liveVersions(), 2u) << "the generic version and the installed one";
}

} // namespace
} // namespace morpheus::user
