// Maglev consistent hashing (Eisenbud et al., NSDI 2016, section 3.4): a
// lookup table of prime size in which every backend claims slots in the
// order of its own pseudo-random permutation, taking turns, so shares are
// nearly equal and a change of the backend set moves few slots.
#pragma once

#include <cstdint>
#include <vector>

namespace morpheus::nf::lb {

struct MaglevBackend {
  uint32_t id;     // what the table stores for it (a real index, never 0)
  uint32_t key;    // what its permutation derives from (the real's address)
  uint32_t weight; // relative share of turns; 0 = no slots
};

// The table of `size` slots (size must be prime) holding backend ids; 0 in
// every slot when no backend has a weight. The result depends only on the
// set of (key, weight, id), not on the order of `backends`, and a backend's
// slots depend on its key, not its id.
std::vector<uint32_t> buildMaglevTable(std::vector<MaglevBackend> backends, uint32_t size);

} // namespace morpheus::nf::lb
