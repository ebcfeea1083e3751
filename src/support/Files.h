// Writing a file whole: reproducers, reports, objects and benchmark results
// are read by people and tools after Morpheus wrote them, so none may be
// left half written.
#pragma once

#include "support/Error.h"

#include <llvm/ADT/StringRef.h>

#include <cerrno>
#include <cstdio>
#include <fstream>
#include <string>

namespace morpheus {

// Writes `contents` to `path` through a temporary file and a rename, so a
// failure never leaves a truncated file where the old one was. The error
// names the path.
inline Error writeFile(const std::string &path, llvm::StringRef contents) {
  std::string temporary = path + ".tmp";
  std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
  out.write(contents.data(), std::streamsize(contents.size()));
  out.close();
  if (!out || std::rename(temporary.c_str(), path.c_str())) {
    int err = errno;
    std::remove(temporary.c_str());
    return makeSystemError(err, "{0}: cannot write", path);
  }
  return Error::success();
}

} // namespace morpheus
