// Runs clang on one C file and returns the bitcode it wrote: the one clang
// invocation of both backends' frontends (eBPF: -target bpf; user space:
// the host), which choose the flags.
//
// Compiling a large program takes seconds (clang -O2 over composite_zones'
// unrolled chains: ~5 s) at every start of Morpheus, for the same source.
// With a cache directory (support/FileCache), the bitcode is kept under a name that is a hash
// of everything that decides it: the clang binary (path, size, time), the
// flags, the working directory (relative -I) and the *preprocessed* source
// (clang -E with the same flags, ~0.1 s), which holds every header's text
// and every file name and line the debug info records. A changed header,
// macro or flag is a different name, never a stale hit.
#pragma once

#include "support/Error.h"

#include <llvm/Support/MemoryBuffer.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus {

struct Bitcode {
  std::unique_ptr<llvm::MemoryBuffer> buffer;
  bool fromCache = false; // read from the cache directory, clang not run
};

// `clang FLAGS -emit-llvm -c PATH -o TEMPORARY`, or that output as an
// earlier run kept it under `cacheDirectory`/bitcode (created if missing; a cache that
// cannot be read or written is compiled around, never an error). An error
// carries clang's diagnostics and names `path`.
Expected<Bitcode> compileToBitcode(const std::string &clang, const std::string &path,
                                   const std::vector<std::string> &flags,
                                   const std::optional<std::string> &cacheDirectory = {});

} // namespace morpheus
