// Morpheus runs for months: a cycle that compiles a new version must leave
// no memory and no file descriptor behind. Each test changes a table
// through Morpheus before every cycle (so every cycle builds, validates
// and installs a new version), warms up, then runs hundreds of compiled
// cycles and checks the process's resident memory and open descriptors.
// Before each version got an LLVMContext of its own
// (core/PristineBitcode.h), the same cycles grew the process by 0.23 MB
// each (policy_fwd; 70 MB over these 300 cycles), never given back.
// Not timed: it asserts memory, not seconds.
#include "PolicyFwd.h"

#include "backend/bpf/MapUpdater.h"

#include <dirent.h>
#include <unistd.h>

#include <fstream>
#include <functional>
#include <llvm/Testing/Support/Error.h>

extern "C" {
#include "../../nf/router/router.h"
}

namespace morpheus::testing {
namespace {

constexpr unsigned WarmUpCycles = 30;
constexpr unsigned MeasuredCycles = 300;
// What the process may grow by over the measured cycles: allocator noise,
// far below what one version per cycle kept (the old code: 70 MB).
constexpr double GrowthBoundMb = 6;

double residentMb() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

size_t openDescriptors() {
  size_t count = 0;
  DIR *dir = opendir("/proc/self/fd");
  if (!dir)
    return 0;
  while (dirent *entry = readdir(dir))
    count += entry->d_name[0] != '.';
  closedir(dir);
  return count - 1; // the directory's own
}

// Runs WarmUpCycles then MeasuredCycles cycles, `change(cycle)` through
// Morpheus before each; every cycle must install a new version.
void expectFlatMemory(runtime::Optimizer &optimizer,
                      const std::function<void(unsigned cycle)> &change) {
  double warm = 0;
  size_t descriptors = 0;
  for (unsigned cycle = 0; cycle < WarmUpCycles + MeasuredCycles; ++cycle) {
    if (cycle == WarmUpCycles) {
      warm = residentMb();
      descriptors = openDescriptors();
    }
    change(cycle);
    runtime::CycleReport report = optimizer.runCycle();
    ASSERT_TRUE(report.installed()) << "cycle " << cycle << ": " << report.describe();
  }
  double growth = residentMb() - warm;
  EXPECT_LT(growth, GrowthBoundMb)
      << "resident memory grew by " << growth << " MB over " << MeasuredCycles
      << " compiled cycles (" << growth * 1024 / MeasuredCycles << " KB per cycle)";
  EXPECT_EQ(openDescriptors(), descriptors) << "open file descriptors after the cycles";
}

TEST(Memory, PolicyFwdCyclesLeaveNothingBehind) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  constexpr uint32_t Destinations = 8;
  for (uint32_t i = 0; i < Destinations; ++i)
    fwd.setPolicy(policyKey(0x0a000001 + i, 80, IPPROTO_UDP), policyValue(ACTION_TX, i));
  // A value never seen before every cycle: its bytes are new constants in
  // the version's code.
  auto valueOf = [](unsigned cycle) {
    policy_value value = policyValue(ACTION_TX);
    value.dmac[0] = uint8_t(cycle);
    value.dmac[1] = uint8_t(cycle >> 8);
    return value;
  };
  unsigned last = 0;
  expectFlatMemory(fwd.opt(), [&](unsigned cycle) {
    fwd.setPolicy(policyKey(0x0a000001 + cycle % Destinations, 80, IPPROTO_UDP), valueOf(cycle));
    last = cycle;
  });
  // The last version still forwards as the original does.
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001 + last % Destinations});
  RunResult specialized = runOnce(fwd.opt().activeFd(), packet);
  EXPECT_EQ(specialized, runOnce(fwd.opt().originalFd(), packet));
  EXPECT_EQ(specialized.verdict, uint32_t(XDP_TX));
  EXPECT_EQ(specialized.output[0], uint8_t(last)) << "the last value's destination MAC";
}

TEST(Memory, RouterCyclesLeaveNothingBehind) {
  PinDir pins("memory_router");
  runtime::OptimizerOptions options;
  options.pinDir = pins.path();
  auto created = runtime::Optimizer::create(sourcePath("nf/router/router.bpf.c"), options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &optimizer = **created;
  auto routes = bpf::MapUpdater::forMap(optimizer.mapFd("routes"), "routes", &optimizer.guard());
  ASSERT_THAT_EXPECTED(routes, llvm::Succeeded());
  constexpr uint32_t Prefixes = 20;
  auto routeTo = [&](uint32_t prefix, uint32_t gateway, uint32_t port) {
    route_key key{24, htonl(0x0a000000 | prefix << 8)};
    route value{htonl(gateway), port, ROUTE_FORWARD};
    ASSERT_THAT_ERROR(routes->update(bytesOf(key), bytesOf(value)), llvm::Succeeded());
  };
  for (uint32_t prefix = 0; prefix < Prefixes; ++prefix)
    routeTo(prefix, 0x0a010001 + prefix, prefix % 3);
  // A gateway never seen before every cycle.
  expectFlatMemory(optimizer, [&](unsigned cycle) {
    routeTo(cycle % Prefixes, 0x0b000000 + cycle, cycle % 3);
  });
}

} // namespace
} // namespace morpheus::testing
