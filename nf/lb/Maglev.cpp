#include "Maglev.h"

#include <algorithm>
#include <limits>
#include <tuple>

namespace morpheus::nf::lb {

namespace {

// SplitMix64's output function: a full-avalanche 64-bit mix, so addresses
// that differ in one bit get unrelated permutations.
uint64_t mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// One backend walking its permutation offset, offset + skip, ... (mod size).
// With size prime and 0 < skip < size the walk visits every slot once.
struct Walker {
  uint32_t id;
  uint32_t weight;
  uint32_t position;
  uint32_t skip;
  uint64_t credit = 0;
};

} // namespace

std::vector<uint32_t> buildMaglevTable(std::vector<MaglevBackend> backends, uint32_t size) {
  constexpr uint32_t Empty = std::numeric_limits<uint32_t>::max();
  std::erase_if(backends, [](const MaglevBackend &b) { return b.weight == 0; });
  if (backends.empty() || size < 2)
    return std::vector<uint32_t>(size, 0);
  // Turn order must not depend on how the caller listed the backends.
  std::sort(backends.begin(), backends.end(), [](const MaglevBackend &a, const MaglevBackend &b) {
    return std::tie(a.key, a.weight, a.id) < std::tie(b.key, b.weight, b.id);
  });

  std::vector<Walker> walkers;
  uint32_t heaviest = 0;
  for (const MaglevBackend &backend : backends) {
    uint64_t h = mix64(backend.key);
    walkers.push_back(
        {backend.id, backend.weight, uint32_t((h >> 32) % size), uint32_t(h % (size - 1)) + 1});
    heaviest = std::max(heaviest, backend.weight);
  }

  // Weighted turns: each round every walker earns its weight in credit and
  // takes a turn per `heaviest` credit, so turns (and slots) are shared in
  // proportion to weight; equal weights degenerate to plain round-robin.
  std::vector<uint32_t> table(size, Empty);
  uint32_t filled = 0;
  while (true) {
    for (Walker &walker : walkers) {
      walker.credit += walker.weight;
      if (walker.credit < heaviest)
        continue;
      walker.credit -= heaviest;
      while (table[walker.position] != Empty)
        walker.position = uint32_t((uint64_t(walker.position) + walker.skip) % size);
      table[walker.position] = walker.id;
      walker.position = uint32_t((uint64_t(walker.position) + walker.skip) % size);
      if (++filled == size)
        return table;
    }
  }
}

} // namespace morpheus::nf::lb
