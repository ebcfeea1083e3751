#include "runtime/ScratchMaps.h"

#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"

#include <linux/bpf.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <set>

namespace morpheus::runtime {

using core::Bytes;
using bpf::MapLayout;

namespace {

// A ring buffer copy holds at most this many bytes when windowed: a sample
// writes a few records, and a live ring of many megabytes copied three
// times a cycle would cost more than the cycle.
constexpr uint32_t RingWindow = 256 * 1024;

CopyKind kindOf(uint32_t type) {
  if (bpf::isPlainDataMap(type))
    return CopyKind::Data;
  switch (type) {
  case BPF_MAP_TYPE_PROG_ARRAY:
    return CopyKind::Programs;
  case BPF_MAP_TYPE_ARRAY_OF_MAPS:
  case BPF_MAP_TYPE_HASH_OF_MAPS:
    return CopyKind::MapsOfMaps;
  case BPF_MAP_TYPE_DEVMAP:
  case BPF_MAP_TYPE_DEVMAP_HASH:
  case BPF_MAP_TYPE_CPUMAP:
    return CopyKind::Devices;
  case BPF_MAP_TYPE_RINGBUF:
    return CopyKind::Ring;
  case BPF_MAP_TYPE_QUEUE:
  case BPF_MAP_TYPE_STACK:
    return CopyKind::Sequence;
  default:
    return CopyKind::Empty;
  }
}

bool isArrayType(uint32_t type) {
  return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY ||
         type == BPF_MAP_TYPE_ARRAY_OF_MAPS || type == BPF_MAP_TYPE_DEVMAP ||
         type == BPF_MAP_TYPE_CPUMAP || type == BPF_MAP_TYPE_PROG_ARRAY;
}

// Arrays larger than this are never dumped or restored whole (a load
// balancer's ring has millions of slots): only at the keys asked for.
constexpr uint32_t WholeArrayLimit = 1 << 17;

bool isSparseArray(const MapImage::Map &map) {
  return map.kind == CopyKind::Data && isArrayType(map.layout.type) &&
         map.layout.maxEntries > WholeArrayLimit;
}

Bytes indexKey(uint32_t index) {
  Bytes key(4);
  std::memcpy(key.data(), &index, 4);
  return key;
}

uint32_t indexOf(const Bytes &key) {
  uint32_t index = 0;
  std::memcpy(&index, key.data(), std::min<size_t>(4, key.size()));
  return index;
}

// Calls `visit(key)` for the keys of the map behind `fd` in the kernel's
// order: indexes below max_entries for arrays, the key walk otherwise;
// stops when `visit` returns false, or fails (with its error).
Error visitKeys(int fd, const MapLayout &layout,
                llvm::function_ref<Expected<bool>(const Bytes &)> visit) {
  std::optional<Error> failed;
  auto step = [&](const Bytes &key) {
    auto more = visit(key);
    if (!more) {
      failed.emplace(more.takeError());
      return false;
    }
    return *more;
  };
  Error walk = Error::success();
  if (isArrayType(layout.type)) {
    for (uint32_t index = 0; index < layout.maxEntries; ++index)
      if (!step(indexKey(index)))
        break;
  } else {
    walk = bpf::forEachKey(fd, layout.keySize, layout.name, step);
  }
  if (failed) {
    llvm::consumeError(std::move(walk));
    return std::move(*failed);
  }
  return walk;
}

// How many entries a copy of `live` is created with.
uint32_t copySize(const MapLayout &live, CopyKind kind, const CopySizing &sizing,
                  const std::vector<Bytes> &keys, bool whole) {
  if (!sizing.window || whole)
    return live.maxEntries;
  uint32_t window = *sizing.window;
  switch (kind) {
  case CopyKind::Data:
  case CopyKind::Devices:
    if (isArrayType(live.type)) {
      if (live.type != BPF_MAP_TYPE_ARRAY && live.type != BPF_MAP_TYPE_PERCPU_ARRAY)
        return live.maxEntries; // device arrays hold a pointer per slot
      // Every index read fits, so what the candidate inlined is there; a
      // smaller array returns "no entry" beyond its end in every version
      // alike, and the verifier bounds-checks any index.
      uint32_t size = window;
      for (const Bytes &key : keys)
        if (key.size() == 4)
          size = std::max(size, indexOf(key) + 1);
      return std::min(live.maxEntries, size);
    }
    return std::min<uint64_t>(live.maxEntries,
                              uint64_t(window) + keys.size() + sizing.headroom);
  case CopyKind::Ring:
    return std::min(live.maxEntries, RingWindow);
  case CopyKind::Sequence:
    return std::min<uint64_t>(live.maxEntries, uint64_t(window) + sizing.headroom);
  default:
    return live.maxEntries;
  }
}

// Calls `visit(index, row)` for the slots below `count` of the array
// behind `fd`.
Error readArray(int fd, const MapLayout &layout, uint32_t count,
                llvm::function_ref<void(uint32_t, const uint8_t *)> visit) {
  auto visited = bpf::MapAccess(fd, layout.name)
                     .forEachSlot(0, count, rowSize(layout),
                                  [&](uint32_t index, const uint8_t *row) {
                                    visit(index, row);
                                    return true;
                                  });
  return visited ? Error::success() : visited.takeError();
}

// The slots of `keys` (array indexes, in any order, repeated or not) below
// `size`, ascending and distinct, as MapAccess::forEachListedSlot takes
// them: a key of another size, or beyond the array, finds no entry.
std::vector<uint32_t> listedSlots(const std::vector<Bytes> &keys, uint32_t size) {
  std::vector<uint32_t> slots;
  for (const Bytes &key : keys)
    if (key.size() == 4 && indexOf(key) < size)
      slots.push_back(indexOf(key));
  std::sort(slots.begin(), slots.end());
  slots.erase(std::unique(slots.begin(), slots.end()), slots.end());
  return slots;
}

// The rows a copy starts with: a window of the live entries (the first
// ones), then every key asked for. Devices keep their interface or queue
// size and lose the program attached to the slot.
Expected<std::vector<std::pair<Bytes, Bytes>>>
readRows(int fd, const MapLayout &live, CopyKind kind, std::optional<uint32_t> window,
         const std::vector<Bytes> &keys) {
  std::map<Bytes, Bytes> rows;
  bpf::MapAccess map(fd, live.name);
  Bytes value(rowSize(live));
  auto take = [&](const Bytes &key) -> Error {
    auto found = map.lookup(key, value);
    if (!found)
      return found.takeError();
    if (*found) {
      Bytes row = value;
      if (kind == CopyKind::Devices && row.size() > 4)
        std::fill(row.begin() + 4, row.end(), 0); // the program: none
      rows[key] = std::move(row);
    }
    return Error::success();
  };
  uint32_t budget = window.value_or(UINT32_MAX);
  if (live.type == BPF_MAP_TYPE_ARRAY || live.type == BPF_MAP_TYPE_PERCPU_ARRAY) {
    // In batches, keeping the slots that are not zero (a new array is
    // zeroed): a pristine array of millions of slots costs a few syscalls.
    if (Error err = readArray(fd, live, std::min(budget, live.maxEntries),
                              [&](uint32_t index, const uint8_t *row) {
                                if (std::any_of(row, row + value.size(),
                                                [](uint8_t b) { return b != 0; }))
                                  rows[indexKey(index)] = Bytes(row, row + value.size());
                              }))
      return err;
    // The keys asked for, zero or not, in batches too (a firewall lists
    // 145,000 slots).
    std::vector<Bytes> unread;
    for (const Bytes &key : keys)
      if (key.size() == live.keySize && !rows.count(key))
        unread.push_back(key);
    if (Error err = map.forEachListedSlot(listedSlots(unread, live.maxEntries), value.size(),
                                          [&](uint32_t index, const uint8_t *row) {
                                            rows[indexKey(index)] = Bytes(row, row + value.size());
                                          }))
      return err;
  } else {
    uint32_t visited = 0;
    if (Error err = visitKeys(fd, live, [&](const Bytes &key) -> Expected<bool> {
          if (visited++ >= budget)
            return false;
          if (Error err = take(key))
            return std::move(err);
          return true;
        }))
      return err;
    for (const Bytes &key : keys)
      if (key.size() == live.keySize && !rows.count(key))
        if (Error err = take(key))
          return err;
  }
  return std::vector<std::pair<Bytes, Bytes>>(std::make_move_iterator(rows.begin()),
                                              std::make_move_iterator(rows.end()));
}

} // namespace

size_t rowSize(const MapLayout &layout) {
  return bpf::syscallValueSize(layout.type, layout.valueSize);
}

// Every element of a queue or stack, taken out in the order it gives them.
static Expected<std::vector<Bytes>> takeAll(bpf::MapAccess &sequence, size_t elementSize) {
  std::vector<Bytes> taken;
  Bytes element(elementSize);
  for (;;) {
    auto popped = sequence.pop(element);
    if (!popped)
      return popped.takeError();
    if (!*popped)
      return taken;
    taken.push_back(element);
  }
}

Expected<MapImage> MapImage::read(const LiveMaps &live,
                                  const std::map<std::string, MapLayout> &declared,
                                  const CopySizing &sizing) {
  MapImage image;
  image.slots = live.programSlots;
  std::map<std::string, MapLayout> layouts;
  for (const auto &[name, fd] : live.maps) {
    if (bpf::isFrozenSection(name) || name == bpf::GuardMapName ||
        name == bpf::FallbackMapName)
      continue;
    auto layout = bpf::layoutOf(fd, name);
    if (!layout)
      return layout.takeError();
    layouts[name] = *layout;
  }
  // Inner maps must fit their outer map's template, so a map of the object
  // that some outer map also holds is copied whole.
  std::set<uint32_t> innerIds;
  for (const auto &[name, layout] : layouts)
    if (kindOf(layout.type) == CopyKind::MapsOfMaps) {
      int fd = live.maps.at(name);
      bpf::MapAccess outer(fd, name);
      if (Error err = visitKeys(fd, layout, [&](const Bytes &key) -> Expected<bool> {
            auto id = outer.find<uint32_t>(key);
            if (!id)
              return id.takeError();
            if (*id)
              innerIds.insert(**id);
            return true;
          }))
        return err;
    }

  std::map<uint32_t, size_t> byId;
  auto add = [&](const std::string &name, int fd, const MapLayout &layout, bool named,
                 const std::vector<Bytes> &keys) -> Expected<size_t> {
    Map map;
    map.name = name;
    map.named = named;
    map.kind = kindOf(layout.type);
    map.layout = layout;
    map.layout.name = name;
    bool whole = innerIds.count(layout.id) || !named;
    map.layout.maxEntries = copySize(layout, map.kind, sizing, keys, whole);
    if (map.kind == CopyKind::Data || map.kind == CopyKind::Devices) {
      auto rows = readRows(fd, layout, map.kind, whole && named ? std::nullopt : sizing.window,
                           keys);
      if (!rows)
        return rows.takeError();
      for (auto &row : *rows)
        if (!isArrayType(layout.type) || indexOf(row.first) < map.layout.maxEntries)
          map.rows.push_back(std::move(row));
    }
    if (map.kind == CopyKind::MapsOfMaps)
      if (auto found = declared.find(name); found != declared.end())
        map.innerLayout = found->second.inner;
    byId[layout.id] = image.all.size();
    image.all.push_back(std::move(map));
    return image.all.size() - 1;
  };
  static const std::vector<Bytes> none;
  for (const auto &[name, layout] : layouts) {
    auto keys = sizing.keys.find(name);
    auto added = add(name, live.maps.at(name), layout, true,
                     keys == sizing.keys.end() ? none : keys->second);
    if (!added)
      return added.takeError();
  }
  // The inner maps the live outer maps hold (a window of the slots that
  // hold one).
  for (size_t outer = 0, named = image.all.size(); outer < named; ++outer) {
    if (image.all[outer].kind != CopyKind::MapsOfMaps)
      continue;
    const std::string outerName = image.all[outer].name;
    int fd = live.maps.at(outerName);
    bpf::MapAccess outerMap(fd, outerName);
    uint32_t budget = sizing.window.value_or(UINT32_MAX), visited = 0;
    std::vector<std::pair<Bytes, size_t>> held;
    Error walk = visitKeys(fd, layouts.at(outerName), [&](const Bytes &key) -> Expected<bool> {
      auto id = outerMap.find<uint32_t>(key);
      if (!id)
        return id.takeError();
      if (!*id)
        return true; // an empty slot
      if (visited++ >= budget)
        return false;
      if (auto known = byId.find(**id); known != byId.end()) {
        held.emplace_back(key, known->second);
        return true;
      }
      std::string name = outerName + "[" + toHex(key) + "]";
      auto inner = bpf::openMapById(**id, name);
      if (!inner)
        return inner.takeError();
      if (!*inner)
        return true; // replaced meanwhile
      auto layout = bpf::layoutOf((*inner)->get(), name);
      if (!layout)
        return layout.takeError();
      auto added = add(name, (*inner)->get(), *layout, false, none);
      if (!added)
        return added.takeError();
      held.emplace_back(key, *added);
      return true;
    });
    if (walk)
      return walk;
    image.all[outer].inner = std::move(held);
  }
  return image;
}

Expected<std::unique_ptr<ScratchMaps>> ScratchMaps::create(const MapImage &image,
                                                           bool fixedHashSeeds) {
  std::unique_ptr<ScratchMaps> maps(new ScratchMaps(image, fixedHashSeeds));
  if (Error err = maps->createAll())
    return err;
  return maps;
}

ScratchMaps::~ScratchMaps() = default;

bpf::MapAccess ScratchMaps::access(size_t index) const {
  return {fds[index].get(), image.maps()[index].name};
}

Error ScratchMaps::createAll() {
  const std::vector<MapImage::Map> &maps = image.maps();
  fds.resize(maps.size());
  mapped.resize(maps.size());
  // Outer maps last: they are created with, and filled with, inner maps.
  for (bool outers : {false, true})
    for (size_t i = 0; i < maps.size(); ++i) {
      const MapImage::Map &map = maps[i];
      if ((map.kind == CopyKind::MapsOfMaps) != outers)
        continue;
      bpf::MapCreation how;
      how.fixedHashSeed = fixedHashSeeds;
      FileDescriptor ownTemplate;
      if (outers) {
        if (!map.inner.empty()) {
          how.innerTemplate = fds[map.inner.front().second].get();
        } else if (map.innerLayout) {
          auto created = bpf::createMap(*map.innerLayout, {.fixedHashSeed = fixedHashSeeds});
          if (!created)
            return withContext(created.takeError(), "map '" + map.name + "': inner template");
          ownTemplate = std::move(*created);
          how.innerTemplate = ownTemplate.get();
        } else {
          return makeError("map '{0}': no inner map layout to create a scratch copy with",
                           map.name);
        }
      }
      // A plain array is mapped into this process: filled, compared and put
      // back in memory rather than slot by slot through the kernel. Not a
      // read-only or write-only one (a copy of .rodata is frozen as the
      // original is).
      how.mmapable = map.kind == CopyKind::Data && map.layout.type == BPF_MAP_TYPE_ARRAY &&
                     !(map.layout.flags & (BPF_F_RDONLY | BPF_F_WRONLY | BPF_F_RDONLY_PROG |
                                           BPF_F_WRONLY_PROG));
      // Values holding a lock, a timer or a kernel pointer cannot be mapped
      // (the kernel refuses the flag or the mapping): such an array is
      // copied through the kernel.
      auto created = bpf::createMap(map.layout, how);
      if (!created && how.mmapable) {
        llvm::consumeError(created.takeError());
        how.mmapable = false;
        created = bpf::createMap(map.layout, how);
      }
      if (!created)
        return withContext(created.takeError(), "scratch copy");
      fds[i] = std::move(*created);
      if (how.mmapable) {
        if (auto values = bpf::MappedArray::map(fds[i].get(), map.layout))
          mapped[i] = std::move(*values);
        else
          llvm::consumeError(values.takeError());
      }
      if (Error err = fill(i))
        return err;
      if (map.named)
        named[map.name] = fds[i].get();
      if (map.kind == CopyKind::Ring) {
        auto ring = bpf::RingReader::open(access(i));
        if (!ring)
          return withContext(ring.takeError(), "scratch copy");
        rings.emplace(i, std::move(*ring));
      }
    }
  return Error::success();
}

Error ScratchMaps::fill(size_t index) {
  const MapImage::Map &map = image.maps()[index];
  bpf::MapAccess copy = access(index);
  bool array = isArrayType(map.layout.type);
  // A new array is zeroed already.
  auto needed = [&](const Bytes &value) {
    return !array || std::any_of(value.begin(), value.end(), [](uint8_t b) { return b != 0; });
  };
  if (const std::optional<bpf::MappedArray> &values = mapped[index]) {
    for (const auto &[key, value] : map.rows) {
      uint32_t slot = indexOf(key);
      if (slot >= values->slots() || value.size() != map.layout.valueSize)
        return makeError("scratch copy of map '{0}': no slot {1} of {2} bytes", map.name, slot,
                         value.size());
      if (needed(value))
        std::memcpy(values->slot(slot), value.data(), value.size());
    }
  } else if (map.kind == CopyKind::Data) {
    // In batches, the rows in the same order as one by one (a hash copy
    // then places its keys alike in every version).
    Bytes keys, values;
    uint32_t count = 0;
    for (const auto &[key, value] : map.rows)
      if (needed(value)) {
        keys.insert(keys.end(), key.begin(), key.end());
        values.insert(values.end(), value.begin(), value.end());
        ++count;
      }
    if (Error err = copy.updateBatch(keys, values, count))
      return withContext(std::move(err), "scratch copy");
  } else {
    // Devices one by one: devmaps and cpumaps take no batches, and a slot
    // is skipped alone where it fails.
    for (const auto &[key, value] : map.rows) {
      if (!needed(value))
        continue;
      Error written = copy.update(key, value);
      // A device slot naming an interface outside Morpheus's network
      // namespace cannot be copied: it stays empty in every version.
      if (written && map.kind == CopyKind::Devices) {
        llvm::consumeError(std::move(written));
        continue;
      }
      if (written)
        return withContext(std::move(written), "scratch copy");
    }
  }
  if (map.inner.empty())
    return Error::success();
  // In one batch: the kernel waits for an RCU grace period after each
  // update of a map of maps, a few milliseconds, once per batch.
  Bytes keys;
  std::vector<int> inner;
  for (const auto &[key, index] : map.inner) {
    keys.insert(keys.end(), key.begin(), key.end());
    inner.push_back(fds[index].get());
  }
  return withContext(
      copy.updateBatch(
          keys, {reinterpret_cast<const uint8_t *>(inner.data()), inner.size() * sizeof(int)},
          uint32_t(inner.size())),
      "scratch copy: its inner maps' copies");
}

Error ScratchMaps::bindProgramSlots(const bpf::LoadedObject &object) const {
  std::map<std::string, int> arrays;
  for (size_t i = 0; i < image.maps().size(); ++i)
    if (image.maps()[i].kind == CopyKind::Programs && image.maps()[i].named)
      arrays[image.maps()[i].name] = fds[i].get();
  return object.fillProgramSlots(image.programSlots(), arrays);
}

Error ScratchMaps::drainRings() const {
  for (auto &[index, ring] : rings) {
    auto received = ring.drain();
    if (!received)
      return withContext(received.takeError(), "scratch copy");
    std::vector<Bytes> &pending = records[index];
    pending.insert(pending.end(), std::make_move_iterator(received->begin()),
                   std::make_move_iterator(received->end()));
  }
  return Error::success();
}

Expected<MapDump> ScratchMaps::dump(size_t index, const std::vector<Bytes> &keys) const {
  const MapImage::Map &map = image.maps()[index];
  bpf::MapAccess copy = access(index);
  MapDump contents;
  Bytes value(rowSize(map.layout));
  switch (map.kind) {
  case CopyKind::Ring: {
    if (Error err = drainRings())
      return err;
    contents.sequence = std::move(records[index]);
    records[index].clear();
    return contents;
  }
  case CopyKind::Sequence: {
    // Read by taking every element out, then put back in the same order.
    auto taken = takeAll(copy, value.size());
    if (!taken)
      return taken.takeError();
    contents.sequence = std::move(*taken);
    std::vector<Bytes> back = contents.sequence;
    if (map.layout.type == BPF_MAP_TYPE_STACK)
      std::reverse(back.begin(), back.end());
    for (const Bytes &element : back)
      if (Error err = copy.push(element))
        return err;
    return contents;
  }
  case CopyKind::Data:
    break;
  default:
    return contents; // programs cannot write it
  }
  const std::optional<bpf::MappedArray> &values = mapped[index];
  if (isSparseArray(map) && values) {
    for (uint32_t slot : listedSlots(keys, map.layout.maxEntries))
      contents.entries[indexKey(slot)] =
          Bytes(values->slot(slot), values->slot(slot) + value.size());
    return contents;
  }
  if (isSparseArray(map)) {
    if (Error err = copy.forEachListedSlot(listedSlots(keys, map.layout.maxEntries), value.size(),
                                           [&](uint32_t index, const uint8_t *row) {
                                             contents.entries[indexKey(index)] =
                                                 Bytes(row, row + value.size());
                                           }))
      return err;
    return contents;
  }
  if (isArrayType(map.layout.type)) {
    contents.row = value.size();
    contents.flat.assign(size_t(map.layout.maxEntries) * value.size(), 0);
    if (values) {
      for (uint32_t slot = 0; slot < map.layout.maxEntries; ++slot)
        std::memcpy(contents.flat.data() + size_t(slot) * value.size(), values->slot(slot),
                    value.size());
      return contents;
    }
    if (Error err = readArray(copy.fd(), map.layout, map.layout.maxEntries,
                              [&](uint32_t index, const uint8_t *row) {
                                std::memcpy(contents.flat.data() + size_t(index) * value.size(),
                                            row, value.size());
                              }))
      return err;
    return contents;
  }
  if (Error err = bpf::forEachEntry(copy.fd(), map.layout.keySize, value.size(), map.name,
                                    [&](const Bytes &key, const Bytes &value) {
                                      contents.entries[key] = value;
                                      return true;
                                    }))
    return err;
  return contents;
}

Error ScratchMaps::restore(const std::map<std::string, std::vector<Bytes>> &touched) {
  if (Error err = drainRings())
    return err;
  for (auto &[index, received] : records)
    received.clear();
  for (size_t index = 0; index < image.maps().size(); ++index) {
    const MapImage::Map &map = image.maps()[index];
    bpf::MapAccess copy = access(index);
    if (map.kind == CopyKind::Sequence) {
      if (auto emptied = takeAll(copy, rowSize(map.layout)); !emptied)
        return emptied.takeError();
      continue;
    }
    if (map.kind != CopyKind::Data)
      continue;
    size_t row = rowSize(map.layout);
    if (!isArrayType(map.layout.type)) {
      if (Error err = copy.clear(map.layout.keySize))
        return err;
      if (Error err = fill(index))
        return err;
      continue;
    }
    std::map<Bytes, const Bytes *> wanted;
    for (const auto &[key, value] : map.rows)
      wanted[key] = &value;
    Bytes zero(row, 0);
    auto put = [&](const Bytes &key, const uint8_t *current) -> Error {
      auto found = wanted.find(key);
      const uint8_t *value = found == wanted.end() ? zero.data() : found->second->data();
      if (current && !std::memcmp(current, value, row))
        return Error::success();
      return copy.update(key, llvm::ArrayRef<uint8_t>(value, row));
    };
    if (isSparseArray(map)) {
      std::set<Bytes> keys;
      if (auto written = touched.find(map.name); written != touched.end())
        keys.insert(written->second.begin(), written->second.end());
      for (const auto &[key, value] : map.rows)
        keys.insert(key);
      for (const Bytes &key : keys)
        if (key.size() == 4 && indexOf(key) < map.layout.maxEntries)
          if (Error err = put(key, nullptr))
            return err;
      continue;
    }
    if (const std::optional<bpf::MappedArray> &values = mapped[index]) {
      for (uint32_t slot = 0; slot < map.layout.maxEntries; ++slot) {
        auto found = wanted.find(indexKey(slot));
        std::memcpy(values->slot(slot), found == wanted.end() ? zero.data() : found->second->data(),
                    row);
      }
      continue;
    }
    auto current = dump(index, {});
    if (!current)
      return current.takeError();
    for (uint32_t slot = 0; slot < map.layout.maxEntries; ++slot)
      if (Error err = put(indexKey(slot), current->flat.data() + size_t(slot) * row))
        return err;
  }
  return Error::success();
}

} // namespace morpheus::runtime
