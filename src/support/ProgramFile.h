// What a program named on the command line is, told before anything reads
// it whole or hands it to clang: clang takes a file whose name it does not
// know (a directory, /dev/zero, an object without .o) for linker input,
// writes nothing and succeeds, and the frontend then blamed "the bitcode
// header" of clang's output. Both backends' frontends ask here first.
#pragma once

#include "support/Error.h"

#include <string>

namespace morpheus {

enum class ProgramFormat {
  C,       // .c (or .i, preprocessed C): compiled by clang
  IrText,  // .ll: LLVM IR as text
  Bitcode, // LLVM bitcode (its magic number), whatever its name
};

// The format of the program at `path`, from its kind, its first bytes and
// its name. Errors name the file and say what it is instead: "no such
// file", "is a directory", "not a regular file (a character device)",
// "empty", "binary data"/"an ELF object", "not C, LLVM IR or bitcode".
// Only a regular file is read, and only its first bytes.
Expected<ProgramFormat> programFormat(const std::string &path);

} // namespace morpheus
