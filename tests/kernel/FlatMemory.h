// What the memory tests share (MemoryTest.cpp, MemoryRouterTest.cpp): a
// cycle that compiles a new version must leave no memory and no file
// descriptor behind. Not timed: it asserts memory, not seconds.
#pragma once

#include "ProcessMemory.h"
#include "runtime/Optimizer.h"

#include <gtest/gtest.h>

#include <functional>
#include <optional>

namespace morpheus::testing {

constexpr unsigned WarmUpCycles = 30;
constexpr unsigned MeasuredCycles = 300;
// What the process may grow by over the measured cycles: allocator noise,
// far below what one version per cycle kept (the old code: 70 MB).
constexpr double GrowthBoundMb = 6;

// Runs WarmUpCycles then MeasuredCycles cycles, `change(cycle)` through
// Morpheus before each; every cycle must install a new version.
inline void expectFlatMemory(runtime::Optimizer &optimizer,
                      const std::function<void(unsigned cycle)> &change) {
  std::optional<MemoryMark> warm;
  size_t descriptors = 0;
  for (unsigned cycle = 0; cycle < WarmUpCycles + MeasuredCycles; ++cycle) {
    if (cycle == WarmUpCycles) {
      warm.emplace();
      descriptors = openDescriptors();
    }
    change(cycle);
    core::CycleReport report = optimizer.runCycle();
    ASSERT_TRUE(report.installed()) << "cycle " << cycle << ": " << report.describe();
  }
  warm->expectAtMost(GrowthBoundMb, MeasuredCycles);
  EXPECT_EQ(openDescriptors(), descriptors) << "open file descriptors after the cycles";
}

} // namespace morpheus::testing
