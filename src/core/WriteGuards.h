// Per-key write counts for tables the data plane writes: what the table
// passes, the backends' runtimes (which keep the counters) and the
// optimizers (which read them before a snapshot) must agree on.
#pragma once

#include "core/Tables.h"

#include <cstdint>
#include <set>
#include <string>

namespace morpheus::core {

// Per-entry guards for tables the data plane writes (guard-table-writes,
// heavy-hitter-fast-path): every data-plane write of such a table adds one
// to a counter chosen by the written key (writeBucket), after the write; a
// fast path answers a hot key only while its bucket's counter still holds
// what it held before the snapshot was read.
struct WriteGuardOptions {
  // Runtime function `void (i32 bucket)`: adds one to the bucket's counter,
  // atomically (writes on several CPUs are never lost).
  std::string bumpFunction;
  // Runtime function `i64 (i32 bucket)`: the bucket's counter.
  std::string countFunction;
  uint32_t bucketBits = 0; // 1 << bucketBits counters
  std::set<std::string> excludedTables; // the operator's --no-profile
};

// The counter bucket of `key` in `table`: the key's bytes folded into 64
// bits (byte j shifted to its place in the j/8th 8-byte word, words xored:
// independent of how the bytes are loaded), salted with the table's name,
// multiplied by a 64-bit odd constant, top `bucketBits` bits.
// Defined in passes/TableRewriting.cpp beside emitWriteBucket, which
// computes the same in the program.
uint32_t writeBucket(const std::string &table, const Bytes &key, uint32_t bucketBits,
                     bool littleEndian);

} // namespace morpheus::core
