#include "backend/user/TableSet.h"

#include "backend/user/UserSignatures.h"
#include "support/Bytes.h"

#include <llvm/IR/Constants.h>

#include <cstring>

using namespace llvm;

namespace morpheus::user {

namespace {

// The definition an MU_TABLE initializer holds: four i32 fields.
Expected<mu_table_def> definitionOf(const Module &module, const GlobalVariable &global) {
  auto fail = [&](const char *why) {
    return makeError("{0}: table '{1}': {2}", module.getModuleIdentifier(), global.getName(),
                     why);
  };
  if (!global.hasInitializer())
    return fail("declared but not defined (use MU_TABLE)");
  auto *init = dyn_cast<ConstantStruct>(global.getInitializer());
  if (!init || init->getNumOperands() != 4)
    return fail("not an MU_TABLE definition { kind, key_size, value_size, max_entries }");
  uint32_t fields[4];
  for (unsigned i = 0; i < 4; ++i) {
    auto *field = dyn_cast<ConstantInt>(init->getOperand(i));
    if (!field || field->getBitWidth() != 32)
      return fail("its definition's fields must be 32-bit constants");
    fields[i] = uint32_t(field->getZExtValue());
  }
  return mu_table_def{fields[0], fields[1], fields[2], fields[3]};
}

} // namespace

Expected<std::unique_ptr<TableSet>> TableSet::fromModule(const Module &module) {
  auto set = std::make_unique<TableSet>();
  UserSignatures signatures;
  for (const GlobalVariable &global : module.globals()) {
    if (!signatures.isTable(global))
      continue;
    auto definition = definitionOf(module, global);
    if (!definition)
      return definition.takeError();
    std::string name = global.getName().str();
    auto table = makeTable(name, *definition);
    if (!table)
      return withContext(table.takeError(), module.getModuleIdentifier());
    set->tableCatalog[name] = (*table)->info();
    set->byName[name] = std::move(*table);
  }
  return set;
}

Table *TableSet::find(const std::string &name) const {
  auto table = byName.find(name);
  return table == byName.end() ? nullptr : table->second.get();
}

Expected<Table *> TableSet::lookupTable(const std::string &name) const {
  if (Table *table = find(name))
    return table;
  return makeError("no table '{0}'", name);
}

Error TableSet::update(const std::string &table, const Bytes &key, const Bytes &value) {
  Guard::Update change(guardWord);
  return updateUnguarded(table, key, value);
}

Error TableSet::remove(const std::string &table, const Bytes &key) {
  Guard::Update change(guardWord);
  return removeUnguarded(table, key);
}

Error TableSet::updateUnguarded(const std::string &name, const Bytes &key, const Bytes &value) {
  auto table = lookupTable(name);
  if (!table)
    return table.takeError();
  const core::TableInfo &info = (*table)->info();
  if (key.size() != info.keySize || value.size() != info.valueSize)
    return makeError("table '{0}': key of {1} bytes and value of {2} bytes, expected {3} and {4}",
                     name, key.size(), value.size(), info.keySize, info.valueSize);
  if (!(*table)->update(key.data(), value.data()))
    return makeError("table '{0}': cannot store key {1} (full, or not a key it holds)", name,
                     toHex(key));
  return Error::success();
}

Error TableSet::removeUnguarded(const std::string &name, const Bytes &key) {
  auto table = lookupTable(name);
  if (!table)
    return table.takeError();
  if (key.size() != (*table)->info().keySize)
    return makeError("table '{0}': key of {1} bytes, expected {2}", name, key.size(),
                     (*table)->info().keySize);
  if (!(*table)->remove(key.data()))
    return makeError("table '{0}': no key {1}", name, toHex(key));
  return Error::success();
}

Error TableSet::removeUnguardedIf(const std::string &name,
                                  const std::function<bool(const Bytes &, const void *)> &doomed) {
  auto table = lookupTable(name);
  if (!table)
    return table.takeError();
  std::vector<Bytes> keys;
  (*table)->forEach([&](const Bytes &key, const void *value) {
    if (doomed(key, value))
      keys.push_back(key);
    return true;
  });
  for (const Bytes &key : keys)
    if (Error err = removeUnguarded(name, key))
      return err;
  return Error::success();
}

Expected<core::TableSnapshot> TableSet::read(const core::ReadPlan &plan) const {
  core::TableSnapshot snapshot;
  for (const auto &[name, request] : plan) {
    auto table = lookupTable(name);
    if (!table)
      return table.takeError();
    const core::TableInfo &info = (*table)->info();
    if (info.match == core::TableMatch::Unsupported)
      return makeError("table '{0}': a {1} table is not read for the passes", name,
                       info.typeName);
    core::TableContents &contents = snapshot[name];
    const uint32_t valueSize = info.valueSize;
    if (request.wholeTableLimit && (*table)->size() <= request.wholeTableLimit) {
      contents.complete = true;
      (*table)->forEach([&](const Bytes &key, const void *value) {
        auto *bytes = static_cast<const uint8_t *>(value);
        contents.entries.push_back({key, Bytes(bytes, bytes + valueSize)});
        return true;
      });
    }
    for (const Bytes &key : request.keys) {
      if (key.size() != info.keySize)
        return makeError("table '{0}': probed key {1} is not {2} bytes", name, toHex(key),
                         info.keySize);
      contents.probedKeys.insert(key);
      if (contents.complete)
        continue;
      if (auto *value = static_cast<const uint8_t *>((*table)->lookup(key.data())))
        contents.entries.push_back({key, Bytes(value, value + valueSize)});
    }
  }
  return snapshot;
}

Error TableSet::copyFrom(const TableSet &live) {
  for (const auto &[name, table] : byName) {
    Table *from = live.find(name);
    if (!from)
      return makeError("table '{0}': not in the live tables", name);
    // Only what differs is written: a copy kept from one cycle to the next
    // differs from the live table in the entries either changed since,
    // and an update can be dear (a DIR-24-8 route rewrites its range).
    uint32_t valueSize = table->info().valueSize;
    std::map<Bytes, Bytes> wanted;
    from->forEach([&](const Bytes &key, const void *value) {
      const auto *bytes = static_cast<const uint8_t *>(value);
      wanted.emplace(key, Bytes(bytes, bytes + valueSize));
      return true;
    });
    std::vector<Bytes> doomed;
    table->forEach([&](const Bytes &key, const void *value) {
      auto want = wanted.find(key);
      if (want == wanted.end())
        doomed.push_back(key);
      else if (std::memcmp(want->second.data(), value, valueSize) == 0)
        wanted.erase(want);
      return true;
    });
    // Slots of arrays always exist: a slot is overwritten, never removed.
    for (const Bytes &key : doomed)
      if (table->kind() != MU_ARRAY)
        if (Error err = removeUnguarded(name, key))
          return err;
    for (const auto &[key, value] : wanted)
      if (!table->update(key.data(), value.data()))
        return makeError("table '{0}': the copy refused an entry the live table holds", name);
  }
  return Error::success();
}

std::map<std::string, std::map<Bytes, Bytes>> TableSet::dump() const {
  std::map<std::string, std::map<Bytes, Bytes>> all;
  for (const auto &[name, table] : byName) {
    auto &entries = all[name];
    uint32_t valueSize = table->info().valueSize;
    table->forEach([&](const Bytes &key, const void *value) {
      auto *bytes = static_cast<const uint8_t *>(value);
      entries[key] = Bytes(bytes, bytes + valueSize);
      return true;
    });
  }
  return all;
}

} // namespace morpheus::user
