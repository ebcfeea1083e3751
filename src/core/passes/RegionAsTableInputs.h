//===- RegionAsTableInputs.h - what a region's inputs can hold ------------===//
//
// Part of region-as-table (RegionAsTable.cpp, whose header argues the pass
// correct): the inputs of a region are a few distinct values each, and
// InputDomain finds them and numbers them (a class per distinct value, the
// bytes a pointer points to deciding), then builds the code that computes
// an input's class where the input is computed: a constant, a phi or
// select of classes, or a load from a derived array of classes indexed as
// the value array or the array lookup the input comes from.
//===----------------------------------------------------------------------===//
#pragma once

#include "core/passes/TablePasses.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/IRBuilder.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::core::region_as_table {

constexpr size_t MaxClasses = 255;       // class ids are bytes
constexpr uint64_t MaxSlots = 1u << 17;  // an array input's class ids
constexpr uint64_t MaxClassBytes = 4096; // a constant input's bytes

// `value` as the IR prints it as an operand ("%x", "@g"), for decline
// reasons.
std::string nameOf(const llvm::Value &value);

// The classes of values one input takes, and the code computing its class.
class InputDomain {
public:
  // `leafNumbers` numbers the derived class arrays of one module.
  // `scratch` collects the constants made to stand for values in maps.
  InputDomain(llvm::Module &module, const TablePassContext &context, const TableAccessInfo &info,
              LookupRewriter &rewriter, unsigned &leafNumbers,
              std::vector<llvm::GlobalVariable *> &scratch)
      : module(module), context(context), info(info), rewriter(rewriter),
        leafNumbers(leafNumbers), scratch(scratch) {}

  // Collects what `value` can hold; the reason when it is not one of a known
  // few.
  std::optional<std::string> collect(llvm::Value *value);
  size_t size() const { return representatives.size(); }
  llvm::Constant *representative(size_t id) const { return representatives[id]; }
  const std::set<std::string> &tables() const { return tableNames; }
  // The array lookups among the answers.
  const std::vector<llvm::CallBase *> &lookups() const { return lookupCalls; }

  // The class id of `value` (i64), computed right where `value` is.
  llvm::Value *buildId(llvm::Value *value);

private:
  // An answer whose class depends on an index: an entry of a value array,
  // or an array lookup's slot.
  struct Leaf {
    std::string table;
    unsigned number = 0;           // of the derived class array
    llvm::Value *index = nullptr;        // the entry number (null: the lookup's key)
    llvm::CallBase *lookup = nullptr;    // the array lookup
    std::vector<uint8_t> slotClass; // by entry number or slot
    uint8_t outsideClass = 0;      // a slot past the end
  };

  std::optional<std::string> tooMany() const;
  unsigned classOf(std::optional<Bytes> bytes,
                   llvm::function_ref<llvm::Constant *()> representative);
  // A constant holding `bytes`: the representative of values that live in
  // the kernel's map (an array lookup's answers). Erased with the others at
  // the end of the pass; no code refers to it.
  llvm::Constant *heldBytes(const Bytes &bytes);
  // The bytes a constant pointer points to: one value of a table's value
  // array, or the rest of a constant global.
  std::optional<Bytes> constantBytes(llvm::Constant &pointer);
  // Slot `slot` of `table`'s value array: an entry's value, or past the
  // entries the unlisted value of an array read by content.
  std::optional<Bytes> slotBytes(const std::string &table, uint64_t slot) const;
  // Slot `slot` of the value array `values` (of `table`).
  llvm::Constant *slotPointer(llvm::GlobalVariable &values, const std::string &table,
                              uint64_t slot);
  // `table.values + entry × stride`, as the derived representations hand
  // out an entry's value.
  std::optional<std::string> collectEntry(llvm::GetElementPtrInst &gep);
  // A lookup in a read-only array whose every slot the snapshot knows.
  std::optional<std::string> collectLookup(llvm::CallBase &call);
  // The array lookup's key, as the helper reads it (through an opaque copy
  // of the key pointer: the bytes in memory).
  llvm::Value *loadLookupKey(llvm::IRBuilderBase &builder, const Leaf &leaf);

  llvm::Module &module;
  const TablePassContext &context;
  const TableAccessInfo &info;
  LookupRewriter &rewriter;
  std::set<llvm::Value *> visited;
  std::map<std::optional<Bytes>, unsigned> classIds;
  std::vector<llvm::Constant *> representatives;
  std::map<llvm::Constant *, unsigned> constantIds;
  std::map<llvm::Value *, Leaf> leaves;
  std::map<llvm::Value *, llvm::Value *> ids;
  std::set<std::string> tableNames;
  std::vector<llvm::CallBase *> lookupCalls;
  unsigned &leafNumbers;
  std::vector<llvm::GlobalVariable *> &scratch;
};

} // namespace morpheus::core::region_as_table
