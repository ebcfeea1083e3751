#include "support/Clang.h"

#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Program.h>

using namespace llvm;

namespace morpheus {

Expected<std::unique_ptr<MemoryBuffer>> compileToBitcode(const std::string &clang,
                                                         const std::string &path,
                                                         const std::vector<std::string> &flags) {
  SmallString<128> output, errors;
  if (std::error_code ec = sys::fs::createTemporaryFile("morpheus", "bc", output))
    return makeSystemError(ec.value(), "{0}: cannot create a temporary file", path);
  if (std::error_code ec = sys::fs::createTemporaryFile("morpheus", "err", errors))
    return makeSystemError(ec.value(), "{0}: cannot create a temporary file", path);
  auto cleanup = make_scope_exit([&] {
    sys::fs::remove(output);
    sys::fs::remove(errors);
  });

  std::vector<std::string> args = {clang};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), {"-emit-llvm", "-c", path, "-o", output.str().str()});
  std::vector<StringRef> argv(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt, StringRef(errors)};
  std::string execError;
  int status = sys::ExecuteAndWait(clang, argv, std::nullopt, redirects, 0, 0, &execError);
  if (status != 0) {
    std::string diagnostics;
    if (auto buffer = MemoryBuffer::getFile(errors))
      diagnostics = (*buffer)->getBuffer().rtrim().str();
    if (status < 0)
      return makeError("{0}: cannot run {1}: {2}", path, clang, execError);
    return makeError("{0}: clang failed:\n{1}", path, diagnostics);
  }
  auto buffer = MemoryBuffer::getFile(output);
  if (!buffer)
    return makeSystemError(buffer.getError().value(), "{0}: cannot read clang output", path);
  return std::move(*buffer);
}

} // namespace morpheus
