// Map states for the differential fuzzer (runtime/Differential): random
// contents shaped by the maps' BTF layouts, or subsets of a real
// configuration, and packets aimed at the keys a state holds.
#pragma once

#include "backend/bpf/BpfObject.h"
#include "core/Tables.h"
#include "runtime/PacketSamples.h"
#include "runtime/VersionComparison.h"
#include "support/Error.h"

#include <map>
#include <string>
#include <vector>

namespace morpheus::runtime {

class MapStateGenerator {
public:
  // The maps states fill: the data maps (hash, array, per-CPU, LRU, LPM) of
  // `catalog`, with layouts and BTF fields read from `maps` (name -> fd, a
  // load of the program). With `configured` contents, half of the states
  // are a random subset of them (up to 4 x `maxEntries` per map) with one
  // value in four rewritten; the others hold up to `maxEntries` random
  // entries per map. Their integer fields are drawn by `biased`, from
  // `compared` among the rest (the constants the program compares with).
  static Expected<MapStateGenerator> create(const core::TableCatalog &catalog,
                                            const std::map<std::string, int> &maps,
                                            MapContents configured, uint32_t maxEntries,
                                            std::vector<uint64_t> compared = {});

  // A new state; `fromConfiguration` tells whether it was drawn from the
  // configured contents.
  MapContents generate(Rng &rng, bool &fromConfiguration) const;
  // `count` packets aimed at the state's keys and values, their contexts
  // drawn under `context`.
  std::vector<Step> packets(const MapContents &state, Rng &rng, uint32_t count,
                            const ContextPlan &context) const;

private:
  struct FilledMap {
    bpf::MapLayout layout;
    std::vector<Field> keyFields, valueFields; // from BTF; may be empty
  };
  std::map<std::string, FilledMap> filled;
  MapContents configured;
  uint32_t maxEntries = 8;
  std::vector<uint64_t> compared;
};

} // namespace morpheus::runtime
