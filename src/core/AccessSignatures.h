// The backend-provided description of how a program touches its tables.
//
// The core finds table access sites structurally: a backend recognises a call
// (for eBPF, by helper id) and says which argument is the table, the key and
// the value. The core never looks at names, debug scopes or instruction
// distance to find sites.
#pragma once

#include <llvm/IR/InstrTypes.h>
#include <llvm/IR/GlobalVariable.h>

#include <optional>
#include <string>

namespace morpheus::core {

enum class AccessKind {
  Lookup,     // returns a pointer to the value, or null
  Update,     // writes key -> value
  Delete,     // removes key
  OtherRead,  // any other call that reads the table (e.g. redirect, tail call)
  OtherWrite, // any other call that may change the table (push, pop, output)
};

struct AccessSignature {
  std::string name; // e.g. "map_lookup_elem", for reports
  AccessKind kind = AccessKind::OtherWrite;
  unsigned tableArg = 0;
  std::optional<unsigned> keyArg;
  std::optional<unsigned> valueArg;
  // Whether the core may replace a lookup by what the snapshot says it
  // returns: false for lookups with more to them than key -> value (one
  // CPU's value, storage attached to a kernel object); their results are
  // still followed for writes.
  bool rewritable = true;
  // For a helper that calls a function of the program back with its table
  // (bpf_for_each_map_elem hands its callback the map it walks): the
  // argument that names the function, and the function's parameter that
  // receives the table.
  struct Callback {
    unsigned argument = 0;
    unsigned tableParameter = 0;
  };
  std::optional<Callback> callback = std::nullopt;
};

class AccessSignatureTable {
public:
  virtual ~AccessSignatureTable() = default;

  // The signature of `call` if it is a table access the backend knows.
  virtual std::optional<AccessSignature>
  match(const llvm::CallBase &call) const = 0;

  // Whether `call` is a data-plane primitive (not a user function) that only
  // reads through its pointer argument `argNo` and does not keep it. Used to
  // prove that passing a table value pointer to it cannot modify the table.
  virtual bool onlyReadsArgument(const llvm::CallBase &call,
                                 unsigned argNo) const = 0;

  // When `call` is a data-plane primitive that writes a fixed number of
  // bytes at its pointer argument `argNo` and nothing beyond them (a lock
  // or timer embedded in a table value): how many. nullopt otherwise.
  virtual std::optional<uint64_t>
  bytesWrittenThrough(const llvm::CallBase &call, unsigned argNo) const = 0;

  // Whether `global` declares a table.
  virtual bool isTable(const llvm::GlobalVariable &global) const = 0;

  // Whether `function` is a program entry point the data plane calls.
  virtual bool isProgramEntry(const llvm::Function &function) const = 0;

  // Whether a pointer passed to `callee` (a function of the program, called
  // directly) must point to memory the data plane may write, whatever the
  // callee does with it: the eBPF verifier checks a global function on its
  // own and takes its pointer arguments as writable, so it refuses a
  // read-only inlined value there.
  virtual bool requiresWritableArguments(const llvm::Function &callee) const = 0;
};

} // namespace morpheus::core
