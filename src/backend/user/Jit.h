// In-process compilation of handler versions with LLVM ORC (LLJIT). Every
// version (the generic handler, each specialization) goes into a JITDylib
// of its own, so versions define the same names without clashing; all of
// them link against one JITDylib that binds what they share: each MU_TABLE
// global to its user::Table, the table API (mu_lookup, ...), the guard's
// version word, the traffic profile's storage and the write counters.
// A version lives as long as a handle to it (VersionHandle): its JITDylib
// is removed from the session, and its code freed, when the last handle
// goes. The trampoline holds one for what it runs and for what a burst
// may still be inside (Handler.h says when it lets go).
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
#include <vector>

extern "C" {
#include "backend/user/include/morpheus_user.h"
}

namespace morpheus::user {

using HandlerFunction = int (*)(mu_packet *);
using PrefetchFunction = void (*)(const mu_packet *);

class Jit;

// One JIT-compiled version of a handler: its JITDylib and entry point.
// Whoever may still call `entry` holds the handle; the last one to drop it
// removes the JITDylib (its code and data freed).
class Version {
public:
  Version(std::shared_ptr<Jit> jit, std::string label, HandlerFunction entry)
      : jit(std::move(jit)), label(std::move(label)), function(entry) {}
  ~Version();
  Version(const Version &) = delete;
  Version &operator=(const Version &) = delete;

  HandlerFunction entry() const { return function; }
  const std::string &name() const { return label; }

private:
  friend class Jit;
  std::shared_ptr<Jit> jit; // outlives its versions (another handler's trampoline may hold one)
  std::string label;
  HandlerFunction function;
};
using VersionHandle = std::shared_ptr<const Version>;

class Jit : public std::enable_shared_from_this<Jit> {
public:
  // A JIT for the host, with `tables`, their guard, `profile` and `writes`
  // bound.
  static Expected<std::shared_ptr<Jit>> create(const TableSet &tables, const Profile &profile,
                                               const WriteCounters &writes);

  // The host's target machine, for the O2 pipeline of specializations.
  llvm::TargetMachine &targetMachine() { return *machine; }
  const llvm::DataLayout &dataLayout() const { return jit->getDataLayout(); }

  // Compiles `module` (with the context it lives in, which goes when ORC
  // is done with the module) as version `label` and returns it, its
  // function `entry` looked up. Table definitions become references to the
  // shared tables (prepareForJit).
  Expected<VersionHandle> add(llvm::orc::ThreadSafeModule module, const std::string &entry,
                              const std::string &label);
  // The address of `name` in `version`.
  Expected<void *> address(const Version &version, const std::string &name);

  // How many versions the execution session holds now (each a JITDylib;
  // the shared one not counted): what dropping handles gives back.
  size_t liveVersions() const;

private:
  friend class Version;
  // Removes version `label`'s JITDylib from the session (its last handle
  // went).
  void release(const std::string &label);

  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::unique_ptr<llvm::TargetMachine> machine;
  llvm::orc::JITDylib *shared = nullptr;
};

// Turns each MU_TABLE definition of `module` into an external declaration
// (the JIT binds the name to the table) and drops the sections the backend
// marks tables and handlers by.
void prepareForJit(llvm::Module &module);

} // namespace morpheus::user
