// Custom generators (Iridescent's custom specialization points, NFMorph's
// templates written by a handler's author): code for the lookups of one
// table, made from what the table holds now. The core runs a generator
// like a pass (custom-generator, passes/CustomGenerator.cpp) in the frame
// every table rewrite uses, under the same guard; the generator only says
// which entry answers a key, so every answer is a value address the core
// hands out (LookupRewriter), as for the other passes.
#pragma once

#include "core/Tables.h"
#include "support/Error.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// What a generated lookup function returns for a key: the index in
// TableContents::entries of the entry the table's lookup answers with,
// GeneratedMiss when it answers none (null), anything else (negative) to
// leave that key to the table's own lookup.
constexpr int64_t GeneratedMiss = -1;
constexpr int64_t GeneratedAskTable = -2;

struct LookupGenerator {
  std::string name;                // in the log, and what a policy enables it by
  std::string table;               // the table it serves; empty: every table of kind `match`
  std::optional<TableMatch> match; // with an empty `table`
  // Called each cycle with the table (read whole) and its contents: a module
  // in `context` defining `function`, `i64 (ptr key)`, which only reads the
  // key's bytes (no write, no call but intrinsics), or an error (the site is
  // declined with it).
  std::function<Expected<std::unique_ptr<llvm::Module>>(
      const TableInfo &table, const TableContents &contents, llvm::LLVMContext &context)>
      generate;
  std::string function;

  bool serves(const TableInfo &info) const {
    return table.empty() ? match && *match == info.match : table == info.name;
  }
};

// The generator among `generators` that serves `table` (the first), or null.
inline const LookupGenerator *generatorFor(const std::vector<LookupGenerator> &generators,
                                           const TableInfo &table) {
  for (const LookupGenerator &generator : generators)
    if (generator.serves(table))
      return &generator;
  return nullptr;
}

// A generator's tables are read whole up to this many entries (its code is
// made from every entry).
constexpr uint32_t GeneratorReadLimit = 4096;

} // namespace morpheus::core
