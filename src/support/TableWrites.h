// Tables a network function's control code fills, whichever data plane
// holds them: the control code of nf/ may include support/ but never a
// backend, so the user-space backend's tables (user::TableSet) are written
// through this interface (nf/firewall/UserRules.h, nf/nat/UserNat.h). A
// configuration is written as one change: specialized code built before it
// never answers from half of it (the backend bumps its guard around it).
#pragma once

#include "support/Bytes.h"
#include "support/Error.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <functional>
#include <string>

namespace morpheus {

class TableWrites {
public:
  virtual ~TableWrites() = default;

  // Runs `writes` (calls of set and removeWhere) as one change.
  virtual Error change(llvm::function_ref<Error()> writes) = 0;
  // Inside a change: `table` maps `key` to `value`; an error names the
  // table and the key.
  virtual Error set(const std::string &table, const Bytes &key, const Bytes &value) = 0;
  // Inside a change: removes every entry of `table` that `doomed` (its key
  // and value bytes) picks.
  virtual Error removeWhere(const std::string &table,
                            const std::function<bool(const Bytes &, const void *)> &doomed) = 0;
};

} // namespace morpheus
