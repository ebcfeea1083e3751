// The tables of the user-space data plane: what MU_TABLE definitions
// (include/morpheus_user.h) become at run time. Handler code reaches them
// through mu_lookup/mu_update/mu_delete (TableApi.cpp), the control plane
// through TableSet (which brackets every change with the guard), the
// optimizer reads them into a core::TableSnapshot (readSnapshot).
//
// Values live at fixed addresses for an entry's lifetime (a slot pool per
// table), as in BPF maps, so a pointer a lookup returned stays valid while
// the handler uses it. Tables are not synchronised: the data plane and the
// control plane run on one thread, changes between bursts (EventLoop).
#pragma once

#include "core/Tables.h"
#include "support/Error.h"

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

extern "C" {
#include "backend/user/include/morpheus_user.h"
}

namespace morpheus::user {

using core::Bytes;

class Table {
public:
  virtual ~Table() = default;

  const core::TableInfo &info() const { return tableInfo; }
  mu_table_kind kind() const { return tableKind; }

  // The value under `key` (keySize bytes), or nullptr.
  virtual void *lookup(const void *key) = 0;
  // false when the table is full or the key is not one this table holds
  // (an index out of range, a prefix length beyond the address).
  virtual bool update(const void *key, const void *value) = 0;
  virtual bool remove(const void *key) = 0;
  // Starts loading what a lookup of `key` reads first (a hint: nothing
  // changes, nothing is returned; tables with nothing worth it do nothing).
  virtual void prefetch(const void *) const {}
  // Every entry (key, value) in a stable order; `visit` returns false to stop.
  virtual void forEach(const std::function<bool(const Bytes &, const void *)> &visit) const = 0;
  virtual size_t size() const = 0;

protected:
  Table(core::TableInfo info, mu_table_kind kind) : tableInfo(std::move(info)), tableKind(kind) {}
  core::TableInfo tableInfo;
  mu_table_kind tableKind;
};

// The core's view of a table of `kind` (TableMatch and type name), or an
// error naming the table when the definition is not one the runtime makes.
Expected<core::TableInfo> tableInfoFor(const std::string &name, const mu_table_def &def);

// A table as `def` describes it.
Expected<std::unique_ptr<Table>> makeTable(const std::string &name, const mu_table_def &def);

} // namespace morpheus::user
