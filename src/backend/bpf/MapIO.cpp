#include "backend/bpf/MapIO.h"

#include "backend/bpf/MapAccess.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <string_view>

namespace morpheus::bpf {

using core::Bytes;

int possibleCpus() {
  static int cpus = libbpf_num_possible_cpus();
  return cpus;
}

Error forEachKey(int fd, uint32_t keySize, const std::string &mapName,
                 llvm::function_ref<bool(const Bytes &)> visit) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length))
    return makeSystemError(errno, "map '{0}': cannot query", mapName);
  if (info.key_size != keySize)
    return makeError("map '{0}': keys have {1} bytes, not {2}", mapName, info.key_size,
                     keySize);
  Bytes key(keySize), next(keySize);
  const void *previous = nullptr;
  for (uint64_t step = 0; step < 2 * uint64_t(info.max_entries) + 2; ++step) {
    if (bpf_map_get_next_key(fd, previous, next.data()) != 0) {
      if (errno == ENOENT)
        return Error::success();
      return makeSystemError(errno, "map '{0}': cannot walk the keys", mapName);
    }
    if (!visit(next))
      return Error::success();
    key = next;
    previous = key.data();
  }
  return makeSystemError(EAGAIN,
                         "map '{0}': keys kept changing during a walk of {1} steps, so not "
                         "all of them may have been seen",
                         mapName, 2 * uint64_t(info.max_entries) + 2);
}

Error forEachEntry(int fd, uint32_t keySize, size_t valueBytes, const std::string &mapName,
                   llvm::function_ref<bool(const Bytes &, const Bytes &)> visit) {
  MapAccess map(fd, mapName);
  Bytes value(valueBytes);
  std::optional<Error> failed;
  Error walk = forEachKey(fd, keySize, mapName, [&](const Bytes &key) {
    auto found = map.lookup(key, value);
    if (!found) {
      failed.emplace(found.takeError());
      return false;
    }
    return !*found || visit(key, value);
  });
  if (failed) {
    llvm::consumeError(std::move(walk));
    return std::move(*failed);
  }
  return walk;
}

bool isArrayMap(unsigned type) {
  return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY;
}

bool isPerCpuMap(unsigned type) {
  return type == BPF_MAP_TYPE_PERCPU_ARRAY || type == BPF_MAP_TYPE_PERCPU_HASH ||
         type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

bool isPlainDataMap(unsigned type) {
  switch (type) {
  case BPF_MAP_TYPE_HASH:
  case BPF_MAP_TYPE_ARRAY:
  case BPF_MAP_TYPE_PERCPU_HASH:
  case BPF_MAP_TYPE_PERCPU_ARRAY:
  case BPF_MAP_TYPE_LRU_HASH:
  case BPF_MAP_TYPE_LRU_PERCPU_HASH:
  case BPF_MAP_TYPE_LPM_TRIE:
    return true;
  default:
    return false;
  }
}

namespace {

// The kernel pads each CPU's copy of a per-CPU value to 8 bytes.
size_t perCpuStride(uint32_t valueSize) { return (valueSize + 7) & ~size_t(7); }

// The entry of `key` as the data plane reads it: a per-CPU value collapsed
// when every CPU holds the same bytes, else the bytes they agree on.
core::TableEntry collapse(const core::TableInfo &info, const Bytes &key, const Bytes &raw) {
  if (!info.perCpu)
    return {key, raw};
  size_t stride = perCpuStride(info.valueSize);
  Bytes first(raw.begin(), raw.begin() + info.valueSize);
  std::vector<bool> agreed(info.valueSize, true);
  bool allAgree = true;
  for (int cpu = 1; cpu < possibleCpus(); ++cpu)
    for (size_t byte = 0; byte < info.valueSize; ++byte)
      if (raw[cpu * stride + byte] != first[byte])
        allAgree = agreed[byte] = false;
  if (allAgree)
    return {key, first};
  core::TableEntry entry{key, std::nullopt};
  entry.cpuZero = std::move(first);
  entry.agreed = std::move(agreed);
  return entry;
}

} // namespace

size_t syscallValueSize(unsigned type, uint32_t valueSize) {
  return isPerCpuMap(type) ? perCpuStride(valueSize) * possibleCpus() : valueSize;
}

uint64_t arrayContentBytes(const core::TableInfo &info) {
  return uint64_t(info.maxEntries) *
         syscallValueSize(info.perCpu ? BPF_MAP_TYPE_PERCPU_ARRAY : BPF_MAP_TYPE_ARRAY,
                          info.valueSize);
}

namespace {

// A live map as readTable's source: lookups by syscall, the key walk,
// arrays read in batches (MapAccess::forEachSlot: no further than the
// visitor wants, give or take a batch).
class LiveTable : public TableSource {
public:
  LiveTable(int fd, const core::TableInfo &info)
      : fd(fd), info(info),
        rawSize(syscallValueSize(info.perCpu ? BPF_MAP_TYPE_PERCPU_ARRAY : BPF_MAP_TYPE_ARRAY,
                                 info.valueSize)),
        value(rawSize) {}

  Error forEachKey(llvm::function_ref<bool(const Bytes &)> visit) override {
    return bpf::forEachKey(fd, info.keySize, info.name, visit);
  }
  Expected<std::optional<core::TableEntry>> lookup(const Bytes &key) override {
    if (bpf_map_lookup_elem(fd, key.data(), value.data()) == 0)
      return std::optional(collapse(info, key, value));
    if (errno == ENOENT)
      return std::nullopt;
    return makeSystemError(errno, "map '{0}': lookup of key {1} failed", info.name, toHex(key));
  }
  Expected<bool> forEachSlot(llvm::function_ref<bool(core::TableEntry &&)> visit) override {
    if (arrayContentBytes(info) > ArrayContentReadBytes)
      return false;
    auto read = MapAccess(fd, info.name)
                    .forEachSlot(0, info.maxEntries, rawSize,
                                 [&](uint32_t index, const uint8_t *row) {
                                   return visit(collapse(info, bytesOf(index),
                                                         Bytes(row, row + rawSize)));
                                 });
    if (!read)
      return read.takeError();
    return true;
  }

private:
  int fd;
  const core::TableInfo &info;
  size_t rawSize;
  Bytes value;
};

} // namespace

Expected<core::TableContents> readTable(int fd, const core::TableInfo &info,
                                        const core::TableReadRequest &request) {
  LiveTable source(fd, info);
  return readTable(source, info, request);
}

Expected<core::GlobalValues> readGlobals(const std::vector<core::GlobalSlice> &slices,
                                         const std::map<std::string, int> &fds) {
  core::GlobalValues values;
  std::map<std::string, core::Bytes> sections;
  for (const core::GlobalSlice &slice : slices) {
    auto section = sections.find(slice.sectionTable);
    if (section == sections.end()) {
      auto fd = fds.find(slice.sectionTable);
      if (fd == fds.end())
        return makeError("global '{0}': its section's map '{1}' is not a map of the program",
                         slice.global, slice.sectionTable);
      bpf_map_info info = {};
      uint32_t length = sizeof(info);
      if (bpf_obj_get_info_by_fd(fd->second, &info, &length))
        return makeSystemError(errno, "map '{0}': cannot query", slice.sectionTable);
      core::Bytes bytes(info.value_size);
      uint32_t zero = 0;
      if (bpf_map_lookup_elem(fd->second, &zero, bytes.data()))
        return makeSystemError(errno, "map '{0}': cannot read", slice.sectionTable);
      section = sections.emplace(slice.sectionTable, std::move(bytes)).first;
    }
    if (slice.offset + slice.size > section->second.size())
      return makeError("global '{0}': bytes {1}..{2} lie beyond its section's map '{3}'",
                       slice.global, slice.offset, slice.offset + slice.size,
                       slice.sectionTable);
    values[slice.global] = core::Bytes(section->second.begin() + slice.offset,
                                       section->second.begin() + slice.offset + slice.size);
  }
  return values;
}

Expected<core::TableSnapshot> readSnapshot(const core::ReadPlan &plan,
                                           const core::TableCatalog &catalog,
                                           const std::map<std::string, int> &fds) {
  core::TableSnapshot snapshot;
  std::map<uint32_t, std::string> programTables; // by id, once a map of maps is read
  for (const auto &[name, request] : plan) {
    auto fd = fds.find(name);
    auto info = catalog.find(name);
    if (fd == fds.end() || info == catalog.end())
      return makeError("map '{0}': not a map of the program", name);
    auto contents = readTable(fd->second, info->second, request);
    if (!contents)
      return contents.takeError();
    // A map of maps reads back the ids of the maps it holds: name the ones
    // that are the program's own.
    if (info->second.innerTemplate && !contents->entries.empty()) {
      if (programTables.empty())
        for (const auto &[table, tableFd] : fds) {
          bpf_map_info mapInfo = {};
          uint32_t length = sizeof(mapInfo);
          if (bpf_obj_get_info_by_fd(tableFd, &mapInfo, &length))
            return makeSystemError(errno, "map '{0}': cannot query", table);
          programTables[mapInfo.id] = table;
        }
      for (const core::TableEntry &entry : contents->entries) {
        uint32_t id = 0;
        if (!entry.value || entry.value->size() != sizeof(id))
          continue;
        std::memcpy(&id, entry.value->data(), sizeof(id));
        if (auto table = programTables.find(id); table != programTables.end())
          contents->storedTables[entry.key] = table->second;
      }
    }
    snapshot[name] = std::move(*contents);
  }
  return snapshot;
}

} // namespace morpheus::bpf
