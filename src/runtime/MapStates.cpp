#include "runtime/MapStates.h"

#include "backend/bpf/MapIO.h"

#include <linux/bpf.h>

#include <algorithm>
#include <cstring>

namespace morpheus::runtime {

using core::Bytes;

namespace {

void putInteger(Bytes &bytes, Field field, uint64_t value) {
  for (uint32_t i = 0; i < field.width && field.offset + i < bytes.size(); ++i)
    bytes[field.offset + i] = uint8_t(value >> (8 * i)); // BPF here is little-endian
}

Bytes randomBytes(Rng &rng, size_t size, const std::vector<Field> &fields,
                  const std::vector<uint64_t> &compared) {
  Bytes bytes(size, 0);
  if (rng() % 2)
    for (uint8_t &byte : bytes)
      byte = uint8_t(rng());
  for (Field field : fields)
    putInteger(bytes, field, biased(rng, field.width, compared));
  return bytes;
}

Bytes indexKey(uint32_t index) {
  Bytes key(4);
  std::memcpy(key.data(), &index, 4);
  return key;
}

} // namespace

Expected<MapStateGenerator> MapStateGenerator::create(const core::TableCatalog &catalog,
                                                      const std::map<std::string, int> &maps,
                                                      MapContents configured,
                                                      uint32_t maxEntries,
                                                      std::vector<uint64_t> compared) {
  MapStateGenerator generator;
  generator.configured = std::move(configured);
  generator.maxEntries = maxEntries;
  generator.compared = std::move(compared);
  bpf::KernelTypes types;
  Error failure = Error::success();
  for (const auto &[name, info] : catalog) {
    auto fd = maps.find(name);
    if (fd == maps.end())
      continue;
    auto layout = bpf::layoutOf(fd->second, name);
    if (!layout) {
      failure = layout.takeError();
      break;
    }
    if (!bpf::isPlainDataMap(layout->type))
      continue;
    FilledMap map{*layout, {}, {}};
    if (layout->btfId) {
      if (layout->type != BPF_MAP_TYPE_LPM_TRIE)
        map.keyFields = types.integerFields(layout->btfId, layout->btfKeyTypeId);
      map.valueFields = types.integerFields(layout->btfId, layout->btfValueTypeId);
    }
    generator.filled.emplace(name, std::move(map));
  }
  if (failure)
    return failure;
  return generator;
}

MapContents MapStateGenerator::generate(Rng &rng, bool &fromConfiguration) const {
  MapContents state;
  fromConfiguration = !configured.empty() && rng() % 2;
  for (const auto &[name, map] : filled) {
    const bpf::MapLayout &layout = map.layout;
    auto real = configured.find(name);
    if (fromConfiguration && real != configured.end()) {
      std::vector<std::pair<Bytes, Bytes>> pool = real->second;
      std::shuffle(pool.begin(), pool.end(), rng);
      pool.resize(std::min<size_t>(pool.size(), 4 * maxEntries));
      for (auto &[key, value] : pool)
        if (rng() % 4 == 0)
          value = randomBytes(rng, layout.valueSize, map.valueFields, compared);
      state[name] = std::move(pool);
      continue;
    }
    uint32_t count = rng() % (std::min(maxEntries, layout.maxEntries) + 1);
    auto &entries = state[name];
    for (uint32_t i = 0; i < count; ++i) {
      Bytes key;
      if (bpf::isArrayMap(layout.type)) {
        uint32_t small = std::min<uint32_t>(layout.maxEntries, 8);
        uint32_t index = rng() % 3 == 0   ? uint32_t(rng() % layout.maxEntries)
                         : rng() % 5 == 0 ? layout.maxEntries - 1
                                          : uint32_t(rng() % small);
        key = indexKey(index);
      } else if (layout.type == BPF_MAP_TYPE_LPM_TRIE) {
        uint32_t maxPrefix = (layout.keySize - 4) * 8;
        std::vector<uint32_t> usual = {0, 8, 16, 24, 32, maxPrefix};
        uint32_t prefix = rng() % 2 ? usual[rng() % usual.size()] : rng() % (maxPrefix + 1);
        key = randomBytes(rng, layout.keySize, {}, compared);
        std::memcpy(key.data(), &prefix, 4);
        if (prefix > maxPrefix)
          std::memcpy(key.data(), &maxPrefix, 4);
      } else {
        key = randomBytes(rng, layout.keySize, map.keyFields, compared);
      }
      entries.emplace_back(std::move(key),
                           randomBytes(rng, layout.valueSize, map.valueFields, compared));
    }
  }
  return state;
}

std::vector<Step> MapStateGenerator::packets(const MapContents &state, Rng &rng,
                                             uint32_t count, const ContextPlan &context) const {
  std::vector<KeyedTable> tables;
  for (const auto &[name, entries] : state) {
    const FilledMap &map = filled.at(name);
    tables.push_back({map.layout.type, map.keyFields, entries});
  }
  std::vector<Step> steps;
  for (SamplePacket &sample : synthesizePackets(tables, rng, count, context))
    steps.push_back(Step{std::move(sample)});
  return steps;
}

} // namespace morpheus::runtime
