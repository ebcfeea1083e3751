// The table-specializing passes, declared from Passes.def. Each is
// implemented, with the argument for its correctness, in its own file:
//   SpecializationPoints.cpp, ResolveInnerTable.cpp, TableElimination.cpp,
//   FlowFastPath.cpp, ConstantKeyLookup.cpp, FoldReadOnlyFields.cpp, KeySetFilter.cpp,
//   FoldReadOnlyGlobals.cpp,
//   CustomGenerator.cpp, InlineSmallTable.cpp, LpmAsCode.cpp, LpmAsArray.cpp,
//   LpmAsHash.cpp (the three choosing through TrieRepresentation.cpp),
//   ConstantFields.cpp, HashAsArray.cpp (with DirectIndex.cpp), BranchInjection.cpp,
//   RegionAsTable.cpp, GuardTableWrites.cpp, InstrumentTableSites.cpp,
//   HeavyHitterFastPath.cpp, SinkPureCalls.cpp (no table: pure calls moved to their uses)
// Each counts what it did in LLVM statistics under its name (DEBUG_TYPE;
// `morpheus-opt -stats` prints them), declared ALWAYS_ENABLED_STATISTIC:
// STATISTIC compiles to nothing under NDEBUG unless LLVM_FORCE_ENABLE_STATS,
// which Debian's llvm-config.h defines to 0 whatever the command line says.
// A count is an atomic add, kept only while a tool enables statistics.
#pragma once

#include "core/passes/TableRewriting.h"

#include <llvm/IR/PassManager.h>

namespace morpheus::core {

#define MORPHEUS_TABLE_PASS(NAME, CLASS)                                       \
  class CLASS : public llvm::PassInfoMixin<CLASS> {                            \
  public:                                                                      \
    explicit CLASS(TablePassContext context) : context(std::move(context)) {}  \
    llvm::PreservedAnalyses run(llvm::Module &module,                          \
                                llvm::ModuleAnalysisManager &mam);             \
                                                                               \
  private:                                                                     \
    TablePassContext context;                                                  \
  };
#include "core/Passes.def"

} // namespace morpheus::core
