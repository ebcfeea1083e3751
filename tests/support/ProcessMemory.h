// What this process holds, for tests that a long-running loop leaves
// nothing behind (kernel and user-space memory tests). Not timed: memory
// and descriptors, not seconds.
#pragma once

#include <gtest/gtest.h>

#include <dirent.h>
#include <malloc.h>
#include <unistd.h>

#include <cstdint>
#include <fstream>

namespace morpheus::testing {

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

// The heap in use and resident memory when made; expectAtMost says how
// much either grew since, per cycle too.
class MemoryMark {
public:
  MemoryMark() : heap(heapInUseMb()), resident(residentMb()) {}

  void expectAtMost(double boundMb, unsigned cycles) const {
    double heapGrowth = heapInUseMb() - heap;
    EXPECT_LT(heapGrowth, boundMb)
        << "the heap in use grew by " << heapGrowth << " MB over " << cycles
        << " compiled cycles (" << heapGrowth * 1024 / cycles << " KB per cycle)";
    double growth = residentMb() - resident;
    EXPECT_LT(growth, boundMb) << "resident memory grew by " << growth << " MB over " << cycles
                               << " compiled cycles (" << growth * 1024 / cycles
                               << " KB per cycle)";
  }

private:
  double heap, resident;
};

} // namespace morpheus::testing
