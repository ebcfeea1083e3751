// What the memory tests share (MemoryTest.cpp, MemoryRouterTest.cpp): a
// cycle that compiles a new version must leave no memory and no file
// descriptor behind. Not timed: it asserts memory, not seconds.
#pragma once

#include "runtime/Optimizer.h"

#include <dirent.h>
#include <malloc.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <fstream>
#include <functional>

namespace morpheus::testing {

constexpr unsigned WarmUpCycles = 30;
constexpr unsigned MeasuredCycles = 300;
// What the process may grow by over the measured cycles: allocator noise,
// far below what one version per cycle kept (the old code: 70 MB).
constexpr double GrowthBoundMb = 6;

inline double residentMb() {
  std::ifstream statm("/proc/self/statm");
  uint64_t size = 0, resident = 0;
  statm >> size >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / (1 << 20);
}

// The bytes malloc has handed out and not taken back: unlike resident
// memory, not hidden by free memory an earlier test left in the heap.
inline double heapInUseMb() {
  struct mallinfo2 info = mallinfo2();
  return double(info.uordblks + info.hblkhd) / (1 << 20);
}

inline size_t openDescriptors() {
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
inline void expectFlatMemory(runtime::Optimizer &optimizer,
                      const std::function<void(unsigned cycle)> &change) {
  double warm = 0, warmHeap = 0;
  size_t descriptors = 0;
  for (unsigned cycle = 0; cycle < WarmUpCycles + MeasuredCycles; ++cycle) {
    if (cycle == WarmUpCycles) {
      warm = residentMb();
      warmHeap = heapInUseMb();
      descriptors = openDescriptors();
    }
    change(cycle);
    runtime::CycleReport report = optimizer.runCycle();
    ASSERT_TRUE(report.installed()) << "cycle " << cycle << ": " << report.describe();
  }
  double heapGrowth = heapInUseMb() - warmHeap;
  EXPECT_LT(heapGrowth, GrowthBoundMb)
      << "the heap in use grew by " << heapGrowth << " MB over " << MeasuredCycles
      << " compiled cycles (" << heapGrowth * 1024 / MeasuredCycles << " KB per cycle)";
  double growth = residentMb() - warm;
  EXPECT_LT(growth, GrowthBoundMb)
      << "resident memory grew by " << growth << " MB over " << MeasuredCycles
      << " compiled cycles (" << growth * 1024 / MeasuredCycles << " KB per cycle)";
  EXPECT_EQ(openDescriptors(), descriptors) << "open file descriptors after the cycles";
}

} // namespace morpheus::testing
