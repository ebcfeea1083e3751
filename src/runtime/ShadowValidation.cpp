#include "runtime/ShadowValidation.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapIO.h"
#include "runtime/PacketSamples.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <linux/bpf.h>
#include <llvm/Support/FormatVariadic.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

namespace morpheus::runtime {
namespace {

using core::Bytes;
using Entries = std::map<Bytes, Bytes>;

// The three scratch versions: A the original, C a second original (the
// witness of nondeterminism), B the candidate.
enum Copy { Original, Witness, Candidate, Copies };

struct MapLayout {
  std::string name;
  unsigned type = 0;
  uint32_t keySize = 0, valueSize = 0, maxEntries = 0, flags = 0;
  uint32_t btfId = 0, btfKeyTypeId = 0, btfValueTypeId = 0; // if the map has BTF
};

Expected<MapLayout> layoutOf(const std::string &name, int fd) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length))
    return makeSystemError(errno, "map '{0}': cannot query", name);
  return MapLayout{name,           info.type,      info.key_size,
                   info.value_size, info.max_entries, info.map_flags,
                   info.btf_id,     info.btf_key_type_id, info.btf_value_type_id};
}

// Up to `budget` entries of a map, plus the entries under `keys` (read so a
// copy holds at least what the specialization saw).
Expected<Entries> readEntries(int fd, const MapLayout &map, uint32_t budget,
                              const std::vector<Bytes> &keys) {
  Entries entries;
  Bytes value(bpf::syscallValueSize(map.type, map.valueSize));
  auto take = [&](const Bytes &key) {
    if (bpf_map_lookup_elem(fd, key.data(), value.data()) == 0)
      entries[key] = value;
  };
  if (bpf::isArrayMap(map.type)) {
    for (uint32_t index = 0; index < std::min(budget, map.maxEntries); ++index)
      take(Bytes(reinterpret_cast<uint8_t *>(&index), reinterpret_cast<uint8_t *>(&index) + 4));
  } else {
    bpf::forEachKey(fd, map.keySize, [&](const Bytes &key) {
      take(key);
      return entries.size() < budget;
    });
  }
  for (const Bytes &key : keys)
    if (key.size() == map.keySize)
      take(key);
  return entries;
}

Error writeEntries(int fd, const MapLayout &map, const Entries &entries) {
  for (const auto &[key, value] : entries)
    if (bpf_map_update_elem(fd, key.data(), value.data(), BPF_ANY))
      return makeSystemError(errno, "map '{0}': cannot fill its scratch copy", map.name);
  return Error::success();
}

std::string hex(const Bytes &bytes) { return bpf::toHex(bytes); }

class Validator {
public:
  Validator(const bpf::ProgramSpec &spec, const std::string &entry,
            const std::map<std::string, int> &liveMaps, const core::TableSnapshot &snapshot,
            const ShadowOptions &options)
      : spec(spec), entry(entry), liveMaps(liveMaps), snapshot(snapshot), options(options) {}
  ~Validator() {
    for (const auto &fds : scratchFds)
      for (const auto &[name, fd] : fds)
        close(fd);
  }

  Expected<ShadowVerdict> run(llvm::ArrayRef<char> candidate);

private:
  Error load(llvm::ArrayRef<char> candidate);
  Error fillScratchMaps();
  std::vector<SamplePacket> samplePackets();
  std::optional<std::string> comparePacket(const PacketResult (&results)[Copies]);
  Expected<std::optional<std::string>> compareMaps();

  const bpf::ProgramSpec &spec;
  const std::string &entry;
  const std::map<std::string, int> &liveMaps;
  const core::TableSnapshot &snapshot;
  const ShadowOptions &options;
  Error createScratchMaps();

  // Plain-data maps each copy has its own of, at their scratch sizes, with
  // the keys the specialization read.
  std::vector<MapLayout> scratch;
  std::map<std::string, MapLayout> layouts; // every live map the versions share
  std::map<std::string, std::vector<Bytes>> readKeys;
  std::map<std::string, int> scratchFds[Copies]; // the candidate's fallback too
  std::optional<bpf::LoadedObject> copies[Copies];
};

// Scratch maps hold a window of the live ones, not all of them: creating
// and zeroing full-size copies of a load balancer's rings or a firewall's
// bit vectors three times per cycle would cost more than the cycle itself.
// Hash-like maps get room for the window, the keys read and what the
// sample may insert; arrays the window and every index read (so what the
// candidate inlined is there); a smaller array returns "no entry" beyond
// its end in every copy alike, and the verifier bounds-checks any index.
Error Validator::createScratchMaps() {
  for (MapLayout &map : scratch) {
    const std::vector<Bytes> &keys = readKeys[map.name];
    uint32_t size = options.entryBudget + uint32_t(keys.size()) + 4 * options.packets + 64;
    if (bpf::isArrayMap(map.type)) {
      size = options.entryBudget;
      for (const Bytes &key : keys)
        if (key.size() == 4)
          size = std::max(size, *reinterpret_cast<const uint32_t *>(key.data()) + 1);
    }
    map.maxEntries = std::min(map.maxEntries, size);
    // The live map's BTF too: values holding spin locks or timers need it.
    int btfFd = map.btfId ? bpf_btf_get_fd_by_id(map.btfId) : -1;
    LIBBPF_OPTS(bpf_map_create_opts, attributes, .btf_fd = uint32_t(std::max(btfFd, 0)),
                .btf_key_type_id = btfFd >= 0 ? map.btfKeyTypeId : 0,
                .btf_value_type_id = btfFd >= 0 ? map.btfValueTypeId : 0,
                .map_flags = map.flags);
    for (Copy copy : {Original, Witness, Candidate}) {
      int fd = bpf_map_create(bpf_map_type(map.type), nullptr, map.keySize, map.valueSize,
                              map.maxEntries, &attributes);
      if (fd < 0) {
        int err = errno;
        if (btfFd >= 0)
          close(btfFd);
        return makeSystemError(err, "map '{0}': cannot create a scratch copy", map.name);
      }
      scratchFds[copy][map.name] = fd;
    }
    if (btfFd >= 0)
      close(btfFd);
  }
  int fallback = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, bpf::FallbackMapName,
                                sizeof(uint32_t), sizeof(uint32_t), bpf::MaxPrograms, nullptr);
  if (fallback < 0)
    return makeSystemError(errno, "cannot create a scratch fallback array");
  scratchFds[Candidate][bpf::FallbackMapName] = fallback;
  return Error::success();
}

Error Validator::load(llvm::ArrayRef<char> candidate) {
  // Maps programs cannot write (devmaps, program arrays, maps of maps) and
  // the guard are shared with the live ones; plain data gets scratch copies.
  // The candidate's fallback is an empty program array: the guard holds
  // its version, so it never falls back unless an update races with the
  // validation, and then the cycle is discarded anyway.
  std::map<std::string, int> shared;
  for (const auto &[name, fd] : liveMaps) {
    if (name == bpf::FallbackMapName)
      continue;
    auto layout = layoutOf(name, fd);
    if (!layout)
      return layout.takeError();
    layouts[name] = *layout;
    if (bpf::isPlainDataMap(layout->type) && name != bpf::GuardMapName)
      scratch.push_back(*layout);
    else
      shared[name] = fd;
  }
  for (const auto &[name, contents] : snapshot) {
    std::vector<Bytes> &keys = readKeys[name];
    for (const core::TableEntry &entry : contents.entries)
      keys.push_back(entry.key);
    keys.insert(keys.end(), contents.probedKeys.begin(), contents.probedKeys.end());
  }
  if (Error err = createScratchMaps())
    return err;
  for (Copy copy : {Original, Witness, Candidate}) {
    std::map<std::string, int> maps = shared;
    maps.insert(scratchFds[copy].begin(), scratchFds[copy].end());
    auto loaded = bpf::LoadedObject::load(
        copy == Candidate ? candidate : llvm::ArrayRef<char>(spec.originalElf()),
        spec.objectName(), maps);
    if (!loaded)
      return loaded.takeError();
    copies[copy].emplace(std::move(*loaded));
  }
  return Error::success();
}

Error Validator::fillScratchMaps() {
  for (const MapLayout &map : scratch) {
    auto entries = readEntries(liveMaps.at(map.name), map, options.entryBudget, readKeys[map.name]);
    if (!entries)
      return entries.takeError();
    for (Copy copy : {Original, Witness, Candidate})
      if (Error err = writeEntries(scratchFds[copy].at(map.name), map, *entries))
        return err;
  }
  return Error::success();
}

std::vector<SamplePacket> Validator::samplePackets() {
  std::vector<KeyedTable> tables;
  std::map<uint32_t, btf *> types; // the object's maps share one BTF
  for (const auto &[name, contents] : snapshot) {
    auto found = layouts.find(name);
    if (found == layouts.end())
      continue;
    const MapLayout &layout = found->second;
    KeyedTable table{layout.type, {}, {}};
    // The key's fields from the live map's BTF, so packets carry them where
    // a lookup reads them (an LPM key starts with its prefix length, which
    // no header carries: its words are used as they are).
    if (layout.btfId && layout.type != BPF_MAP_TYPE_LPM_TRIE) {
      auto [cached, added] = types.emplace(layout.btfId, nullptr);
      if (added)
        cached->second = btf__load_from_kernel_by_id(layout.btfId);
      integerFields(cached->second, layout.btfKeyTypeId, 0, table.keyFields);
    }
    for (const core::TableEntry &entry : contents.entries)
      table.entries.emplace_back(entry.key, entry.value.value_or(Bytes()));
    for (const Bytes &key : contents.probedKeys)
      table.entries.emplace_back(key, Bytes());
    tables.push_back(std::move(table));
  }
  for (const auto &[id, loaded] : types)
    btf__free(loaded);
  Rng rng(options.seed);
  return synthesizePackets(tables, rng, options.packets);
}

// A difference between A and B that A and C agree on.
std::optional<std::string> Validator::comparePacket(const PacketResult (&r)[Copies]) {
  const PacketResult &a = r[Original], &b = r[Candidate], &c = r[Witness];
  if (a.verdict == c.verdict && a.verdict != b.verdict)
    return llvm::formatv("verdict {0}, the original's {1}", b.verdict, a.verdict).str();
  if (a.output.size() != c.output.size())
    return std::nullopt;
  if (b.output.size() != a.output.size())
    return llvm::formatv("output of {0} bytes, the original's {1}", b.output.size(),
                         a.output.size())
        .str();
  for (size_t i = 0; i < a.output.size(); ++i)
    if (a.output[i] == c.output[i] && a.output[i] != b.output[i])
      return llvm::formatv("output byte {0} is {1:x2}, the original's {2:x2}", i,
                           b.output[i], a.output[i])
          .str();
  return std::nullopt;
}

Expected<std::optional<std::string>> Validator::compareMaps() {
  for (const MapLayout &map : scratch) {
    Entries contents[Copies];
    for (Copy copy : {Original, Witness, Candidate}) {
      auto entries = readEntries(scratchFds[copy].at(map.name), map, UINT32_MAX, {});
      if (!entries)
        return entries.takeError();
      contents[copy] = std::move(*entries);
    }
    // A map the original itself does not leave the same way twice (a
    // timestamp, a random choice) cannot be compared as a whole.
    if (contents[Original] != contents[Witness])
      continue;
    if (contents[Candidate] != contents[Original]) {
      for (const auto &[key, value] : contents[Original]) {
        auto it = contents[Candidate].find(key);
        if (it == contents[Candidate].end())
          return std::optional<std::string>("map '" + map.name + "': key " + hex(key) +
                                            " missing after the sample");
        if (it->second != value)
          return std::optional<std::string>("map '" + map.name + "': key " + hex(key) +
                                            " holds " + hex(it->second) + ", the original's " +
                                            hex(value));
      }
      return std::optional<std::string>("map '" + map.name +
                                        "': holds keys the original's does not");
    }
  }
  return std::optional<std::string>();
}

Expected<ShadowVerdict> Validator::run(llvm::ArrayRef<char> candidate) {
  if (Error err = load(candidate))
    return err;
  if (Error err = fillScratchMaps())
    return err;
  ShadowVerdict verdict;
  nlohmann::json history = nlohmann::json::array();
  auto fail = [&](const std::string &difference) {
    verdict.difference = difference;
    verdict.reproducer =
        nlohmann::json{{"program", spec.path()}, {"difference", difference},
                       {"packet", verdict.packet ? nlohmann::json(*verdict.packet) : nlohmann::json()},
                       {"packets", history}}
            .dump(1);
    return verdict;
  };
  for (const SamplePacket &packet : samplePackets()) {
    PacketResult results[Copies];
    // The witness first and the original in the middle, so a clock the
    // program reads moves about as much between A and C as between A and B.
    for (Copy copy : {Witness, Original, Candidate}) {
      auto result = runPacket(copies[copy]->programFd(entry), packet);
      if (!result)
        return result.takeError();
      results[copy] = std::move(*result);
    }
    history.push_back({{"packet", hex(packet.packet)},
                       {"ifindex", packet.ifindex},
                       {"original", {{"verdict", results[Original].verdict},
                                     {"output", hex(results[Original].output)}}},
                       {"specialized", {{"verdict", results[Candidate].verdict},
                                        {"output", hex(results[Candidate].output)}}}});
    ++verdict.packets;
    if (std::optional<std::string> difference = comparePacket(results)) {
      verdict.packet = verdict.packets;
      return fail(*difference);
    }
  }
  auto maps = compareMaps();
  if (!maps)
    return maps.takeError();
  if (*maps)
    return fail("after the sample: " + **maps);
  return verdict;
}

} // namespace

Expected<ShadowVerdict> shadowValidate(const bpf::ProgramSpec &spec, const std::string &entry,
                                       llvm::ArrayRef<char> candidate,
                                       const std::map<std::string, int> &liveMaps,
                                       const core::TableSnapshot &snapshot,
                                       const ShadowOptions &options) {
  Validator validator(spec, entry, liveMaps, snapshot, options);
  return withContext(validator.run(candidate), "shadow validation of " + spec.objectName());
}

} // namespace morpheus::runtime
