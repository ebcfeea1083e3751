// In-process compilation of handler versions with LLVM ORC (LLJIT). Every
// version (the generic handler, each specialization) goes into a JITDylib
// of its own, so versions define the same names without clashing; all of
// them link against one JITDylib that binds what they share: each MU_TABLE
// global to its user::Table, the table API (mu_lookup, ...), the guard's
// version word, the traffic profile's storage and the write counters.
// Versions are kept until the Jit goes: the event loop may still be running
// one it read before a swap.
#pragma once

#include "backend/user/Profile.h"
#include "backend/user/TableSet.h"
#include "backend/user/WriteCounters.h"
#include "support/Error.h"

#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/Target/TargetMachine.h>

#include <memory>
#include <string>

extern "C" {
#include "backend/user/include/morpheus_user.h"
}

namespace morpheus::user {

using HandlerFunction = int (*)(mu_packet *);
using PrefetchFunction = void (*)(const mu_packet *);

class Jit {
public:
  // A JIT for the host, with `tables`, their guard, `profile` and `writes`
  // bound.
  static Expected<std::unique_ptr<Jit>> create(const TableSet &tables, const Profile &profile,
                                               const WriteCounters &writes);

  // The host's target machine, for the O2 pipeline of specializations.
  llvm::TargetMachine &targetMachine() { return *machine; }
  const llvm::DataLayout &dataLayout() const { return jit->getDataLayout(); }

  // Compiles `module` (in the context `context` owns) as version `label`
  // and returns its function `entry`. Table definitions become references
  // to the shared tables (prepareForJit).
  Expected<HandlerFunction> add(std::unique_ptr<llvm::Module> module,
                                llvm::orc::ThreadSafeContext context, const std::string &entry,
                                const std::string &label);
  // The address of `name` in version `label` (added before).
  Expected<void *> address(const std::string &label, const std::string &name);

private:
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> machine;
  llvm::orc::JITDylib *shared = nullptr;
};

// Turns each MU_TABLE definition of `module` into an external declaration
// (the JIT binds the name to the table) and drops the sections the backend
// marks tables and handlers by.
void prepareForJit(llvm::Module &module);

} // namespace morpheus::user
