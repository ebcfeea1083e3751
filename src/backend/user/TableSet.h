// The tables of one handler module: made from its MU_TABLE definitions,
// described to the core (a core::TableCatalog), changed by the control
// plane under the guard, read into a core::TableSnapshot for the passes.
#pragma once

#include "backend/user/Guard.h"
#include "backend/user/Table.h"
#include "core/Tables.h"
#include "support/Error.h"
#include "support/TableWrites.h"

#include <llvm/IR/Module.h>

#include <functional>
#include <map>
#include <memory>
#include <string>

namespace morpheus::user {

// Control code of nf/ writes it as TableWrites (support/TableWrites.h).
class TableSet final : public TableWrites {
public:
  // One table per MU_TABLE definition of `module` (globals in
  // MU_TABLE_SECTION with a { kind, key_size, value_size, max_entries }
  // initializer); an error names the module and the global at fault.
  static Expected<std::unique_ptr<TableSet>> fromModule(const llvm::Module &module);

  const core::TableCatalog &catalog() const { return tableCatalog; }
  Guard &guard() { return guardWord; }
  const Guard &guard() const { return guardWord; }
  const std::map<std::string, std::unique_ptr<Table>> &tables() const { return byName; }
  Table *find(const std::string &name) const;

  // Control-plane changes, each bracketed by the guard; errors name the
  // table and the key. For many entries at once, hold one Guard::Update
  // and call the *Unguarded forms.
  Error update(const std::string &table, const Bytes &key, const Bytes &value);
  Error remove(const std::string &table, const Bytes &key);
  Error updateUnguarded(const std::string &table, const Bytes &key, const Bytes &value);
  Error removeUnguarded(const std::string &table, const Bytes &key);
  // Removes every entry of `table` that `doomed` (key, value) picks: a
  // configuration replaced, the entries it no longer lists.
  Error removeUnguardedIf(const std::string &table,
                          const std::function<bool(const Bytes &, const void *)> &doomed);

  // What `plan` asks for, as the eBPF backend reads maps: whole tables up to
  // their limit, and each constant key probed.
  Expected<core::TableSnapshot> read(const core::ReadPlan &plan) const;

  // Every table made to hold what `live`'s table of its name holds (a
  // shadow copy: ShadowCopies), writing only the entries that differ; both
  // made from one module.
  Error copyFrom(const TableSet &live);

  // TableWrites: a change is one Guard::Update, its writes unguarded.
  Error change(llvm::function_ref<Error()> writes) override {
    Guard::Update update(guardWord);
    return writes();
  }
  Error set(const std::string &table, const Bytes &key, const Bytes &value) override {
    return updateUnguarded(table, key, value);
  }
  Error removeWhere(const std::string &table,
                    const std::function<bool(const Bytes &, const void *)> &doomed) override {
    return removeUnguardedIf(table, doomed);
  }

  // Every table's entries (key -> value bytes), for comparisons.
  std::map<std::string, std::map<Bytes, Bytes>> dump() const;

private:
  Expected<Table *> lookupTable(const std::string &name) const;

  std::map<std::string, std::unique_ptr<Table>> byName;
  core::TableCatalog tableCatalog;
  Guard guardWord;
};

} // namespace morpheus::user
