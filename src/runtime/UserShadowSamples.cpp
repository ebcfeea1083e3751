#include "runtime/UserShadowSamples.h"

#include "runtime/PacketSamples.h"

#include <linux/bpf.h>

namespace morpheus::runtime {

namespace {

unsigned mapTypeOf(core::TableMatch match) {
  switch (match) {
  case core::TableMatch::LongestPrefix:
    return BPF_MAP_TYPE_LPM_TRIE;
  case core::TableMatch::Index:
    return BPF_MAP_TYPE_ARRAY;
  default:
    return BPF_MAP_TYPE_HASH;
  }
}

} // namespace

user::HandlerOptions::Shadow packetsAimedAtTables(uint32_t packets) {
  user::HandlerOptions::Shadow shadow;
  shadow.packets = packets;
  shadow.samples = [](const core::TableCatalog &catalog, const core::TableSnapshot &snapshot,
                      uint64_t seed, uint32_t count) {
    std::vector<KeyedTable> tables;
    for (const auto &[name, contents] : snapshot) {
      KeyedTable table{mapTypeOf(catalog.at(name).match), {}, {}};
      for (const core::TableEntry &entry : contents.entries)
        table.entries.emplace_back(entry.key, entry.value.value_or(core::Bytes()));
      for (const core::Bytes &key : contents.probedKeys)
        table.entries.emplace_back(key, core::Bytes());
      tables.push_back(std::move(table));
    }
    Rng rng(seed);
    std::vector<user::ShadowPacket> frames;
    for (SamplePacket &sample : synthesizePackets(tables, rng, count, ContextPlan{}))
      frames.push_back({std::move(sample.packet), 0});
    return frames;
  };
  return shadow;
}

} // namespace morpheus::runtime
