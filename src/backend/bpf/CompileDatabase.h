// The flags a project compiles one BPF source with, taken from its compile
// database (compile_commands.json, as CMake, Bear or meson write it), so a
// program that needs its project's include paths and macros can be given
// as it is built.
#pragma once

#include "support/Error.h"

#include <string>
#include <vector>

namespace morpheus::bpf {

// The flags of `source`'s entry in `database` that decide what the source
// means (-I, -isystem, -iquote, -idirafter, -include with paths made
// absolute against the entry's directory; -D, -U, -std=, -mcpu=, -mattr=,
// -m[little|big]-endian); everything else (-c, -o, -target, -O, -M*,
// warnings, the source itself) is the build's business and dropped:
// Morpheus compiles with its own -O2 -g -target bpf. An error names the
// database and the source when it has no entry for it or cannot be read.
Expected<std::vector<std::string>> compileDatabaseFlags(const std::string &database,
                                                        const std::string &source);

} // namespace morpheus::bpf
