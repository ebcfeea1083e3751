// Runs clang on one C file and returns the bitcode it wrote: the one clang
// invocation of both backends' frontends (eBPF: -target bpf; user space:
// the host), which choose the flags.
#pragma once

#include "support/Error.h"

#include <llvm/Support/MemoryBuffer.h>

#include <memory>
#include <string>
#include <vector>

namespace morpheus {

// `clang FLAGS -emit-llvm -c PATH -o TEMPORARY`; an error carries clang's
// diagnostics and names `path`.
Expected<std::unique_ptr<llvm::MemoryBuffer>>
compileToBitcode(const std::string &clang, const std::string &path,
                 const std::vector<std::string> &flags);

} // namespace morpheus
