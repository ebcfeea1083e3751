// Per-key write counters of the user-space backend: the storage and the
// runtime functions core's guard-table-writes and heavy-hitter-fast-path
// call (WriteGuardOptions), as the eBPF backend's morpheus_writes map and
// its guard runtime give them in the kernel. A version counts, after each
// write of a table whose writes are guarded, one in the written key's
// bucket; a fast path answers a hot key of that table only while its
// bucket still holds what Handler read before the snapshot
// (GuardTableWrites.cpp says why that is exact).
//
// Every version the handler can run counts the same writes, the generic
// one included (Handler::load builds it through guard-table-writes when
// traffic is followed): a caller may install any version it kept (the
// trampoline is public), and a version built under a count the uncounted
// writes of another had moved past would answer stale entries.
#pragma once

#include "core/WriteGuards.h"

#include <llvm/IR/Module.h>

#include <atomic>
#include <cstdint>
#include <memory>

namespace morpheus::user {

class WriteCounters {
public:
  static constexpr uint32_t BucketBits = 12; // 4,096 counters, as in the kernel
  static constexpr const char *StorageSymbol = "morpheus_user_writes";
  static constexpr const char *BumpFunction = "morpheus_user_write_bump";
  static constexpr const char *CountFunction = "morpheus_user_write_count";

  WriteCounters();
  const void *storage() const { return counters.get(); }
  // The bucket's counter (an acquire load: the writes it counts are seen
  // by the reads that follow).
  uint64_t read(uint32_t bucket) const;
  // Every counter set to what `live`'s holds (a shadow copy's counters:
  // ShadowCopies).
  void copyFrom(const WriteCounters &live);
  // The options the core's passes take to count into these counters.
  static core::WriteGuardOptions guardOptions();

  // Adds BumpFunction (`void (i32 bucket)`: an atomic add of one, after the
  // write it counts) and CountFunction (`i64 (i32 bucket)`: an acquire
  // load), internal and always inlined, over the storage declared as
  // StorageSymbol, to `module` where it calls them.
  static void linkFunctions(llvm::Module &module);

private:
  std::unique_ptr<std::atomic<uint64_t>[]> counters;
};

} // namespace morpheus::user
