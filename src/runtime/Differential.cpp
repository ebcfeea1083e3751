#include "runtime/Differential.h"

#include "backend/bpf/MapIO.h"
#include "runtime/Optimizer.h"
#include "runtime/PacketSamples.h"

#include "packet/Packet.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <nlohmann/json.hpp>
#include <sched.h>

#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
#include <optional>
#include <random>
#include <set>

namespace morpheus::runtime {

namespace {

using core::Bytes;
using Clock = std::chrono::steady_clock;
// A map's contents; values are all CPUs' rows, each padded to 8 bytes, for
// per-CPU maps. Whole arrays are kept flat (slot i at i * row size): as
// key -> value maps they cost more to build and compare than to read.
struct Dump {
  Bytes flat;
  std::map<Bytes, Bytes> entries;
};

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// Arrays larger than this are neither dumped nor reset whole on every packet
// (a load balancer's lookup ring has millions of slots): only the indexes a
// map state wrote are compared and restored.
constexpr uint32_t WholeArrayLimit = 1 << 17;

enum class Copy { Original, Witness, Specialized }; // A, C, B of the design
constexpr int Copies = 3;

void putInteger(Bytes &bytes, Field field, uint64_t value) {
  for (uint32_t i = 0; i < field.width && field.offset + i < bytes.size(); ++i)
    bytes[field.offset + i] = uint8_t(value >> (8 * i)); // BPF here is little-endian
}

Bytes randomBytes(Rng &rng, size_t size, const std::vector<Field> &fields) {
  Bytes bytes(size, 0);
  if (rng() % 2)
    for (uint8_t &byte : bytes)
      byte = uint8_t(rng());
  for (Field field : fields)
    putInteger(bytes, field, biased(rng, field.width));
  return bytes;
}

struct MapView {
  std::string name;
  unsigned type = 0;
  uint32_t keySize = 0, valueSize = 0, maxEntries = 0;
  int fds[Copies] = {-1, -1, -1};
  bool populate = false; // a map of the program the fuzzer fills
  bool writtenByProgram = true; // not proved read-only by the analysis
  std::vector<Field> keyFields, valueFields;
  Dump pristine; // contents right after loading (internal maps' initial data)

  int fd(Copy copy) const { return fds[int(copy)]; }
  uint32_t rowSize() const { return uint32_t(bpf::syscallValueSize(type, valueSize)); }
  bool sparse() const { return bpf::isArrayMap(type) && maxEntries > WholeArrayLimit; }
};

// One map state: per map, the entries written (values as one CPU's row).
using MapState = std::map<std::string, std::vector<std::pair<Bytes, Bytes>>>;

struct Step : SamplePacket {
  bool guardBumped = false; // run after the specialized version was invalidated
};

struct RunOutcome : PacketResult {
  std::map<std::string, Dump> maps;
};

std::string hex(const Bytes &bytes) { return bpf::toHex(bytes); }

const std::string SpecializationFailed = "specialization failed: ";

bool isSpecializationFailure(const std::string &difference) {
  return difference.rfind(SpecializationFailed, 0) == 0;
}

Bytes indexKey(uint32_t index) {
  Bytes key(4);
  std::memcpy(key.data(), &index, 4);
  return key;
}

class Fuzzer {
public:
  Fuzzer(const std::string &path, const FuzzOptions &options)
      : path(path), options(options), rng(options.seed) {}
  Expected<FuzzReport> run();

private:
  Error setUp();
  MapState generateState();
  std::vector<Step> generatePackets(const MapState &state);
  Error installState(const MapState &state);
  Error resetMap(const MapView &map, Copy copy);
  Expected<Dump> dump(const MapView &map, Copy copy, const MapState &state);
  Error dumpAll(Copy copy, const MapState &state, bool everyMap, RunOutcome &outcome);
  void learnMask(std::vector<bool> &mask, const Bytes &x, const Bytes &y);
  // Masks what differs between two outcomes: for differences that replaying
  // the same case does not reproduce.
  void learnFrom(const RunOutcome &a, const RunOutcome &b);
  Expected<bool> reproducible(const MapState &state, const std::vector<Step> &steps);
  std::optional<std::string> compare(const RunOutcome &a, const RunOutcome &c,
                                     const RunOutcome &b);
  // Installs `state`, specializes and runs `steps` until the first
  // difference, to which `steps` is then cut.
  Expected<std::optional<std::string>> replay(const MapState &state,
                                              std::vector<Step> &steps);
  Expected<nlohmann::json> reproduce(MapState state, std::vector<Step> steps,
                                     std::string difference);
  int programFd(Copy copy) const {
    return copy == Copy::Specialized ? optimizer->activeFd()
           : copy == Copy::Original  ? original->programFd(optimizer->entryName())
                                     : witness->programFd(optimizer->entryName());
  }

  std::string path;
  FuzzOptions options;
  Rng rng;
  std::unique_ptr<Optimizer> optimizer; // B: maps, guard, fallback, specialized code
  std::optional<bpf::LoadedObject> original, witness; // A and C
  std::vector<MapView> maps;
  FuzzReport report;
  // Sticky masks learned from A vs C: output byte offsets, per map the
  // value byte offsets, and maps whose key sets are nondeterministic.
  std::vector<bool> outputMask;
  std::map<std::string, std::vector<bool>> valueMasks;
  std::set<std::string> keySetMasked;
  RunOutcome lastOriginal, lastSpecialized;
  MapState lastState; // what installState wrote last, to undo it
};

Error Fuzzer::setUp() {
  OptimizerOptions optimizerOptions;
  optimizerOptions.frontend = options.frontend;
  optimizerOptions.program = options.program;
  optimizerOptions.inlineLimit = options.inlineLimit;
  optimizerOptions.faults = options.faults;
  // The fuzzer compares the versions itself, on states of its own making;
  // the optimizer refusing a wrong candidate first would hide it.
  optimizerOptions.shadowPackets = 0;
  auto created = Optimizer::create(path, optimizerOptions);
  if (!created)
    return created.takeError();
  optimizer = std::move(*created);
  const bpf::ProgramSpec &spec = optimizer->spec();
  for (std::optional<bpf::LoadedObject> *copy : {&original, &witness}) {
    auto loaded = bpf::LoadedObject::load(spec.originalElf(), spec.objectName(), {});
    if (!loaded)
      return withContext(loaded.takeError(), path);
    copy->emplace(std::move(*loaded));
  }
  const btf *types = bpf_object__btf(original->object());
  for (const auto &[name, fd] : original->maps()) {
    // Read-only data is never written and each version has its own copy.
    if (name.find(".rodata") != std::string::npos ||
        name.find(".kconfig") != std::string::npos)
      continue;
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(fd, &info, &length))
      return makeSystemError(errno, "map '{0}': cannot query", name);
    if (!bpf::isPlainDataMap(info.type))
      continue;
    MapView map;
    map.name = name;
    map.type = info.type;
    map.keySize = info.key_size;
    map.valueSize = info.value_size;
    map.maxEntries = info.max_entries;
    map.fds[int(Copy::Original)] = fd;
    map.fds[int(Copy::Witness)] = witness->mapFd(name);
    map.fds[int(Copy::Specialized)] = optimizer->mapFd(name);
    map.populate = spec.catalog().count(name);
    map.writtenByProgram = !map.populate || !spec.analysis().isReadOnly(name);
    const bpf_map *object = bpf_object__find_map_by_name(original->object(), name.c_str());
    if (object && map.type != BPF_MAP_TYPE_LPM_TRIE)
      integerFields(types, bpf_map__btf_key_type_id(object), 0, map.keyFields);
    if (object)
      integerFields(types, bpf_map__btf_value_type_id(object), 0, map.valueFields);
    if (!map.sparse()) {
      auto contents = dump(map, Copy::Original, {});
      if (!contents)
        return withContext(contents.takeError(), "map '" + name + "'");
      map.pristine = std::move(*contents);
    }
    maps.push_back(std::move(map));
  }
  return Error::success();
}

MapState Fuzzer::generateState() {
  MapState state;
  bool fromConfig = !options.configured.empty() && rng() % 2;
  report.configuredStates += fromConfig;
  for (const MapView &map : maps) {
    if (!map.populate)
      continue;
    auto configured = options.configured.find(map.name);
    if (fromConfig && configured != options.configured.end()) {
      std::vector<std::pair<Bytes, Bytes>> pool = configured->second;
      std::shuffle(pool.begin(), pool.end(), rng);
      pool.resize(std::min<size_t>(pool.size(), 4 * options.maxEntries));
      for (auto &[key, value] : pool)
        if (rng() % 4 == 0)
          value = randomBytes(rng, map.valueSize, map.valueFields);
      state[map.name] = std::move(pool);
      continue;
    }
    uint32_t count = rng() % (std::min(options.maxEntries, map.maxEntries) + 1);
    auto &entries = state[map.name];
    for (uint32_t i = 0; i < count; ++i) {
      Bytes key;
      if (bpf::isArrayMap(map.type)) {
        uint32_t small = std::min<uint32_t>(map.maxEntries, 8);
        uint32_t index = rng() % 3 == 0 ? uint32_t(rng() % map.maxEntries)
                         : rng() % 5 == 0 ? map.maxEntries - 1
                                          : uint32_t(rng() % small);
        key = indexKey(index);
      } else if (map.type == BPF_MAP_TYPE_LPM_TRIE) {
        uint32_t maxPrefix = (map.keySize - 4) * 8;
        std::vector<uint32_t> usual = {0, 8, 16, 24, 32, maxPrefix};
        uint32_t prefix = rng() % 2 ? usual[rng() % usual.size()] : rng() % (maxPrefix + 1);
        key = randomBytes(rng, map.keySize, {});
        std::memcpy(key.data(), &prefix, 4);
        key.resize(map.keySize);
        if (prefix > maxPrefix)
          std::memcpy(key.data(), &maxPrefix, 4);
      } else {
        key = randomBytes(rng, map.keySize, map.keyFields);
      }
      entries.emplace_back(std::move(key), randomBytes(rng, map.valueSize, map.valueFields));
    }
  }
  return state;
}

std::vector<Step> Fuzzer::generatePackets(const MapState &state) {
  std::vector<KeyedTable> tables;
  for (const auto &[name, entries] : state) {
    const MapView &map = *std::find_if(maps.begin(), maps.end(),
                                       [&](const MapView &m) { return m.name == name; });
    tables.push_back({map.type, map.keyFields, entries});
  }
  std::vector<Step> steps;
  for (SamplePacket &sample : synthesizePackets(tables, rng, options.packetsPerState))
    steps.push_back(Step{std::move(sample)});
  return steps;
}

Expected<Dump> Fuzzer::dump(const MapView &map, Copy copy, const MapState &state) {
  int fd = map.fd(copy);
  Dump contents;
  Bytes value(map.rowSize());
  if (map.sparse()) {
    auto written = state.find(map.name);
    if (written != state.end())
      for (const auto &[key, row] : written->second)
        if (bpf_map_lookup_elem(fd, key.data(), value.data()) == 0)
          contents.entries[key] = value;
    return contents;
  }
  if (bpf::isArrayMap(map.type)) {
    // One syscall per batch instead of two per slot.
    const uint32_t batch = 4096;
    std::vector<uint32_t> keys(batch);
    Bytes values(size_t(batch) * value.size());
    contents.flat.assign(size_t(map.maxEntries) * value.size(), 0);
    uint32_t position = 0;
    bool first = true;
    for (;;) {
      uint32_t count = batch, next = 0;
      int err = bpf_map_lookup_batch(fd, first ? nullptr : &position, &next,
                                     keys.data(), values.data(), &count, nullptr);
      int saved = errno;
      for (uint32_t i = 0; i < count && keys[i] < map.maxEntries; ++i)
        std::memcpy(contents.flat.data() + size_t(keys[i]) * value.size(),
                    values.data() + size_t(i) * value.size(), value.size());
      if (err) {
        if (saved == ENOENT)
          break;
        return makeSystemError(saved, "map '{0}': batch lookup", map.name);
      }
      position = next;
      first = false;
    }
    return contents;
  }
  bpf::forEachKey(fd, map.keySize, [&](const Bytes &key) {
    if (bpf_map_lookup_elem(fd, key.data(), value.data()) == 0)
      contents.entries[key] = value;
    return true;
  });
  return contents;
}

Error Fuzzer::resetMap(const MapView &map, Copy copy) {
  int fd = map.fd(copy);
  if (bpf::isArrayMap(map.type)) {
    auto current = dump(map, copy, lastState);
    if (!current)
      return current.takeError();
    size_t row = map.rowSize();
    Bytes zero(row, 0);
    auto restore = [&](uint32_t index, const uint8_t *value) -> Error {
      const uint8_t *wanted = map.pristine.flat.empty()
                                  ? zero.data()
                                  : map.pristine.flat.data() + size_t(index) * row;
      if (std::memcmp(value, wanted, row) &&
          bpf_map_update_elem(fd, &index, wanted, BPF_ANY))
        return makeSystemError(errno, "map '{0}': cannot reset", map.name);
      return Error::success();
    };
    for (const auto &[key, value] : current->entries)
      if (Error err = restore(*reinterpret_cast<const uint32_t *>(key.data()), value.data()))
        return err;
    if (current->flat != map.pristine.flat)
      for (uint32_t index = 0; index < map.maxEntries; ++index)
        if (Error err = restore(index, current->flat.data() + size_t(index) * row))
          return err;
    return Error::success();
  }
  // Deleting while iterating would restart the walk anyway.
  Bytes key(map.keySize);
  while (bpf_map_get_next_key(fd, nullptr, key.data()) == 0)
    if (bpf_map_delete_elem(fd, key.data()))
      return makeSystemError(errno, "map '{0}': cannot clear", map.name);
  return Error::success();
}

Error Fuzzer::installState(const MapState &state) {
  for (const MapView &map : maps)
    for (Copy copy : {Copy::Original, Copy::Witness, Copy::Specialized}) {
      if (Error err = resetMap(map, copy))
        return err;
      auto entries = state.find(map.name);
      if (entries == state.end())
        continue;
      for (const auto &[key, row] : entries->second) {
        Bytes value(map.rowSize(), 0);
        size_t stride = bpf::isPerCpuMap(map.type) ? (map.valueSize + 7) / 8 * 8 : value.size();
        for (size_t at = 0; at < value.size(); at += stride)
          std::copy(row.begin(), row.end(), value.begin() + at);
        if (bpf_map_update_elem(map.fd(copy), key.data(), value.data(), BPF_ANY))
          return makeSystemError(errno, "map '{0}': cannot write key {1}", map.name,
                                 hex(key));
      }
    }
  lastState = state;
  return Error::success();
}

Error Fuzzer::dumpAll(Copy copy, const MapState &state, bool everyMap,
                      RunOutcome &outcome) {
  for (const MapView &map : maps) {
    if (!everyMap && !map.writtenByProgram)
      continue;
    auto contents = dump(map, copy, state);
    if (!contents)
      return contents.takeError();
    outcome.maps[map.name] = std::move(*contents);
  }
  return Error::success();
}

// a: the original, c: the witness, b: the specialized version.
std::optional<std::string> Fuzzer::compare(const RunOutcome &a, const RunOutcome &c,
                                           const RunOutcome &b) {
  auto differs = [](const std::vector<bool> &mask, const Bytes &x,
                    const Bytes &y) -> std::optional<size_t> {
    if (x.size() != y.size())
      return std::min(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != y[i] && (i >= mask.size() || !mask[i]))
        return i;
    return std::nullopt;
  };
  if (a.verdict != c.verdict) {
    ++report.maskedVerdicts;
  } else {
    if (a.verdict != b.verdict)
      return llvm::formatv("verdict: original {0}, specialized {1}", a.verdict, b.verdict)
          .str();
    if (a.output.size() == c.output.size())
      learnMask(outputMask, a.output, c.output);
    if (auto at = differs(outputMask, a.output, b.output))
      return llvm::formatv("output packet differs at byte {0}: original {1}, "
                           "specialized {2}",
                           *at, hex(a.output), hex(b.output))
          .str();
  }
  for (const MapView &map : maps) {
    const std::string &name = map.name;
    if (!a.maps.count(name))
      continue;
    const Dump &da = a.maps.at(name), &dc = c.maps.at(name), &db = b.maps.at(name);
    std::vector<bool> &mask = valueMasks[name];
    if (!da.flat.empty()) {
      size_t row = map.rowSize();
      auto slot = [&](const Bytes &flat, size_t index) {
        return Bytes(flat.begin() + index * row, flat.begin() + (index + 1) * row);
      };
      if (da.flat != dc.flat)
        for (size_t index = 0; index < map.maxEntries; ++index)
          learnMask(mask, slot(da.flat, index), slot(dc.flat, index));
      if (da.flat != db.flat)
        for (size_t index = 0; index < map.maxEntries; ++index)
          if (auto at = differs(mask, slot(da.flat, index), slot(db.flat, index)))
            return llvm::formatv("map '{0}' index {1}: value differs at byte {2}: "
                                 "original {3}, specialized {4}",
                                 name, index, *at, hex(slot(da.flat, index)),
                                 hex(slot(db.flat, index)))
                .str();
      continue;
    }
    const auto &ea = da.entries, &ec = dc.entries, &eb = db.entries;
    bool sameKeys = ea.size() == ec.size() &&
                    std::equal(ea.begin(), ea.end(), ec.begin(),
                               [](auto &x, auto &y) { return x.first == y.first; });
    if (!sameKeys && keySetMasked.insert(name).second)
      ++report.maskedKeySets;
    for (const auto &[key, value] : ea) {
      auto inWitness = ec.find(key);
      if (inWitness == ec.end())
        continue;
      learnMask(mask, value, inWitness->second);
      auto inSpecialized = eb.find(key);
      if (inSpecialized == eb.end())
        return llvm::formatv("map '{0}': key {1} present after the original, "
                             "absent after the specialized version",
                             name, hex(key))
            .str();
      if (auto at = differs(mask, value, inSpecialized->second))
        return llvm::formatv("map '{0}' key {1}: value differs at byte {2}: "
                             "original {3}, specialized {4}",
                             name, hex(key), *at, hex(value), hex(inSpecialized->second))
            .str();
    }
    if (keySetMasked.count(name))
      continue;
    for (const auto &[key, value] : eb)
      if (!ea.count(key))
        return llvm::formatv("map '{0}': key {1} absent after the original, "
                             "present after the specialized version",
                             name, hex(key))
            .str();
  }
  return std::nullopt;
}

// A byte that differs masks its whole aligned 8-byte word: nondeterministic
// values are numbers (timestamps, random draws), and a carry into a byte
// that did not change between these two runs may change in the next pair.
void Fuzzer::learnMask(std::vector<bool> &mask, const Bytes &x, const Bytes &y) {
  mask.resize(std::max({mask.size(), x.size(), y.size()}) + 8, false);
  for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
    if (x[i] != y[i])
      for (size_t j = i / 8 * 8; j < i / 8 * 8 + 8; ++j)
        if (!mask[j]) {
          mask[j] = true;
          ++report.maskedBytes;
        }
}

void Fuzzer::learnFrom(const RunOutcome &a, const RunOutcome &b) {
  if (a.output.size() == b.output.size())
    learnMask(outputMask, a.output, b.output);
  for (const MapView &map : maps) {
    auto x = a.maps.find(map.name), y = b.maps.find(map.name);
    if (x == a.maps.end() || y == b.maps.end())
      continue;
    std::vector<bool> &mask = valueMasks[map.name];
    size_t row = map.rowSize();
    if (!x->second.flat.empty() && x->second.flat != y->second.flat)
      for (size_t at = 0; at + row <= x->second.flat.size(); at += row)
        learnMask(mask, Bytes(x->second.flat.begin() + at, x->second.flat.begin() + at + row),
                  Bytes(y->second.flat.begin() + at, y->second.flat.begin() + at + row));
    for (const auto &[key, value] : x->second.entries) {
      auto other = y->second.entries.find(key);
      if (other != y->second.entries.end())
        learnMask(mask, value, other->second);
    }
  }
}

Expected<std::optional<std::string>> Fuzzer::replay(const MapState &state,
                                                    std::vector<Step> &steps) {
  if (Error err = installState(state))
    return err;
  // A fresh version per state: the code built for the previous state must
  // not pass for this one, and every cycle compiles anew.
  optimizer->guard().bump();
  CycleReport cycle = optimizer->runCycle(/*force=*/true);
  // Unchanged: the code built is byte for byte the running one, which then
  // does not depend on the version and stays valid (Optimizer::runCycle).
  bool specialized = cycle.installed() || (cycle.outcome == CycleOutcome::Unchanged &&
                                           optimizer->installedVersion() == cycle.version);
  if (!specialized) {
    // The running program would stay generic: safe, but Morpheus produced
    // code it should not have (or could not handle this state), a finding.
    ++report.cases;
    ++report.differed;
    lastOriginal = lastSpecialized = RunOutcome();
    steps.resize(1);
    return std::optional<std::string>(SpecializationFailed + cycle.describe());
  }
  bool bumped = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].guardBumped && !bumped) {
      optimizer->guard().bump();
      bumped = true;
    }
    // The three runs go back to back, the witness first and the original in
    // the middle, so a clock the program reads moves about as much between
    // original and witness as between original and specialized.
    RunOutcome outcomes[Copies];
    for (Copy copy : {Copy::Witness, Copy::Original, Copy::Specialized}) {
      auto outcome = runPacket(programFd(copy), steps[i]);
      if (!outcome)
        return outcome.takeError();
      static_cast<PacketResult &>(outcomes[int(copy)]) = std::move(*outcome);
    }
    // Maps the analysis found read-only by the program are compared after
    // the last packet only: reading big tables after every packet would
    // leave little time for packets, and a wrong "read-only" still shows.
    bool last = i + 1 == steps.size();
    for (Copy copy : {Copy::Original, Copy::Witness, Copy::Specialized})
      if (Error err = dumpAll(copy, state, last, outcomes[int(copy)]))
        return err;
    ++report.cases;
    if (auto difference = compare(outcomes[0], outcomes[1], outcomes[2])) {
      ++report.differed;
      lastOriginal = std::move(outcomes[0]);
      lastSpecialized = std::move(outcomes[2]);
      steps.resize(i + 1);
      return std::optional<std::string>(
          llvm::formatv("{0}{1}", *difference,
                        steps[i].guardBumped ? " (after a guard bump)" : "")
              .str());
    }
  }
  return std::optional<std::string>();
}

// Whether replaying a failing case fails again, twice, at the same step.
// Replays are not counted as cases.
Expected<bool> Fuzzer::reproducible(const MapState &state, const std::vector<Step> &steps) {
  uint64_t cases = report.cases, differed = report.differed;
  bool again = true;
  for (int attempt = 0; attempt < 2 && again; ++attempt) {
    std::vector<Step> run = steps;
    auto result = replay(state, run);
    if (!result)
      return result.takeError();
    again = *result && run.size() == steps.size();
  }
  report.cases = cases;
  report.differed = differed;
  return again;
}

// Shrinks a failing (state, steps) pair: first to the failing packet alone
// when that still fails, then by dropping map entries one at a time. Replays
// are not counted as cases.
Expected<nlohmann::json> Fuzzer::reproduce(MapState state, std::vector<Step> steps,
                                           std::string difference) {
  FuzzReport saved = report;
  RunOutcome original = lastOriginal, specialized = lastSpecialized;
  auto start = Clock::now();
  auto fails = [&](const MapState &candidate,
                   const std::vector<Step> &sequence) -> Expected<bool> {
    std::vector<Step> run = sequence;
    auto result = replay(candidate, run);
    if (!result)
      return result.takeError();
    // The same kind of failure, at the last step, or the shrink would wander
    // off to another one.
    if (*result && run.size() == sequence.size() &&
        isSpecializationFailure(**result) == isSpecializationFailure(difference)) {
      difference = **result;
      original = lastOriginal;
      specialized = lastSpecialized;
      return true;
    }
    return false;
  };
  std::vector<Step> alone = {steps.back()};
  auto single = fails(state, alone);
  if (!single)
    return single.takeError();
  bool shrunk = *single;
  if (shrunk) {
    steps = alone;
    std::vector<std::string> names;
    for (const auto &[name, entries] : state)
      names.push_back(name);
    for (const std::string &name : names)
      for (size_t i = 0;
           i < state[name].size() && secondsSince(start) < options.shrinkSeconds;) {
        MapState candidate = state;
        candidate[name].erase(candidate[name].begin() + i);
        auto still = fails(candidate, steps);
        if (!still)
          return still.takeError();
        if (*still)
          state = std::move(candidate);
        else
          ++i;
      }
  }
  report.cases = saved.cases;
  report.differed = saved.differed;

  nlohmann::json document;
  document["program"] = path;
  document["entry"] = optimizer->entryName();
  document["seed"] = options.seed;
  nlohmann::json mapsJson = nlohmann::json::object();
  for (const auto &[name, entries] : state) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto &[key, value] : entries)
      list.push_back({{"key", hex(key)}, {"value", hex(value)}});
    mapsJson[name] = list;
  }
  document["maps"] = mapsJson;
  nlohmann::json preceding = nlohmann::json::array();
  for (size_t i = 0; i + 1 < steps.size(); ++i)
    preceding.push_back({{"packet", hex(steps[i].packet)},
                         {"ingress_ifindex", steps[i].ifindex},
                         {"guard_bumped", steps[i].guardBumped}});
  document["preceding_packets"] = preceding;
  document["packet"] = hex(steps.back().packet);
  document["ingress_ifindex"] = steps.back().ifindex;
  document["guard_bumped"] = steps.back().guardBumped;
  document["comparison"] = difference;
  auto result = [](const RunOutcome &outcome) {
    return nlohmann::json{{"verdict", outcome.verdict}, {"output", hex(outcome.output)}};
  };
  document["original"] = result(original);
  document["specialized"] = result(specialized);
  document["shrunk"] = shrunk;
  return document;
}

Expected<FuzzReport> Fuzzer::run() {
  auto start = Clock::now();
  if (Error err = setUp())
    return err;
  while (secondsSince(start) < options.seconds) {
    MapState state = generateState();
    std::vector<Step> steps = generatePackets(state);
    size_t count = steps.size();
    for (size_t i = 0; i < count; ++i) {
      Step again = steps[i];
      again.guardBumped = true;
      steps.push_back(std::move(again));
    }
    auto difference = replay(state, steps);
    if (!difference)
      return difference.takeError();
    ++report.states;
    if (*difference && !isSpecializationFailure(**difference)) {
      RunOutcome original = lastOriginal, specialized = lastSpecialized;
      auto again = reproducible(state, steps);
      if (!again)
        return again.takeError();
      if (!*again) {
        // A coarse clock ticking between two of the three runs, say: the
        // witness saw no difference, but the same case does not fail twice.
        learnFrom(original, specialized);
        --report.differed;
        continue;
      }
    }
    if (*difference) {
      auto document = reproduce(state, steps, **difference);
      if (!document)
        return document.takeError();
      report.reproducer = document->dump(2);
      break;
    }
  }
  report.seconds = secondsSince(start);
  return report;
}

// Per-CPU maps must see every run on the same CPU, or the three copies'
// per-CPU values would drift apart for no reason.
class PinnedToOneCpu {
public:
  PinnedToOneCpu() {
    pinned = sched_getaffinity(0, sizeof(previous), &previous) == 0;
    if (!pinned)
      return;
    int cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~PinnedToOneCpu() {
    if (pinned)
      sched_setaffinity(0, sizeof(previous), &previous);
  }
  bool ok() const { return pinned; }

private:
  cpu_set_t previous;
  bool pinned = false;
};

} // namespace

Expected<FuzzReport> fuzzProgram(const std::string &path, const FuzzOptions &options) {
  PinnedToOneCpu pin;
  if (!pin.ok())
    return makeSystemError(errno, "cannot pin the fuzzer to one CPU");
  Fuzzer fuzzer(path, options);
  auto report = fuzzer.run();
  if (!report)
    return withContext(report.takeError(), path);
  if (!report->reproducer.empty() && !options.reproducerPath.empty()) {
    std::ofstream out(options.reproducerPath, std::ios::trunc);
    out << report->reproducer << "\n";
    if (!out)
      return makeSystemError(errno, "{0}: cannot write the reproducer",
                             options.reproducerPath);
  }
  return report;
}

} // namespace morpheus::runtime
