// Custom generators for user-space handlers (core/LookupGenerator.h): a
// generator written as C source made from the table's contents, compiled
// by clang-19 for the host each cycle, and the LPM library's own nested-if
// generator (Iridescent's LibLPM-NI) over that.
#pragma once

#include "core/LookupGenerator.h"
#include "support/Error.h"

#include <functional>
#include <string>
#include <vector>

namespace morpheus::user {

// The C source of a generated lookup: it defines
//   long long FUNCTION(const void *key)
// returning what core/LookupGenerator.h says (an entry's index in
// `contents.entries`, MU_GENERATED_MISS, MU_GENERATED_ASK_TABLE).
using SourceGenerator = std::function<Expected<std::string>(const core::TableInfo &table,
                                                            const core::TableContents &contents)>;

// A generator whose code is `source`'s C, compiled with `cflags` (the API
// directory is on the include path: morpheus_user.h defines the two
// constants).
core::LookupGenerator generatorFromSource(std::string name, std::string table,
                                          std::optional<core::TableMatch> match,
                                          std::string function, SourceGenerator source,
                                          std::vector<std::string> cflags = {});

// The nested-if LPM (Iridescent's LibLPM-NI) for IPv4 LPM tables (key
// { u32 prefix length; be32 address }): a test per prefix, from the least
// specific down, each prefix's test nested in the test of the longest
// prefix containing it, siblings one after another; the deepest test that
// holds names the answer. Keys whose prefix length is not 32 are left to
// the table. Serves `table`, or every LPM table when empty.
core::LookupGenerator nestedIfLpm(std::string table = "");

// The C source nestedIfLpm compiles for `contents` (for reports and tests).
Expected<std::string> nestedIfLpmSource(const core::TableInfo &table,
                                        const core::TableContents &contents);

} // namespace morpheus::user
