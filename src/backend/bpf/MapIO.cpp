#include "backend/bpf/MapIO.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

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
  return Error::success();
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

std::optional<Bytes> collapse(const core::TableInfo &info, const Bytes &raw) {
  if (!info.perCpu)
    return raw;
  size_t stride = perCpuStride(info.valueSize);
  Bytes first(raw.begin(), raw.begin() + info.valueSize);
  for (int cpu = 1; cpu < possibleCpus(); ++cpu)
    if (!std::equal(first.begin(), first.end(), raw.begin() + cpu * stride))
      return std::nullopt;
  return first;
}

} // namespace

size_t syscallValueSize(unsigned type, uint32_t valueSize) {
  return isPerCpuMap(type) ? perCpuStride(valueSize) * possibleCpus() : valueSize;
}

namespace {

// An array larger than the inline limit may still hold few slots that are
// not zero (a 1,000-slot backend array holding 3 backends). Reading it
// whole costs a copy of every value, so only arrays of at most
// ArrayContentReadBytes (values as the syscall returns them, every CPU's
// for per-CPU arrays) are read this way, in batches of ArrayReadBatch
// slots. nullopt when the array is larger, or holds more non-zero slots
// than `limit`.
constexpr uint32_t ArrayReadBatch = 1024;

Expected<std::optional<core::TableContents>>
readArrayByContent(int fd, const core::TableInfo &info, uint32_t limit) {
  size_t rawSize = syscallValueSize(info.perCpu ? BPF_MAP_TYPE_PERCPU_ARRAY : BPF_MAP_TYPE_ARRAY,
                                    info.valueSize);
  if (info.keySize != sizeof(uint32_t) || size_t(info.maxEntries) * rawSize > ArrayContentReadBytes)
    return std::nullopt;
  core::TableContents contents;
  std::vector<uint32_t> keys(ArrayReadBatch);
  Bytes values(size_t(ArrayReadBatch) * rawSize);
  uint32_t batch = 0;
  bool first = true;
  for (;;) {
    uint32_t count = ArrayReadBatch;
    LIBBPF_OPTS(bpf_map_batch_opts, options);
    int result = bpf_map_lookup_batch(fd, first ? nullptr : &batch, &batch, keys.data(),
                                      values.data(), &count, &options);
    if (result != 0 && errno != ENOENT)
      return makeSystemError(errno, "map '{0}': batch read failed", info.name);
    for (uint32_t i = 0; i < count; ++i) {
      Bytes raw(values.begin() + size_t(i) * rawSize, values.begin() + size_t(i + 1) * rawSize);
      if (std::all_of(raw.begin(), raw.end(), [](uint8_t byte) { return byte == 0; }))
        continue;
      if (contents.entries.size() == limit)
        return std::nullopt; // more than any pass inlines
      contents.entries.push_back({bytesOf(keys[i]), collapse(info, raw)});
    }
    if (result != 0)
      break; // ENOENT: the last batch
    first = false;
  }
  contents.complete = true;
  contents.unlistedAreZero = true;
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
    Bytes key(info.keySize), next(info.keySize);
    const void *previous = nullptr;
    std::vector<Bytes> keys;
    while (keys.size() <= request.wholeTableLimit) {
      if (bpf_map_get_next_key(fd, previous, next.data()) != 0) {
        if (errno != ENOENT)
          return makeSystemError(errno, "map '{0}': cannot iterate", info.name);
        contents.complete = true;
        break;
      }
      keys.push_back(next);
      key = next;
      previous = key.data();
    }
    if (contents.complete)
      for (const Bytes &k : keys) {
        auto found = read(k);
        if (!found)
          return found.takeError();
        // An entry deleted between the walk and the read is simply gone.
        if (*found)
          contents.entries.push_back({k, collapse(info, value)});
      }
  }
  if (!wantWhole && request.wholeTableLimit > 0 && info.match == core::TableMatch::Index) {
    auto sparse = readArrayByContent(fd, info, request.wholeTableLimit);
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
      contents.entries.push_back({key, collapse(info, value)});
  }
  // Hash iteration order is the kernel's business; compare by key order.
  std::sort(contents.entries.begin(), contents.entries.end(),
            [](const core::TableEntry &a, const core::TableEntry &b) {
              return a.key < b.key;
            });
  return contents;
}

Expected<core::TableSnapshot> readSnapshot(const core::ReadPlan &plan,
                                           const core::TableCatalog &catalog,
                                           const std::map<std::string, int> &fds) {
  core::TableSnapshot snapshot;
  for (const auto &[name, request] : plan) {
    auto fd = fds.find(name);
    auto info = catalog.find(name);
    if (fd == fds.end() || info == catalog.end())
      return makeError("map '{0}': not a map of the program", name);
    auto contents = readTable(fd->second, info->second, request);
    if (!contents)
      return contents.takeError();
    snapshot[name] = std::move(*contents);
  }
  return snapshot;
}

Expected<Bytes> parseHexBytes(std::string_view text, const std::string &what) {
  Bytes bytes;
  std::string digits;
  size_t i = 0;
  auto flush = [&]() -> Error {
    if (digits.size() % 2)
      return makeError("{0}: '{1}' has an odd number of hex digits", what, digits);
    for (size_t d = 0; d < digits.size(); d += 2)
      bytes.push_back(std::stoi(digits.substr(d, 2), nullptr, 16));
    digits.clear();
    return Error::success();
  };
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ':') {
      if (Error err = flush())
        return err;
      ++i;
    } else if (c == '0' && i + 1 < text.size() && (text[i + 1] == 'x' || text[i + 1] == 'X') &&
               digits.empty()) {
      i += 2;
    } else if (std::isxdigit(static_cast<unsigned char>(c))) {
      digits.push_back(c);
      ++i;
    } else {
      return makeError("{0}: unexpected character '{1}' in hex bytes \"{2}\"", what,
                       std::string(1, c), std::string(text));
    }
  }
  if (Error err = flush())
    return err;
  if (bytes.empty())
    return makeError("{0}: no bytes given", what);
  return bytes;
}

Expected<Bytes> parseJsonBytes(const nlohmann::json &value, const std::string &what) {
  if (value.is_string())
    return parseHexBytes(value.get<std::string>(), what);
  if (value.is_array()) {
    std::string joined;
    for (const auto &item : value) {
      if (!item.is_string())
        return makeError("{0}: expected hex strings like \"0x0a\"", what);
      joined += item.get<std::string>() + " ";
    }
    return parseHexBytes(joined, what);
  }
  return makeError("{0}: expected a hex string or an array of hex bytes", what);
}

Expected<core::TableSnapshot> parseSnapshot(const nlohmann::json &document,
                                            const core::TableCatalog &catalog,
                                            const std::string &source) {
  if (!document.is_object() || !document.contains("maps") ||
      !document["maps"].is_object())
    return makeError("{0}: expected an object with a \"maps\" object", source);
  core::TableSnapshot snapshot;
  for (const auto &[name, entries] : document["maps"].items()) {
    auto info = catalog.find(name);
    if (info == catalog.end())
      return makeError("{0}: map '{1}' is not a map of the program", source, name);
    if (!entries.is_array())
      return makeError("{0}: map '{1}': expected an array of entries", source, name);
    core::TableContents &contents = snapshot[name];
    contents.complete = true;
    size_t index = 0;
    for (const auto &entry : entries) {
      std::string where = source + ": map '" + name + "' entry " + std::to_string(index++);
      if (!entry.is_object() || !entry.contains("key"))
        return makeError("{0}: expected {{\"key\": ..., \"value\": ...}", where);
      auto key = parseJsonBytes(entry["key"], where + " key");
      if (!key)
        return key.takeError();
      if (key->size() != info->second.keySize)
        return makeError("{0}: key has {1} bytes, the map's keys have {2}", where,
                         key->size(), info->second.keySize);
      core::TableEntry parsed{*key, std::nullopt};
      std::vector<Bytes> values;
      if (entry.contains("value")) {
        auto value = parseJsonBytes(entry["value"], where + " value");
        if (!value)
          return value.takeError();
        values.push_back(*value);
      } else if (entry.contains("values") && entry["values"].is_array()) {
        for (const auto &perCpu : entry["values"]) {
          const auto &raw = perCpu.is_object() && perCpu.contains("value")
                                ? perCpu["value"]
                                : perCpu;
          auto value = parseJsonBytes(raw, where + " per-CPU value");
          if (!value)
            return value.takeError();
          values.push_back(*value);
        }
      } else {
        return makeError("{0}: needs \"value\" (or \"values\" for per-CPU maps)", where);
      }
      for (const Bytes &value : values)
        if (value.size() != info->second.valueSize)
          return makeError("{0}: value has {1} bytes, the map's values have {2}",
                           where, value.size(), info->second.valueSize);
      if (std::all_of(values.begin(), values.end(),
                      [&](const Bytes &v) { return v == values.front(); }))
        parsed.value = values.front();
      contents.entries.push_back(std::move(parsed));
    }
  }
  return snapshot;
}

nlohmann::json snapshotToJson(const core::TableSnapshot &snapshot) {
  nlohmann::json maps = nlohmann::json::object();
  for (const auto &[name, contents] : snapshot) {
    nlohmann::json entries = nlohmann::json::array();
    for (const core::TableEntry &entry : contents.entries) {
      nlohmann::json item = {{"key", toHex(entry.key)}};
      if (entry.value)
        item["value"] = toHex(*entry.value);
      else
        item["value_varies_by_cpu"] = true;
      entries.push_back(item);
    }
    maps[name] = entries;
  }
  return {{"maps", maps}};
}

} // namespace morpheus::bpf
