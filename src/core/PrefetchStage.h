// The prefetch stage of a handler, derived from the handler itself: the
// compiler's half of sub-batching (the P4C paper's loop fission). Derived
// by passes/PrefetchStage.cpp, which argues why it is correct.
#pragma once

#include "core/TableAccessAnalysis.h"
#include "core/Tables.h"

#include <llvm/IR/Function.h>
#include <llvm/Support/Error.h>

#include <string>
#include <vector>

namespace morpheus::core {

struct PrefetchStageOptions {
  // The derived function's name, and the section it goes to (where a
  // backend looks for prefetch functions; empty: none).
  std::string name;
  std::string section;
  // The backend's prefetch primitive, `void (ptr table, ptr key)`: asks
  // for the memory a lookup of `key` in `table` will read, reads nothing a
  // program sees and returns nothing.
  std::string prefetchFunction;
};

struct PrefetchStage {
  // The derived function, `void NAME(ptr)` taking the entry's argument;
  // null when no path reaches a lookup to prefetch (`declined` says why).
  llvm::Function *function = nullptr;
  // The tables whose entries it asks for, in the order first met.
  std::vector<std::string> tables;
  // How many lookup sites it prefetches (a table may have several).
  unsigned sites = 0;
  std::string declined;
};

// Adds to `entry`'s module a function that runs `entry`'s code, on the
// same argument, up to the first lookup with a per-packet key on each path
// and prefetches that lookup's entry instead (see PrefetchStage.cpp).
// `info` is the analysis of `entry`'s module (analyzeModule), for which
// keys are constant; `catalog` its tables (whose lookups have side
// effects). An error only for a module without the entry's argument shape
// (one pointer), or for a stage LLVM's verifier refuses.
llvm::Expected<PrefetchStage> derivePrefetchStage(llvm::Function &entry,
                                                  const TableAccessInfo &info,
                                                  const TableCatalog &catalog,
                                                  const PrefetchStageOptions &options);

} // namespace morpheus::core
