#include "core/Tables.h"

namespace morpheus::core {

std::optional<const TableEntry *> TableContents::known(const Bytes &key) const {
  for (const TableEntry &entry : entries)
    if (entry.key == key)
      return &entry;
  if (complete || probedKeys.count(key))
    return nullptr;
  return std::nullopt;
}

} // namespace morpheus::core
