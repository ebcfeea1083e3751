// How a pointer travels between the functions of a program that are not
// inlined (BPF-to-BPF calls): a static function's callers, and the loads
// that read back a pointer stored to a stack slot (a pointer out-parameter,
// `static __noinline int get(__u64 **out)` called with the address of the
// caller's local). Part of the table access analysis
// (TableAccessAnalysis.cpp), which follows a lookup's result along these
// instead of taking it to escape.
#pragma once

#include <optional>
#include <vector>

namespace llvm {
class CallBase;
class DataLayout;
class Function;
class LoadInst;
class StoreInst;
} // namespace llvm

namespace morpheus::core {

// The calls of `function` when nothing else can run it: it is defined here
// with internal linkage (a static function: no other object, and no
// freplace program, can call or replace it) and its every use is the callee
// of a direct call, so what it returns reaches these calls' results alone
// and its arguments are what these calls pass. nullopt otherwise (a program
// entry, a global function, a callback whose address is taken).
std::optional<std::vector<llvm::CallBase *>> onlyDirectCalls(const llvm::Function &function);

// A load that may read bytes a store wrote.
struct SlotRead {
  llvm::LoadInst *load = nullptr;
  // Reads exactly the stored bytes, so it yields the stored value (or
  // whatever else was stored there later); otherwise it mixes some of them
  // with other bytes.
  bool exact = false;
};

// The loads that may read back the bytes `store` writes, when those bytes
// lie in stack slots of the program whose every access the walk sees:
// allocas, reached directly or through static functions' pointer
// parameters (onlyDirectCalls), whose address is only loaded from, stored
// to, compared, marked (lifetime, debug), cleared (memset, the destination
// of a copy) or passed on to a static function's parameter. The slot's
// address going anywhere else (stored, returned, turned into an integer,
// given to a helper or to a function defined elsewhere, the source of a
// copy) may let something else read the bytes: nullopt.
std::optional<std::vector<SlotRead>> readsOfStoredBytes(llvm::StoreInst &store,
                                                        const llvm::DataLayout &dl);

} // namespace morpheus::core
