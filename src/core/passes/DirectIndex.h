// hash-as-array's table for a read-only hash whose keys fall in a small
// range: one 16-bit slot per key of the range (the key read as the native
// integer the program's load gives), 0 for a key the table does not hold,
// i + 1 for entry i of the snapshot. Shared by hash-as-array, which builds
// it, and inline-small-table, which offers the cost model its chain
// against it where the chain would fold nothing (an index chain).
#pragma once

#include "core/CostModel.h"
#include "core/Tables.h"
#include "support/Error.h"

#include <cstdint>
#include <vector>

namespace morpheus::core {

// The most slots a direct index has: every key of 16 bits, or a range of
// that many keys of a wider one.
constexpr uint64_t DirectIndexSlotLimit = 1u << 16;

struct DirectIndex {
  uint32_t keyBytes = 0;      // 1, 2, 4 or 8
  uint64_t first = 0;         // the smallest key, as an integer
  std::vector<uint16_t> slots; // one per key from `first`
  uint64_t bytes() const { return slots.size() * sizeof(uint16_t); }
};

// The direct index of `table` (an exact-match table) from its snapshot, or
// why there is none: the snapshot must hold the whole table, every value
// the same on every CPU, keys of 1, 2, 4 or 8 bytes spanning at most
// DirectIndexSlotLimit integers.
Expected<DirectIndex> directIndex(const TableInfo &table, const TableContents &contents,
                                  bool littleEndian);

// What the cost model needs to price it.
TableShape directIndexShape(const TableInfo &table, const TableContents &contents,
                            const DirectIndex &index);

} // namespace morpheus::core
