// The fields of a table's value as the program's debug info declares them
// (BTF-defined maps: the `value` member of the map's definition), so
// reports can say "field `hits`" instead of "bytes 8..15".
#pragma once

#include <llvm/IR/Module.h>

#include <cstdint>
#include <string>
#include <vector>

namespace morpheus::core {

struct ValueField {
  std::string name; // nested fields dotted: "cfg.port"
  uint64_t offset = 0;
  uint64_t size = 0;
};

// The leaf fields of `table`'s value type, in offset order; empty when the
// module has no debug info for it.
std::vector<ValueField> valueFields(const llvm::Module &module, const std::string &table);

// Names the bytes [offset, offset + size) of a value: the fields they
// cover ("`hits`", "`action`, `port`"), or "bytes A..B" where no field is
// known. WholeValue-sized ranges are "the whole value".
std::string describeValueBytes(const std::vector<ValueField> &fields, uint64_t offset,
                               uint64_t size);

} // namespace morpheus::core
