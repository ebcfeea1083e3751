// The integers a program compares its values with: where a program's
// behaviour changes, and so what the differential fuzzer's map states and
// packets should hold (runtime/MapStates, runtime/PacketSamples).
#pragma once

#include <llvm/IR/Module.h>

#include <cstdint>
#include <vector>

namespace morpheus::core {

// Each integer constant an `icmp` compares with and each `switch` case of
// `module`, with its neighbours (c - 1, c + 1: both sides of `<` and `<=`),
// zero-extended to 64 bits, without repeats, smallest first; at most
// `limit` of them (the smallest are kept: counts, lengths and ports more
// often than addresses).
std::vector<uint64_t> comparedConstants(const llvm::Module &module, size_t limit = 512);

} // namespace morpheus::core
