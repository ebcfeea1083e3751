// Where the program guard goes and how it falls back, decided before the
// table passes run.
//
// Specialized code is only correct while the tables hold the snapshot it was
// built from, so every path into it must start with a guard. The kernel
// enters a program's code at its program entries, and at every function
// whose address the program takes (bpf_timer callbacks, run later; bpf_loop
// and for_each_map_elem callbacks): these are the roots. Each root gets a
// fallback:
//   in-program  a generic copy of the root and of everything it calls that
//               a pass may change is kept in the module (the table passes
//               never touch it); on a stale version the root calls it. Works
//               for every root (no ctx needed, callbacks included) and costs
//               no tail call, but the verifier explores both versions.
//   tail call   the root tail-calls the original program (entries with a
//               ctx, in objects that make no tail calls of their own).
//   none        nothing the root reaches is specialized.
// The backend decides per program entry (it knows the kernel's limits and
// what the original costs to verify); a callback inherits in-program only
// when every entry reaching it has it, since its verification is part of
// theirs.
#pragma once

#include "core/AccessSignatures.h"
#include "core/SpecializationLog.h"
#include "support/Error.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/Module.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::core {

// The backend's decision for one program entry.
struct EntryFallback {
  std::string function;
  Fallback fallback = Fallback::None;
  unsigned slot = 0;  // TailCall
  // TailCall: what the entry returns when the original cannot be reached
  // (an empty slot, the tail-call limit): the program type's drop verdict.
  uint32_t failureVerdict = 0;
  std::string detail; // why, for the decision log
  // Set: the version this entry's guard expects is read from slot
  // `versionSlot` of the version array (ProgramGuardOptions::versionArray)
  // instead of being an immediate, so that the loaded program can be
  // stamped valid for a later guard version without being built again
  // (a program reused by the next version: its tables did not change).
  std::optional<unsigned> versionSlot;
};

struct ProgramGuardOptions {
  // Provided by the backend's runtime:
  //   i32 holds(i64 version): non-zero while code built for `version` may run;
  //   i64 enter(ptr ctx, i64 version, i32 slot, i32 failure): negative when
  //       it may run; otherwise it tail-calls the original and, when that
  //       cannot run, returns `failure` (the entry's failureVerdict).
  std::string holdsFunction;
  std::string enterFunction;
  uint64_t version = 0; // what the guard word must still hold
  // The backend's fallback per program entry.
  std::vector<EntryFallback> entries;
  // Where entries with a versionSlot read the version they expect: a
  // global array of i64, one per slot, each `version` as built, in this
  // section (a map of the version's own that the backend may rewrite).
  std::string versionArray = "morpheus_expected_versions";
  std::string versionArraySection;
};

struct GuardPlan {
  // Every root of the module, with its fallback. A root that reaches
  // nothing a pass may change needs no guard (fallback None, detail says so).
  std::vector<GuardDecision> roots;
  std::map<std::string, std::string> genericCopy; // in-program root -> its copy
  std::set<std::string> genericFunctions;         // every generic copy
  std::map<std::string, std::string> unguarded;   // function -> why it stays generic

  // Whether `root` gets a guard (it reaches specialized code).
  bool guarded(const GuardDecision &root) const;
};

// The functions the kernel can call: program entries and functions whose
// address the module takes (outside llvm.used lists).
std::vector<llvm::Function *> guardRoots(llvm::Module &module,
                                         const AccessSignatureTable &sigs);

// Plans every root's fallback and adds the generic copies to `module`.
// `mayBeSpecialized(F)`: whether a table pass may rewrite code in F itself.
// An entry the backend did not decide for gets no fallback.
Expected<GuardPlan> planGuards(llvm::Module &module, const AccessSignatureTable &sigs,
                               const std::vector<EntryFallback> &entries,
                               llvm::function_ref<bool(const llvm::Function &)> mayBeSpecialized);

// The module's code as printed, per defined function and per global
// variable, taken just before the table passes to tell afterwards what
// they changed.
struct CodeImage {
  struct Function {
    std::string printed;
    // Its size then: a function of another size prints otherwise, which
    // tells it changed without printing it again.
    size_t instructions = 0, blocks = 0;
  };
  std::map<std::string, Function> functions;
  std::map<std::string, std::string> globals;
};
CodeImage imageOf(const llvm::Module &module);

// Guard elision, after the table passes. A guarded root needs no guard when
// its code holds whatever the tables hold: every function it reaches
// through direct calls prints exactly as it did in `before`, and every
// global variable of `before` is unchanged (globals the passes added are
// reached only through code they changed). So no entry was inlined, no
// field folded, no fast path, injected branch or derived table added, no
// inner table resolved and no site instrumented in that code; what it
// still reads from a table it reads with the real helper at run time.
// Such roots get fallback None (the log says why); generic copies no guard
// calls any more are deleted.
void elideUnneededGuards(llvm::Module &module, GuardPlan &plan, const CodeImage &before);

// Functions reachable from `root` through direct calls and, with
// `throughAddresses`, through functions whose address code takes.
std::set<llvm::Function *> reachableFrom(llvm::Function *root, bool throughAddresses);

// Whether the kernel can call `function` on its own, as a callback: its
// address is taken (outside llvm.used lists).
bool isCallback(const llvm::Function &function);

// Whether `entry` registers a callback: reaches, through calls or taken
// addresses, a function the kernel can call on its own.
bool registersCallbacks(llvm::Function &entry);

} // namespace morpheus::core
