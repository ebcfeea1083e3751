#include "runtime/VersionComparison.h"

#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "core/PhaseClock.h"

#include <linux/bpf.h>
#include <llvm/Support/FormatVariadic.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <future>

namespace morpheus::runtime {

using core::Bytes;

namespace {

// The witness last: a clock left unreplayed never moves between the
// original and the specialized version without moving as far between the
// original and the witness.
constexpr Version RunOrder[] = {Version::Original, Version::Specialized, Version::Witness};

// What FaultInjection::unequalRandomStreams mixes into the Specialized
// version's seed.
constexpr uint64_t UnequalStream = 0x5eed5eed5eed5eedull;
constexpr Version Versions[] = {Version::Original, Version::Witness, Version::Specialized};

size_t at(Version version) { return size_t(version); }

} // namespace

const char *versionName(Version version) {
  switch (version) {
  case Version::Original:
    return "original";
  case Version::Witness:
    return "witness";
  case Version::Specialized:
    return "specialized";
  }
  return "unknown";
}

Expected<std::unique_ptr<VersionComparison>>
VersionComparison::create(const bpf::ProgramSpec &spec, const std::string &entry,
                          const LiveMaps &live, const Options &options) {
  std::vector<core::BuildPhase> phases;
  core::PhaseClock clock(phases);
  auto guard = bpf::GuardWord::create();
  if (!guard)
    return guard.takeError();
  // The scratch guard holds the candidate's version from the start.
  static_assert(sizeof(bpf::GuardState) == 2 * sizeof(uint64_t));
  uint64_t state[2] = {options.guardVersion, 0};
  uint32_t zero = 0;
  if (Error err = bpf::MapAccess(guard->fd(), bpf::GuardMapName).put(zero, state))
    return withContext(std::move(err), "cannot set the scratch guard");
  std::unique_ptr<VersionComparison> comparison(
      new VersionComparison(spec, entry, std::move(*guard)));
  comparison->programs = options.programs;
  comparison->faults = options.faults;
  clock.end("the scratch guard");

  const std::vector<char> &original = spec.comparedOriginalElf();
  auto declared = bpf::readMapLayouts(original, spec.objectName());
  if (!declared)
    return declared.takeError();
  auto image = MapImage::read(live, *declared, options.sizing);
  if (!image)
    return image.takeError();
  comparison->image = std::move(*image);
  clock.end("map image (live entries read)");
  // The three sets at once: filling a map of maps waits for an RCU grace
  // period (milliseconds), and the three waits then overlap.
  std::array<std::future<Expected<std::unique_ptr<ScratchMaps>>>, VersionCount> made;
  for (Version version : Versions)
    made[at(version)] = std::async(std::launch::async, [&] {
      return ScratchMaps::create(comparison->image, !options.faults.randomHashSeeds);
    });
  Error failed = Error::success();
  for (Version version : Versions) {
    auto copies = made[at(version)].get();
    if (!copies)
      failed = llvm::joinErrors(
          std::move(failed),
          withContext(copies.takeError(), versionName(version) + std::string(" copy")));
    else
      comparison->copies[at(version)] = std::move(*copies);
  }
  if (failed)
    return failed;
  clock.end("scratch maps created and filled");
  if (spec.replaysHelpers()) {
    // One replay state per version, shared by every load of it (the
    // Specialized version and the original it falls back to).
    auto layout = declared->find(bpf::ReplayMapName);
    if (layout == declared->end())
      return makeError("{0}: the compared original has no map '{1}'", spec.path(),
                       bpf::ReplayMapName);
    bpf::MapLayout state;
    state.name = bpf::ReplayMapName;
    state.type = BPF_MAP_TYPE_ARRAY;
    state.keySize = layout->second.keySize;
    state.valueSize = layout->second.valueSize;
    state.maxEntries = 1;
    state.flags = layout->second.flags;
    for (Version version : Versions) {
      auto created = bpf::createMap(state);
      if (!created)
        return withContext(created.takeError(), "the " + std::string(versionName(version)) +
                                                    " copy's replay state");
      comparison->replayMaps[at(version)] = std::move(*created);
    }
  }
  auto loadOriginal = [&](Version on) -> Expected<bpf::LoadedObject> {
    bpf::LoadOptions load;
    load.maps = comparison->copies[at(on)]->byName();
    if (comparison->replayMaps[at(on)].valid())
      load.maps[bpf::ReplayMapName] = comparison->replayMaps[at(on)].get();
    load.windowedCopies = true;
    load.programs = options.programs;
    auto loaded = bpf::LoadedObject::load(original, spec.objectName(), load);
    if (!loaded)
      return withContext(loaded.takeError(), versionName(on) + std::string(" copy"));
    if (Error err = comparison->copies[at(on)]->bindProgramSlots(*loaded))
      return err;
    return loaded;
  };
  for (Version version : {Version::Original, Version::Witness}) {
    auto loaded = loadOriginal(version);
    if (!loaded)
      return loaded.takeError();
    comparison->objects[at(version)].emplace(std::move(*loaded));
    clock.end(std::string("load and verify the ") + versionName(version) + " copy");
  }
  // The specialized version's fallback: the original on the same copies,
  // whose program arrays point at its programs, as the live arrays point
  // at the live original's. Only a check that moves the scratch guard
  // needs it; otherwise it is not loaded (a fourth verification per
  // cycle), and the fallback array stays empty: the guard never moves, so
  // the fallback is never taken.
  if (options.fallback) {
    auto fallbackOriginal = loadOriginal(Version::Specialized);
    if (!fallbackOriginal)
      return fallbackOriginal.takeError();
    comparison->fallbackOriginal.emplace(std::move(*fallbackOriginal));
    clock.end("load and verify the original the specialized copy falls back to");
    auto fallback =
        bpf::createFallbackArray(*comparison->fallbackOriginal, spec.programs(), entry);
    if (!fallback)
      return fallback.takeError();
    comparison->fallbackArray = FileDescriptor(fallback->fd);
    comparison->facts = std::move(fallback->programs);
  } else {
    bpf::MapLayout fallback;
    fallback.name = bpf::FallbackMapName;
    fallback.type = BPF_MAP_TYPE_PROG_ARRAY;
    fallback.keySize = fallback.valueSize = sizeof(uint32_t);
    fallback.maxEntries = bpf::MaxPrograms;
    auto created = bpf::createMap(fallback, {.named = true});
    if (!created)
      return withContext(created.takeError(), "a scratch fallback array");
    comparison->fallbackArray = std::move(*created);
    // The array stays empty (the scratch guard never moves), but the
    // specialized copy is built as the live one would be: each program at
    // its slot, at what verifying the original copy cost.
    const std::vector<std::string> &programs = spec.programs();
    for (uint32_t slot = 0; slot < programs.size(); ++slot) {
      bpf::ProgramFacts &facts = comparison->facts[programs[slot]];
      facts.fallbackSlot = slot;
      int fd = comparison->objects[at(Version::Original)]->programFd(programs[slot]);
      if (fd >= 0)
        facts.verifiedInstructions = bpf::verifiedInstructions(fd);
    }
  }
  comparison->specializedMaps = comparison->copies[at(Version::Specialized)]->byName();
  comparison->specializedMaps[bpf::GuardMapName] = comparison->scratchGuard.fd();
  comparison->specializedMaps[bpf::FallbackMapName] = comparison->fallbackArray.get();
  if (comparison->replayMaps[at(Version::Specialized)].valid())
    comparison->specializedMaps[bpf::ReplayMapName] =
        comparison->replayMaps[at(Version::Specialized)].get();
  auto profile = bpf::ProfileMap::create();
  if (!profile)
    return profile.takeError();
  for (unsigned site = 0; site < bpf::ProfileSites; ++site)
    if (Error err = profile->setPeriod(site, 1))
      return err;
  comparison->scratchProfile.emplace(std::move(*profile));
  comparison->specializedMaps[bpf::ProfileMapName] = comparison->scratchProfile->fd();
  clock.end("the specialized copy's fallback and profile maps");
  comparison->phases = std::move(phases);
  return comparison;
}

VersionComparison::~VersionComparison() {
  for (auto &object : objects)
    object.reset();
  fallbackOriginal.reset();
}

Error VersionComparison::loadSpecialized(llvm::ArrayRef<char> elf) {
  objects[at(Version::Specialized)].reset();
  bpf::LoadOptions load;
  load.maps = specializedMaps;
  load.windowedCopies = true;
  load.programs = programs;
  // Its program arrays are its own (libbpf creates them empty), filled
  // below with its programs: the copies' arrays hold the fallback
  // original's, which a live version never tail-calls either.
  std::set<std::string> stageArrays;
  for (const MapImage::Map &map : image.maps())
    if (map.kind == CopyKind::Programs && map.named && load.maps.erase(map.name))
      stageArrays.insert(map.name);
  auto loaded = bpf::LoadedObject::load(elf, spec.objectName(), load);
  if (!loaded)
    return withContext(loaded.takeError(), "specialized copy");
  std::map<std::string, int> ownArrays;
  for (const std::string &array : stageArrays)
    ownArrays[array] = loaded->mapFd(array);
  if (Error err = loaded->fillProgramSlots(image.programSlots(), ownArrays))
    return withContext(std::move(err), "specialized copy");
  objects[at(Version::Specialized)].emplace(std::move(*loaded));
  return Error::success();
}

const std::map<std::string, int> &VersionComparison::maps(Version version) const {
  return copies[at(version)]->byName();
}

int VersionComparison::programFd(Version version) const {
  const std::optional<bpf::LoadedObject> &object = objects[at(version)];
  return object ? object->programFd(entry) : -1;
}

Error VersionComparison::write(const MapContents &rows) {
  return writeRows(rows, /*skipWhereFull=*/false).takeError();
}

Expected<MapContents> VersionComparison::writeWhereRoom(const MapContents &rows) {
  return writeRows(rows, /*skipWhereFull=*/true);
}

Expected<MapContents> VersionComparison::writeRows(const MapContents &rows, bool skipWhereFull) {
  MapContents written;
  for (const auto &[name, entries] : rows) {
    std::vector<bpf::MapAccess> copies;
    for (Version version : Versions) {
      auto fd = maps(version).find(name);
      if (fd == maps(version).end())
        return makeError("map '{0}': not a map of the program", name);
      copies.emplace_back(fd->second, name);
    }
    auto layout = bpf::layoutOf(copies.front().fd(), name);
    if (!layout)
      return layout.takeError();
    size_t row = rowSize(*layout);
    size_t stride = bpf::isPerCpuMap(layout->type) ? (layout->valueSize + 7) / 8 * 8 : row;
    for (const auto &[key, value] : entries) {
      Bytes full(row, 0);
      for (size_t offset = 0; offset < row; offset += stride)
        std::copy(value.begin(), value.begin() + std::min(value.size(), stride),
                  full.begin() + offset);
      // The original's copy first: where it has no room, no copy gets the
      // row (a copy refusing what the original took is an error).
      if (skipWhereFull) {
        auto room = copies.front().updateWhereRoom(key, full);
        if (!room)
          return room.takeError();
        if (!*room)
          continue;
      }
      for (size_t copy = skipWhereFull ? 1 : 0; copy < copies.size(); ++copy)
        if (Error err = copies[copy].update(key, full))
          return std::move(err);
      written[name].emplace_back(key, value);
    }
  }
  return written;
}

Error VersionComparison::restore(const std::map<std::string, std::vector<Bytes>> &touched) {
  for (auto &copy : copies)
    if (Error err = copy->restore(touched))
      return err;
  return Error::success();
}

bool VersionComparison::written(const std::string &map) const {
  // The analysis speaks of the object's own tables; internal data
  // sections and inner maps may always be written.
  return !spec.catalog().count(map) || !spec.analysis().isReadOnly(map);
}

Error VersionComparison::observeMaps(MapCheck check,
                                     const std::map<std::string, std::vector<Bytes>> &keys,
                                     std::array<Observation, VersionCount> &observed) const {
  static const std::vector<Bytes> none;
  for (size_t index = 0; index < image.maps().size(); ++index) {
    const MapImage::Map &map = image.maps()[index];
    bool observable = map.kind == CopyKind::Data || map.kind == CopyKind::Ring ||
                      map.kind == CopyKind::Sequence;
    // Ring records belong to the packet that wrote them: always drained.
    bool wanted = check == MapCheck::All ||
                  (check == MapCheck::Written && written(map.name)) ||
                  (check != MapCheck::None && map.kind != CopyKind::Data) ||
                  map.kind == CopyKind::Ring;
    if (!observable || !wanted)
      continue;
    auto found = keys.find(map.name);
    for (Version version : Versions) {
      auto contents = copies[at(version)]->dump(index, found == keys.end() ? none : found->second);
      if (!contents)
        return contents.takeError();
      observed[at(version)].maps[map.name] = std::move(*contents);
    }
  }
  return Error::success();
}

bpf::MapAccess VersionComparison::replayState(Version version) const {
  return {replayMaps[at(version)].get(), bpf::ReplayMapName};
}

Error VersionComparison::startReplay(Version version, const Step &step) {
  if (!replayMaps[at(version)].valid())
    return Error::success();
  morpheus_replay_state state = carried;
  state.seed = step.randomSeed;
  if (version == Version::Specialized && faults.unequalRandomStreams)
    state.seed ^= UnequalStream;
  state.draws = 0;
  return withContext(replayState(version).put(uint32_t(0), state),
                     versionName(version) + std::string(" copy"));
}

Error VersionComparison::keepLatched(Version version) {
  if (!replayMaps[at(version)].valid() || faults.unlatchedClocks)
    return Error::success();
  auto read = replayState(version).find<morpheus_replay_state>(uint32_t(0));
  if (!read)
    return withContext(read.takeError(), versionName(version) + std::string(" copy"));
  if (!*read)
    return makeError("map '{0}': the {1} copy's replay state holds no entry",
                     bpf::ReplayMapName, versionName(version));
  const morpheus_replay_state &state = **read;
  for (unsigned clock = 0; clock < MORPHEUS_CLOCKS; ++clock)
    if ((state.latched & ~carried.latched) & (1ull << clock)) {
      carried.clock[clock] = state.clock[clock];
      carried.latched |= 1ull << clock;
    }
  return Error::success();
}

Expected<StepOutcome>
VersionComparison::run(const Step &step, MapCheck check,
                       const std::map<std::string, std::vector<Bytes>> &keys) {
  StepOutcome outcome;
  carried = {}; // every step reads its clocks afresh
  for (Version version : RunOrder) {
    int fd = programFd(version);
    if (fd < 0)
      return makeError("no {0} version loaded to compare", versionName(version));
    if (Error err = startReplay(version, step))
      return err;
    auto result = runPacket(fd, spec.programType(entry), step);
    if (!result)
      return withContext(result.takeError(), versionName(version) + std::string(" version"));
    static_cast<PacketResult &>(outcome.observed[at(version)]) = std::move(*result);
    if (Error err = keepLatched(version))
      return err;
  }
  if (Error err = observeMaps(check, keys, outcome.observed))
    return err;
  compareObservations(outcome, maskCounts);
  return outcome;
}

Expected<StepOutcome>
VersionComparison::compareMaps(MapCheck check,
                               const std::map<std::string, std::vector<Bytes>> &keys) {
  StepOutcome outcome; // no packet: verdicts, outputs and contexts agree
  if (Error err = observeMaps(check, keys, outcome.observed))
    return err;
  compareObservations(outcome, maskCounts);
  return outcome;
}

namespace {

// Where the witness disagreed with the original in one step, as 8-byte
// words: nondeterministic values are numbers (a timestamp, a random
// draw), and a carry into a byte that did not change in this pair may
// change in another.
class StepMask {
public:
  explicit StepMask(MaskCounts &counts) : counts(counts) {}
  // The words where `x` and `y` differ; whether they did.
  std::vector<bool> learn(const Bytes &x, const Bytes &y) {
    std::vector<bool> mask(std::max(x.size(), y.size()) + 8, false);
    for (size_t i = 0; i < std::min(x.size(), y.size()); ++i)
      if (x[i] != y[i])
        for (size_t j = i / 8 * 8; j < i / 8 * 8 + 8; ++j)
          if (!mask[j]) {
            mask[j] = true;
            ++counts.bytes;
            any = true;
          }
    return mask;
  }
  void verdict() {
    ++counts.verdicts;
    any = true;
  }
  void keySet() {
    ++counts.keySets;
    any = true;
  }
  bool nondeterministic() const { return any; }

private:
  MaskCounts &counts;
  bool any = false;
};

} // namespace

// a: the original, c: the witness, b: the specialized version.
void compareObservations(StepOutcome &outcome, MaskCounts &counts) {
  const Observation &a = outcome.observed[at(Version::Original)],
                    &c = outcome.observed[at(Version::Witness)],
                    &b = outcome.observed[at(Version::Specialized)];
  StepMask witness(counts);
  auto finish = [&](std::optional<std::string> difference) {
    outcome.difference = std::move(difference);
    outcome.nondeterministic = witness.nondeterministic();
    if (outcome.nondeterministic)
      ++counts.steps;
  };
  // Bytes of one result, compared where the witness agreed: an output or a
  // context of another length than the witness's is not compared.
  auto differs = [&](const Bytes &x, const Bytes &y, const Bytes &z) -> std::optional<size_t> {
    if (x.size() != z.size()) {
      witness.keySet();
      return std::nullopt;
    }
    std::vector<bool> mask = witness.learn(x, z);
    if (x.size() != y.size())
      return std::min(x.size(), y.size());
    for (size_t i = 0; i < x.size(); ++i)
      if (x[i] != y[i] && !mask[i])
        return i;
    return std::nullopt;
  };
  if (a.verdict != c.verdict) {
    witness.verdict(); // the outputs then need not line up either
  } else {
    if (a.verdict != b.verdict)
      return finish(
          llvm::formatv("verdict: original {0}, specialized {1}", a.verdict, b.verdict).str());
    if (auto where = differs(a.output, b.output, c.output))
      return finish(llvm::formatv("output packet differs at byte {0}: original {1}, "
                                  "specialized {2}",
                                  *where, toHex(a.output), toHex(b.output))
                        .str());
    if (auto where = differs(a.context, b.context, c.context))
      return finish(llvm::formatv("context after the run differs at byte {0}: original {1}, "
                                  "specialized {2}",
                                  *where, toHex(a.context), toHex(b.context))
                        .str());
  }
  for (const auto &[name, da] : a.maps) {
    const MapDump &dc = c.maps.at(name), &db = b.maps.at(name);
    if (!da.flat.empty()) {
      size_t row = da.row;
      auto slot = [&](const Bytes &flat, size_t index) {
        return Bytes(flat.begin() + index * row, flat.begin() + (index + 1) * row);
      };
      if (da.flat == db.flat && da.flat == dc.flat)
        continue;
      for (size_t index = 0; index < da.flat.size() / row; ++index)
        if (auto where = differs(slot(da.flat, index), slot(db.flat, index), slot(dc.flat, index)))
          return finish(llvm::formatv("map '{0}' index {1}: value differs at byte {2}: "
                                      "original {3}, specialized {4}",
                                      name, index, *where, toHex(slot(da.flat, index)),
                                      toHex(slot(db.flat, index)))
                            .str());
      continue;
    }
    if (!da.sequence.empty() || !dc.sequence.empty() || !db.sequence.empty()) {
      if (da.sequence.size() != dc.sequence.size()) {
        witness.keySet();
        continue;
      }
      if (db.sequence.size() != da.sequence.size())
        return finish(llvm::formatv("map '{0}': {1} elements or records after the original, "
                                    "{2} after the specialized version",
                                    name, da.sequence.size(), db.sequence.size())
                          .str());
      for (size_t i = 0; i < da.sequence.size(); ++i)
        if (auto where = differs(da.sequence[i], db.sequence[i], dc.sequence[i]))
          return finish(llvm::formatv("map '{0}' element {1}: differs at byte {2}: original "
                                      "{3}, specialized {4}",
                                      name, i, *where, toHex(da.sequence[i]),
                                      toHex(db.sequence[i]))
                            .str());
      continue;
    }
    const auto &ea = da.entries, &ec = dc.entries, &eb = db.entries;
    bool sameKeys = ea.size() == ec.size() &&
                    std::equal(ea.begin(), ea.end(), ec.begin(),
                               [](auto &x, auto &y) { return x.first == y.first; });
    if (!sameKeys)
      witness.keySet();
    for (const auto &[key, value] : ea) {
      auto inWitness = ec.find(key);
      if (inWitness == ec.end())
        continue;
      auto inSpecialized = eb.find(key);
      if (inSpecialized == eb.end())
        return finish(llvm::formatv("map '{0}': key {1} present after the original, absent "
                                    "after the specialized version",
                                    name, toHex(key))
                          .str());
      if (auto where = differs(value, inSpecialized->second, inWitness->second))
        return finish(llvm::formatv("map '{0}' key {1}: value differs at byte {2}: original "
                                    "{3}, specialized {4}",
                                    name, toHex(key), *where, toHex(value),
                                    toHex(inSpecialized->second))
                          .str());
    }
    if (!sameKeys)
      continue;
    for (const auto &[key, value] : eb)
      if (!ea.count(key))
        return finish(llvm::formatv("map '{0}': key {1} absent after the original, present "
                                    "after the specialized version",
                                    name, toHex(key))
                          .str());
  }
  finish(std::nullopt);
}

nlohmann::json Reproducer::toJson() const {
  nlohmann::json document;
  document["check"] = check;
  document["program"] = program;
  document["entry"] = entry;
  document["guard_version"] = guardVersion;
  if (seed)
    document["seed"] = *seed;
  document["difference"] = difference;
  nlohmann::json mapsJson = nlohmann::json::object();
  for (const auto &[name, rows] : maps) {
    nlohmann::json list = nlohmann::json::array();
    for (const auto &[key, value] : rows)
      list.push_back({{"key", toHex(key)}, {"value", toHex(value)}});
    mapsJson[name] = list;
  }
  document["maps"] = mapsJson;
  nlohmann::json list = nlohmann::json::array();
  for (const Packet &packet : packets) {
    nlohmann::json context = nlohmann::json::object();
    for (const auto &[field, value] : packet.step.context)
      context[field] = value;
    nlohmann::json item = {{"packet", toHex(packet.step.packet)},
                           {"context", context},
                           {"random_seed", packet.step.randomSeed},
                           {"guard_bumped", packet.step.guardBumped}};
    for (Version version : Versions)
      item[versionName(version)] = {{"verdict", packet.results[at(version)].verdict},
                                    {"output", toHex(packet.results[at(version)].output)},
                                    {"context", toHex(packet.results[at(version)].context)}};
    list.push_back(item);
  }
  document["packets"] = list;
  document["packet"] = differingPacket ? nlohmann::json(*differingPacket) : nlohmann::json();
  if (shrunk)
    document["shrunk"] = *shrunk;
  return document;
}

} // namespace morpheus::runtime
