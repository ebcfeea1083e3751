// What a lookup's key bytes hold at the call, proved by walking back from
// the call to the writes of the key's stack slot: the bytes some path may
// leave unwritten (padding a program never sets, a field set on one path
// only), whose stale contents the kernel compares, so that a rewrite
// comparing only the written ones would not be exact; and the bytes every
// path sets to one compile-time constant (a constant key, which
// constant-key-lookup answers from the snapshot). Part of the table access
// analysis (TableAccessAnalysis.cpp), which records both in each site's key
// provenance.
#pragma once

#include "core/TableAccessAnalysis.h"

#include <llvm/IR/PassManager.h>

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace llvm {
class CallBase;
class Value;
} // namespace llvm

namespace morpheus::core {

struct KeyBytes {
  // The bytes some path to the call may leave unwritten; nullopt when every
  // path writes every byte.
  std::optional<UnwrittenKeyBytes> unwritten;
  // Per key byte, the constant every path to the call writes there, or
  // nullopt.
  std::vector<std::optional<uint8_t>> constant;
  // Why not every byte is such a constant (the first reason the walk met),
  // or "" when every one is.
  std::string notConstant;

  // The whole key, when every byte is a constant.
  std::optional<Bytes> constantKey() const;
};

// What the `keySize` bytes `key` points to hold when `call` reads them.
// `fam` gives MemorySSA and alias analysis of the call's function.
KeyBytes keyBytes(llvm::CallBase &call, llvm::Value *key, uint32_t keySize,
                  llvm::FunctionAnalysisManager &fam);

} // namespace morpheus::core
