// The kernel refused to load a program and said why in its verifier log:
// the one failure of a load that a specialization built with less (no
// compare chains, no regions) may not meet (runtime/Optimizer's retry
// ladder). Made where a load fails with a program's log (backend/bpf
// BpfObject); any other failure of a load (a map the kernel cannot create,
// a map of another layout, a program refused before the verifier ran) is
// some other error. Only strings and numbers, so that the runtime tells it
// without the backend's internals.
#pragma once

#include "support/Error.h"

#include <llvm/ADT/SmallVector.h>
#include <llvm/ADT/StringRef.h>

#include <string>

namespace morpheus {

class VerifierRejection : public llvm::ErrorInfo<VerifierRejection, TypedError> {
public:
  inline static char ID = 0;

  // `errnum` as the load returned it (negative or positive); `log` the
  // verifier's whole log of `program`, not empty.
  VerifierRejection(std::string object, std::string program, int errnum, std::string log)
      : objectName(std::move(object)), programName(std::move(program)),
        errnum(errnum < 0 ? -errnum : errnum), kernelLog(std::move(log)) {}

  const std::string &object() const { return objectName; }
  const std::string &program() const { return programName; }
  int errorNumber() const { return errnum; }
  const std::string &verifierLog() const { return kernelLog; }

  // What the end of the log says: its last two lines (why, and how many
  // instructions the verifier processed), joined by " / ".
  std::string reason() const {
    llvm::SmallVector<llvm::StringRef, 8> lines;
    llvm::StringRef(kernelLog).rtrim().split(lines, '\n', -1, /*KeepEmpty=*/false);
    if (lines.size() < 2)
      return llvm::StringRef(kernelLog).trim().str();
    return (lines[lines.size() - 2] + " / " + lines.back()).str();
  }

  std::error_code convertToErrorCode() const override {
    return {errnum, std::generic_category()};
  }

protected:
  std::string describe() const override {
    // The end of the log says why; the message keeps that much.
    constexpr size_t Kept = 4000;
    llvm::StringRef tail = kernelLog;
    bool cut = tail.size() > Kept;
    if (cut)
      tail = tail.take_back(Kept);
    return llvm::formatv("object '{0}': load failed: the kernel refused program '{1}': {2}; "
                         "verifier log:\n{3}{4}",
                         objectName, programName, std::strerror(errnum), cut ? "...\n" : "",
                         tail)
        .str();
  }

private:
  std::string objectName, programName;
  int errnum;
  std::string kernelLog;
};

} // namespace morpheus
