// Which bytes of its context a program entry reads, and the values its
// tests single out for each: what the checks that run a program on sample
// packets (shadow validation, the fuzzer) must put in the context they hand
// the data plane so that code gated on a field runs at all (a TC program
// whose work is for packets carrying one mark, an XDP program that works
// only on one receive queue). The backend maps offsets to fields and knows
// which of them it can set.
//
// Found structurally, from the entry's first argument: loads at constant
// offsets from it, through GEPs, BPF CO-RE field accesses
// (llvm.preserve.*.access.index) and the parameters of the program's own
// functions it is passed to. The value each load yields is followed through
// casts, masks, shifts, additions and xors with constants to the compares
// and switches that test it, and every constant tested is mapped back to the
// field value that meets it (for an ordering, the values on either side).
//
// An approximation, and a safe one for its callers: a field it does not list
// may still be read when the pointer went where it cannot follow (`escapes`:
// callers then draw every field they can set), and a constant it misses only
// makes a gated path less likely to be drawn; neither makes a comparison
// between versions wrong, since every version gets the same context.
#pragma once

#include <llvm/IR/Function.h>

#include <cstdint>
#include <map>
#include <set>

namespace morpheus::core {

struct ContextRead {
  uint32_t offset = 0, width = 0; // bytes; the widest load at the offset
  // Field values that a test of the program singles out (truncated to the
  // field's width by whoever sets them).
  std::set<uint64_t> singledOut;
};

struct ContextReads {
  std::map<uint32_t, ContextRead> fields; // by offset
  // The context pointer reached code the analysis does not follow (stored,
  // converted, indexed by a variable): any field may be read.
  bool escapes = false;
};

// The reads of `entry`'s context (its first argument; none without one).
ContextReads contextReads(const llvm::Function &entry);

} // namespace morpheus::core
