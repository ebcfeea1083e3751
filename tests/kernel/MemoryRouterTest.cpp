// The router (nf/router/router.bpf.c) under Morpheus for hundreds of
// compiled cycles, a route changed through Morpheus before each: resident
// memory and open descriptors stay flat (FlatMemory.h, MemoryTest.cpp).
#include "FlatMemory.h"
#include "KernelSupport.h"

#include "backend/bpf/MapUpdater.h"

#include <arpa/inet.h>
#include <llvm/Testing/Support/Error.h>

extern "C" {
#include "../../nf/router/router.h"
}

namespace morpheus::testing {
namespace {

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
