// Which bytes of a lookup's key some path to the lookup may leave
// unwritten (padding a program never sets, a field set on one path only):
// the kernel compares every key byte, stale ones included, so a rewrite
// that compared only the written ones would not be exact. Part of the
// table access analysis (TableAccessAnalysis.cpp), which records the
// answer in each lookup site's key provenance.
#pragma once

#include "core/TableAccessAnalysis.h"

#include <llvm/IR/PassManager.h>

#include <cstdint>
#include <optional>

namespace llvm {
class CallBase;
class Value;
} // namespace llvm

namespace morpheus::core {

// The key bytes some path to `call` may leave unwritten, `key` pointing to
// its `keySize` bytes; nullopt when every path writes every byte. `fam`
// gives MemorySSA and alias analysis of the call's function.
std::optional<UnwrittenKeyBytes> unwrittenKeyBytes(llvm::CallBase &call, llvm::Value *key,
                                                   uint32_t keySize,
                                                   llvm::FunctionAnalysisManager &fam);

} // namespace morpheus::core
