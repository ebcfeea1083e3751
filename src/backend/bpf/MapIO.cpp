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

// An array larger than the inline limit may still hold few slots that
// differ from the rest (a 1,000-slot backend array holding 3 backends, the
// others zero; 8,193 rule sets of which a few are used, the others the
// loader's "empty"). Reading it whole costs a copy of every value, so only
// arrays of at most ArrayContentReadBytes (values as the syscall returns
// them, every CPU's for per-CPU arrays) are read this way, in batches of
// ArrayReadBatch slots; the most common value is the unlisted one (zeros on
// a tie with it) and every other slot is listed, however many (a pass that
// inlines entries declines past its own limit; region-as-table reads every
// slot's value). nullopt when the array is larger, or its CPUs disagree on
// the common value.
constexpr uint32_t ArrayReadBatch = 1024;

Expected<std::optional<core::TableContents>>
readArrayByContent(int fd, const core::TableInfo &info) {
  size_t rawSize = syscallValueSize(info.perCpu ? BPF_MAP_TYPE_PERCPU_ARRAY : BPF_MAP_TYPE_ARRAY,
                                    info.valueSize);
  if (info.keySize != sizeof(uint32_t) || arrayContentBytes(info) > ArrayContentReadBytes)
    return std::nullopt;
  std::vector<uint32_t> slots(info.maxEntries);
  Bytes values(size_t(info.maxEntries) * rawSize);
  uint32_t read = 0, batch = 0;
  while (read < info.maxEntries) {
    uint32_t count = std::min(ArrayReadBatch, info.maxEntries - read);
    LIBBPF_OPTS(bpf_map_batch_opts, options);
    int result = bpf_map_lookup_batch(fd, read ? &batch : nullptr, &batch, slots.data() + read,
                                      values.data() + size_t(read) * rawSize, &count, &options);
    if (result != 0 && errno != ENOENT)
      return makeSystemError(errno, "map '{0}': batch read failed", info.name);
    read += count;
    if (result != 0)
      break; // ENOENT: the last batch
  }
  auto rawAt = [&](uint32_t i) {
    return std::string_view(reinterpret_cast<const char *>(values.data()) + size_t(i) * rawSize,
                            rawSize);
  };
  std::map<std::string_view, uint32_t> counts;
  for (uint32_t i = 0; i < read; ++i)
    ++counts[rawAt(i)];
  std::string zeros(rawSize, '\0');
  std::string_view common = zeros;
  uint32_t commonCount = counts.count(common) ? counts[common] : 0;
  for (const auto &[raw, count] : counts)
    if (count > commonCount) {
      common = raw;
      commonCount = count;
    }
  core::TableContents contents;
  core::TableEntry unlisted = collapse(info, {}, Bytes(common.begin(), common.end()));
  if (!unlisted.value)
    return std::nullopt;
  for (uint32_t i = 0; i < read; ++i) {
    if (rawAt(i) == common)
      continue;
    std::string_view raw = rawAt(i);
    contents.entries.push_back(collapse(info, bytesOf(slots[i]), Bytes(raw.begin(), raw.end())));
  }
  contents.complete = true;
  contents.unlistedValue = std::move(unlisted.value);
  return contents;
}

} // namespace

Expected<core::TableContents> readTable(int fd, const core::TableInfo &info,
                                        const core::TableReadRequest &request) {
  core::TableContents contents;
  size_t rawSize = info.perCpu ? perCpuStride(info.valueSize) * possibleCpus()
                               : info.valueSize;
  Bytes value(rawSize);
  auto read = [&](const Bytes &key) -> Expected<bool> {
    if (bpf_map_lookup_elem(fd, key.data(), value.data()) == 0)
      return true;
    if (errno == ENOENT)
      return false;
    return makeSystemError(errno, "map '{0}': lookup of key {1} failed",
                           info.name, toHex(key));
  };

  bool wantWhole = request.wholeTableLimit > 0 &&
                   (info.match != core::TableMatch::Index ||
                    info.maxEntries <= request.wholeTableLimit);
  if (wantWhole) {
    // Walk the keys; give up as soon as the table is larger than any pass
    // could use, so a big table costs at most limit+1 steps.
    std::vector<Bytes> keys;
    bool tooLarge = false;
    if (Error err = forEachKey(fd, info.keySize, info.name, [&](const Bytes &key) {
          keys.push_back(key);
          tooLarge = keys.size() > request.wholeTableLimit;
          return !tooLarge;
        }))
      return err;
    contents.complete = !tooLarge;
    if (contents.complete)
      for (const Bytes &k : keys) {
        auto found = read(k);
        if (!found)
          return found.takeError();
        // An entry deleted between the walk and the read is simply gone.
        if (*found)
          contents.entries.push_back(collapse(info, k, value));
      }
  }
  if (!wantWhole && request.wholeTableLimit > 0 && info.match == core::TableMatch::Index) {
    auto sparse = readArrayByContent(fd, info);
    if (!sparse)
      return sparse.takeError();
    if (*sparse)
      contents = std::move(**sparse);
  }
  for (const Bytes &key : request.keys) {
    if (contents.complete)
      break;
    if (key.size() != info.keySize || contents.probedKeys.count(key))
      continue;
    auto found = read(key);
    if (!found)
      return found.takeError();
    contents.probedKeys.insert(key);
    if (*found)
      contents.entries.push_back(collapse(info, key, value));
  }
  // Hash iteration order is the kernel's business; compare by key order.
  std::sort(contents.entries.begin(), contents.entries.end(),
            [](const core::TableEntry &a, const core::TableEntry &b) {
              return a.key < b.key;
            });
  return contents;
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
