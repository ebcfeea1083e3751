#include "core/passes/DirectIndex.h"

#include "core/passes/TableRewriting.h"

#include <algorithm>

namespace morpheus::core {

Expected<DirectIndex> directIndex(const TableInfo &table, const TableContents &contents,
                                  bool littleEndian) {
  if (table.match != TableMatch::Exact)
    return makeError("not an exact-match table");
  if (table.keySize != 1 && table.keySize != 2 && table.keySize != 4 && table.keySize != 8)
    return makeError("a key of {0} bytes (1, 2, 4 or 8 are indexed)", table.keySize);
  if (!contents.complete)
    return makeError("not read whole (more than {0} entries)", WholeTableReadLimit);
  if (contents.entries.empty())
    return makeError("no entries");
  if (contents.entries.size() >= 0xffff)
    return makeError("{0} entries", contents.entries.size());
  DirectIndex index;
  index.keyBytes = table.keySize;
  std::vector<uint64_t> keys;
  for (const TableEntry &entry : contents.entries) {
    if (!entry.value)
      return makeError("per-CPU values differ between CPUs");
    keys.push_back(chunkValue(entry.key, {0, table.keySize}, littleEndian));
  }
  auto [low, high] = std::minmax_element(keys.begin(), keys.end());
  if (*high - *low >= DirectIndexSlotLimit)
    return makeError("keys spanning {0} integers (at most {1} are indexed)",
                     *high - *low + 1, DirectIndexSlotLimit);
  index.first = *low;
  index.slots.assign(*high - *low + 1, 0);
  for (size_t i = 0; i < keys.size(); ++i)
    index.slots[keys[i] - index.first] = uint16_t(i + 1);
  return index;
}

TableShape directIndexShape(const TableInfo &table, const TableContents &contents,
                            const DirectIndex &index) {
  TableShape shape;
  shape.match = TableMatch::Exact;
  shape.entries = contents.entries.size();
  shape.keySize = table.keySize;
  shape.indexBytes = index.bytes();
  return shape;
}

} // namespace morpheus::core
