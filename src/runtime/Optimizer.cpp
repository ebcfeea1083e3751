#include "runtime/Optimizer.h"

#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramLink.h"
#include "core/PhaseClock.h"
#include "core/WriteGuards.h"
#include "runtime/ShadowValidation.h"
#include "support/VerifierRejection.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/SwapByteOrder.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <ostream>

namespace morpheus::runtime {

namespace {

using Clock = std::chrono::steady_clock;

double millisecondsSince(Clock::time_point start) {
  return std::chrono::duration<double, std::milli>(Clock::now() - start).count();
}

std::string pinPath(const std::string &dir, const std::string &name) {
  llvm::SmallString<128> path(dir);
  llvm::sys::path::append(path, name);
  return path.str().str();
}

uint32_t mapIdOf(int fd) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(fd, &info, &length) ? 0 : info.id;
}

// The object of the original is built without its program arrays' static
// slots (one object for every load of it: ProgramSpec::originalElf); the
// live load writes them here as libbpf writes them at load: the listed
// slots only (the others keep what they hold), also into an array the load
// re-used.
Error writeStaticSlots(const bpf::LoadedObject &live, const bpf::ProgramSlots &slots) {
  for (const auto &[array, listed] : slots)
    for (const auto &[index, program] : listed) {
      int arrayFd = live.mapFd(array), programFd = live.programFd(program);
      if (arrayFd < 0 || programFd < 0)
        return makeError("program array '{0}': slot {1} names '{2}', which the object does "
                         "not load",
                         array, index, program);
      if (bpf_map_update_elem(arrayFd, &index, &programFd, BPF_ANY))
        return makeSystemError(errno, "program array '{0}': cannot set slot {1} to program '{2}'",
                               array, index, program);
    }
  return Error::success();
}

} // namespace

Expected<std::unique_ptr<Optimizer>> Optimizer::create(const std::string &path,
                                                       OptimizerOptions options) {
  auto guard = bpf::GuardWord::create();
  if (!guard)
    return guard.takeError();
  std::unique_ptr<Optimizer> optimizer(
      new Optimizer(std::move(options), std::move(*guard)));
  optimizer->trafficProfile = core::TrafficProfile(optimizer->options.traffic);
  if (Error err = optimizer->load(path))
    return err;
  return optimizer;
}

Optimizer::~Optimizer() {
  // The owner of the hook has swapped the original (or the owner's program)
  // back; a packet may still be inside the last version, whose tail calls
  // reach the arrays closed below.
  if (specialized || retired)
    bpf::waitForPacketsInFlight();
  specialized.reset();
  retired.reset();
  unpinAll();
  if (fallbackFd >= 0)
    close(fallbackFd);
  for (auto &[name, fd] : reusedPins)
    close(fd);
}

Error Optimizer::load(const std::string &path) {
  auto start = Clock::now();
  core::PhaseClock clock(startup);
  auto spec = bpf::ProgramSpec::load(path, options.frontend);
  if (!spec)
    return spec.takeError();
  programSpec = std::move(*spec);
  clock.append(programSpec->loadPhases());
  if (adopted()) {
    // The owner's .rodata is what its program computes with, whatever the
    // source says: when its loader rewrote it, the source is built again
    // with those bytes as the globals' initial values, so the original and
    // every version compute with them (checkFrozenSectionsAgree checks it).
    auto owners = ownerReadOnlyGlobals();
    if (!owners)
      return withContext(owners.takeError(), path);
    if (!owners->empty()) {
      bpf::FrontendOptions frontend = options.frontend;
      frontend.globalBytes = std::move(*owners);
      auto again = bpf::ProgramSpec::load(path, frontend);
      if (!again)
        return again.takeError();
      programSpec = std::move(*again);
    }
    clock.end("the owner's .rodata read (and the source built again with it)");
  }
  const core::TableCatalog &tables = programSpec->catalog();
  plan = programSpec->readPlan(options.inlineLimit);
  const std::vector<std::string> &entries = programSpec->programs();
  entry = options.program.empty() ? entries.front() : options.program;
  if (std::find(entries.begin(), entries.end(), entry) == entries.end())
    return makeError("{0}: no program named '{1}'", path, entry);

  if (!options.pinDir.empty() && !adopted()) {
    if (std::error_code ec = llvm::sys::fs::create_directories(options.pinDir))
      return makeSystemError(ec.value(), "pin directory '{0}'", options.pinDir);
    for (const auto &[name, info] : tables) {
      std::string pinned = pinPath(options.pinDir, name);
      if (::access(pinned.c_str(), F_OK) != 0)
        continue;
      int fd = bpf_obj_get(pinned.c_str());
      if (fd < 0)
        return makeSystemError(errno, "map '{0}': cannot reuse the map pinned at {1}",
                               name, pinned);
      reusedPins[name] = fd;
    }
  }

  // The original: the one load that writes its program arrays' static
  // slots (below), and that honours pins by name when it serves the live
  // data plane (a pin root given). An adopted program's original is loaded
  // on the owner's maps and writes nothing into them: no static slots, no
  // pins (libbpf neither populates nor pins a map it reuses).
  if (adopted()) {
    // Every program of ours an adopted program's arrays may hold (the
    // trampoline's, the fallback array beside the owner's program) must be
    // of the owner's kind.
    ownerLoad.expectedAttachType = options.adoption->ownerAttachType();
    ownerLoad.attachTypeOf = options.adoption->kernelProgramType();
  }
  bpf::LoadOptions live = ownerLoad;
  if (adopted()) {
    auto declared = bpf::readMapLayouts(programSpec->originalElf(),
                                        programSpec->objectName());
    if (!declared)
      return declared.takeError();
    auto ownerMaps = options.adoption->mapsFor(*declared);
    if (!ownerMaps)
      return withContext(ownerMaps.takeError(), path);
    if (Error err = checkFrozenSectionsAgree(*ownerMaps))
      return withContext(std::move(err), path);
    live.maps = std::move(*ownerMaps);
  } else {
    live.maps = reusedPins;
    if (options.pinRoot) {
      live.pinning = bpf::PinByName::Honour;
      live.pinRoot = *options.pinRoot;
    }
  }
  clock.end(adopted() ? "the owner's maps matched" : "pinned maps reused");
  auto loaded = bpf::LoadedObject::load(programSpec->originalElf(), programSpec->objectName(),
                                        live);
  if (!loaded)
    return withContext(loaded.takeError(), path);
  original.emplace(std::move(*loaded));
  if (!adopted())
    if (Error err = writeStaticSlots(*original, programSpec->staticProgramSlots()))
      return withContext(std::move(err), path);
  clock.end("load and verify the original");

  for (const std::string &program : entries) {
    auto code = original->programCode(program);
    if (!code)
      return withContext(code.takeError(), path);
    originalCode.emplace(program, std::move(*code));
  }

  auto fallback = bpf::createFallbackArray(*original, entries, entry);
  if (!fallback)
    return fallback.takeError();
  fallbackFd = fallback->fd;
  programFacts = std::move(fallback->programs);
  if (adopted()) {
    // The entry falls back to the owner's program itself.
    uint32_t slot = *programFacts.at(entry).fallbackSlot;
    int owner = options.adoption->ownerProgramFd();
    if (bpf_map_update_elem(fallbackFd, &slot, &owner, BPF_ANY))
      return makeSystemError(errno, "{0}: the owner's program cannot be the fallback of '{1}'",
                             path, entry);
  }

  // Every version shares every map with the original, except frozen data
  // sections, which each version gets fresh with identical contents.
  for (const auto &[name, fd] : original->maps())
    if (!bpf::isFrozenSection(name))
      sharedMaps[name] = fd;
  sharedMaps[bpf::GuardMapName] = guardWord.fd();
  sharedMaps[bpf::FallbackMapName] = fallbackFd;
  if (options.traffic.mode != core::ProfileMode::Off) {
    auto profile = bpf::ProfileMap::create();
    if (!profile)
      return profile.takeError();
    profileMap.emplace(std::move(*profile));
    // Shared with every version it runs, never pinned: no control plane
    // sees it. Copies (shadow validation, fuzzing) get their own: libbpf
    // creates one for every load it is not handed to.
    sharedMaps[bpf::ProfileMapName] = profileMap->fd();
    auto counts = bpf::WriteCounts::create();
    if (!counts)
      return counts.takeError();
    writeCounts.emplace(std::move(*counts));
    sharedMaps[bpf::WritesMapName] = writeCounts->fd();
  }
  clock.end("fallback array and shared maps");
  Error pinned = pinAll();
  clock.end("pins");
  loadMs = millisecondsSince(start);
  return pinned;
}

Expected<std::map<std::string, std::vector<char>>> Optimizer::ownerReadOnlyGlobals() const {
  const std::vector<char> &elf = programSpec->originalElf();
  auto declared = bpf::readMapLayouts(elf, programSpec->objectName());
  if (!declared)
    return declared.takeError();
  auto ownerMaps = options.adoption->mapsFor(*declared);
  if (!ownerMaps)
    return ownerMaps.takeError();
  auto initial = bpf::readInitialValues(elf, programSpec->objectName());
  if (!initial)
    return initial.takeError();
  auto slices = bpf::readGlobalSlices(elf, programSpec->objectName(), /*frozen=*/true);
  if (!slices)
    return slices.takeError();
  std::map<std::string, std::vector<char>> globals;
  for (const auto &[name, bytes] : *initial) {
    auto owned = ownerMaps->find(name);
    if (name.find(".rodata") == std::string::npos || owned == ownerMaps->end())
      continue;
    std::vector<char> live(bytes.size());
    uint32_t key = 0;
    if (bpf_map_lookup_elem(owned->second, &key, live.data()))
      return makeSystemError(errno, "map '{0}': cannot read the owner's bytes", name);
    if (live == bytes)
      continue;
    for (const core::GlobalSlice &slice : *slices)
      if (slice.sectionTable == name && slice.offset + slice.size <= live.size())
        globals[slice.global].assign(live.begin() + slice.offset,
                                     live.begin() + slice.offset + slice.size);
  }
  return globals;
}

// Each version gets a fresh .rodata from its own ELF: those of an adopted
// program must hold what its loader left (ownerReadOnlyGlobals built them
// so), or the versions would compute with other constants than the owner.
Error Optimizer::checkFrozenSectionsAgree(const std::map<std::string, int> &ownerMaps) const {
  auto initial = bpf::readInitialValues(programSpec->originalElf(),
                                        programSpec->objectName());
  if (!initial)
    return initial.takeError();
  for (const auto &[name, bytes] : *initial) {
    auto owned = ownerMaps.find(name);
    if (name.find(".rodata") == std::string::npos || owned == ownerMaps.end())
      continue; // .kconfig: every load fills it from this kernel alike
    std::vector<char> live(bytes.size());
    uint32_t key = 0;
    if (bpf_map_lookup_elem(owned->second, &key, live.data()))
      return makeSystemError(errno, "map '{0}': cannot read the owner's bytes", name);
    auto differs = std::mismatch(bytes.begin(), bytes.end(), live.begin());
    if (differs.first != bytes.end())
      return makeError("map '{0}': the owner's loader changed it before load (byte {1}: "
                       "built {2}, live {3}) and the bytes are no global's the BTF names; "
                       "the versions cannot compute with the owner's constants",
                       name, differs.first - bytes.begin(), int(uint8_t(*differs.first)),
                       int(uint8_t(*differs.second)));
  }
  return Error::success();
}

Error Optimizer::pinAll() {
  // An adopted program's maps are the owner's: Morpheus pins none of them.
  if (options.pinDir.empty() || adopted())
    return Error::success();
  std::vector<std::pair<std::string, int>> pins;
  for (const auto &[name, info] : programSpec->catalog())
    if (!reusedPins.count(name))
      pins.emplace_back(name, original->mapFd(name));
  pins.emplace_back(bpf::GuardMapName, guardWord.fd());
  for (const auto &[name, fd] : pins) {
    std::string path = pinPath(options.pinDir, name);
    if (name == bpf::GuardMapName)
      unlink(path.c_str()); // a stale guard from a crashed run guards nothing
    if (bpf_obj_pin(fd, path.c_str()))
      return makeSystemError(errno, "map '{0}': cannot pin at {1}", name, path);
    createdPins.push_back(path);
  }
  return Error::success();
}

std::vector<std::pair<std::string, int>> Optimizer::pinnedObjects() const {
  std::vector<std::pair<std::string, int>> pins;
  if (options.pinDir.empty() || adopted())
    return pins;
  for (const auto &[name, info] : programSpec->catalog())
    pins.emplace_back(name, original->mapFd(name));
  pins.emplace_back(bpf::GuardMapName, guardWord.fd());
  return pins;
}

std::vector<std::string> Optimizer::unpinnedObjects() const {
  std::vector<std::string> unpinned;
  for (const auto &[name, fd] : pinnedObjects()) {
    int pinned = bpf_obj_get(pinPath(options.pinDir, name).c_str());
    if (pinned < 0 || mapIdOf(pinned) != mapIdOf(fd))
      unpinned.push_back(name);
    if (pinned >= 0)
      close(pinned);
  }
  return unpinned;
}

std::vector<std::string> Optimizer::repairPins() {
  std::vector<std::string> notes;
  for (const auto &[name, fd] : pinnedObjects()) {
    std::string path = pinPath(options.pinDir, name);
    int pinned = bpf_obj_get(path.c_str());
    if (pinned >= 0) {
      bool ours = mapIdOf(pinned) == mapIdOf(fd);
      close(pinned);
      if (!ours)
        notes.push_back(llvm::formatv("map '{0}': {1} now holds another object; "
                                      "changes made through it do not reach the program",
                                      name, path)
                          .str());
      continue;
    }
    if (errno != ENOENT) {
      notes.push_back(llvm::toString(
          makeSystemError(errno, "map '{0}': cannot check its pin {1}", name, path)));
      continue;
    }
    std::error_code ec = llvm::sys::fs::create_directories(options.pinDir);
    if (ec || bpf_obj_pin(fd, path.c_str()))
      notes.push_back(llvm::toString(makeSystemError(
          ec ? ec.value() : errno, "map '{0}': its pin {1} disappeared and cannot be made again",
          name, path)));
    else
      notes.push_back(llvm::formatv("map '{0}': its pin {1} had disappeared; pinned again",
                                    name, path)
                          .str());
  }
  return notes;
}

void Optimizer::unpinAll() {
  if (pinsOutliveUs)
    return;
  for (const std::string &path : createdPins)
    unlink(path.c_str());
  createdPins.clear();
  // Maps pinned by name that this run's load made: the program that used
  // them is gone; maps pinned before it are another loader's and stay.
  if (original)
    for (const std::string &path : original->pinsMade())
      unlink(path.c_str());
  if (!options.pinDir.empty())
    rmdir(options.pinDir.c_str()); // only succeeds when nothing else is pinned
}

int Optimizer::originalFd() const { return original->programFd(entry); }

int Optimizer::activeFd() const {
  return specialized ? specialized->programFd(entry) : originalFd();
}

Expected<bpf::LoadedObject> Optimizer::loadUnguardedTwin() const {
  if (!specialized)
    return makeError("{0}: no specialization installed", entry);
  bpf::SpecializeRequest request;
  request.inlineLimit = options.inlineLimit;
  request.costModel = options.costModel;
  request.tablePasses = options.tablePasses;
  request.sharesLiveMaps = true;
  request.programs = programFacts;
  request.faults = options.faults;
  request.hotKeys = specializedHotKeys;
  request.perCpuHotKeys = specializedPerCpuHotKeys;
  request.hotTuples = specializedHotTuples;
  withhold(request, stepFor(specializedSnapshot).value_or(Withheld::Nothing),
           ", as in the installed version");
  auto object = programSpec->specialize(specializedSnapshot, request);
  if (!object)
    return object.takeError();
  auto twin = loadVersion(object->elf, specializedStages);
  if (!twin)
    return twin.takeError();
  if (Error err = fillVersionStages(*twin, specializedStages))
    return err;
  return twin;
}

Expected<bpf::LoadedObject> Optimizer::loadVersion(const std::vector<char> &elf,
                                                   const bpf::ProgramSlots &stages) const {
  bpf::LoadOptions sharing = ownerLoad;
  sharing.maps = sharedMaps;
  for (const auto &[array, slots] : stages)
    sharing.maps.erase(array); // libbpf makes the version its own, empty
  return bpf::LoadedObject::load(elf, programSpec->objectName(), sharing);
}

Error Optimizer::fillVersionStages(bpf::LoadedObject &version, const bpf::ProgramSlots &stages) {
  std::map<std::string, int> ownArrays;
  for (const auto &[array, slots] : stages)
    ownArrays[array] = version.mapFd(array);
  return version.fillProgramSlots(stages, ownArrays);
}

int Optimizer::mapFd(const std::string &name) const {
  auto it = sharedMaps.find(name);
  return it == sharedMaps.end() ? -1 : it->second;
}

const char *outcomeName(CycleOutcome outcome) {
  switch (outcome) {
  case CycleOutcome::Installed:
    return "installed";
  case CycleOutcome::Unchanged:
    return "unchanged";
  case CycleOutcome::Deferred:
    return "deferred";
  case CycleOutcome::Superseded:
    return "superseded";
  case CycleOutcome::Failed:
    return "failed";
  case CycleOutcome::Refused:
    return "refused";
  }
  return "unknown";
}

std::ostream &operator<<(std::ostream &out, CycleOutcome outcome) {
  return out << outcomeName(outcome);
}

std::string CycleReport::describe() const {
  std::string text = outcomeName(outcome);
  if (!detail.empty())
    text += ": " + detail;
  return text;
}

namespace {

const char *const TableChanged = "a table changed during the cycle";

// Every key the fast paths of each site compare, its global chain's and
// its CPUs' own (each key once): their answers are probed and, for written
// tables, their write counts read.
std::map<unsigned, std::vector<core::Bytes>>
everyHotKey(const std::map<unsigned, std::vector<core::Bytes>> &hotKeys,
            const std::map<unsigned, core::PerCpuHotKeys> &perCpuHotKeys) {
  std::map<unsigned, std::set<core::Bytes>> keys;
  for (const auto &[site, chain] : hotKeys)
    keys[site].insert(chain.begin(), chain.end());
  for (const auto &[site, cpus] : perCpuHotKeys)
    for (const auto &[cpu, chain] : cpus)
      keys[site].insert(chain.begin(), chain.end());
  std::map<unsigned, std::vector<core::Bytes>> every;
  for (const auto &[site, set] : keys)
    every[site].assign(set.begin(), set.end());
  return every;
}

// Ends the cycle: what runCycle's steps return through `report`.
void endCycle(CycleReport &report, CycleOutcome outcome, std::string detail = "") {
  report.outcome = outcome;
  report.detail = std::move(detail);
}

void endCycle(CycleReport &report, Error err) {
  endCycle(report, CycleOutcome::Failed, llvm::toString(std::move(err)));
}

} // namespace

CycleReport Optimizer::runCycle(bool force) {
  CycleReport report;
  report.cycle = ++cycles;
  if (Error err = followTraffic(report)) {
    endCycle(report, std::move(err));
    return report;
  }
  std::optional<core::TableSnapshot> snapshot = takeSnapshot(report, force);
  if (!snapshot)
    return report;
  std::optional<Candidate> candidate = specializeWithRetry(report, *snapshot);
  if (!candidate)
    return report;
  if (guardWord.version() != report.version || guardWord.changing()) {
    endCycle(report, CycleOutcome::Superseded, TableChanged);
    return report;
  }
  if (!validate(report, *candidate, *snapshot))
    return report;
  installCandidate(report, std::move(*candidate), std::move(*snapshot));
  return report;
}

Error Optimizer::followTraffic(CycleReport &report) {
  hotKeys.clear();
  perCpuHotKeys.clear();
  hotTuples.clear();
  if (!profileMap)
    return Error::success();
  trafficProfile.beginCycle();
  const core::TableCatalog &catalog = programSpec->catalog();
  for (const auto &[site, profiled] : profiledSites) {
    auto samples = profileMap->read(site, profiled.keySize);
    if (!samples)
      return samples.takeError();
    for (const bpf::ProfileMap::Samples &cpu : *samples) {
      if (cpu.keys.empty())
        continue;
      // Each kept key stands for the lookups between samples, and for the
      // samples the ring could not keep.
      double weight = double(std::max<uint32_t>(cpu.period, 1)) * double(cpu.written) /
                      double(cpu.keys.size());
      trafficProfile.add(site, cpu.cpu, cpu.keys, weight, cpu.written);
    }
    if (profiled.flowSavingNs) {
      // A flow's tuples: no lookup of their own to probe or to guard.
      core::SiteTraffic decision =
          trafficProfile.decideFlow(site, *profiled.flowSavingNs, profiled.keySize);
      if (Error err = profileMap->setPeriod(site, decision.period))
        return err;
      if (!decision.hotKeys.empty())
        hotTuples[site] = decision.hotKeys;
      report.traffic[site] = std::move(decision);
      continue;
    }
    auto invalidated = writesInvalidated(site, profiled.table);
    if (!invalidated)
      return invalidated.takeError();
    if (*invalidated)
      trafficProfile.writesInvalidated(site);
    core::SiteTraffic decision =
        trafficProfile.decide(site, catalog.at(profiled.table).match, profiled.keySize);
    if (Error err = profileMap->setPeriod(site, decision.period))
      return err;
    if (!decision.hotKeys.empty())
      hotKeys[site] = decision.hotKeys;
    if (!decision.perCpuHotKeys.empty())
      perCpuHotKeys[site] = decision.perCpuHotKeys;
    report.traffic[site] = std::move(decision);
  }
  return Error::success();
}

// Whether the data plane wrote a key the installed fast path at `site`
// answers under a write count since it was built: its per-entry guard
// fired (for churn, TrafficProfile::writesInvalidated).
Expected<bool> Optimizer::writesInvalidated(unsigned site, const std::string &table) const {
  std::map<unsigned, std::vector<core::Bytes>> installed =
      everyHotKey(specializedHotKeys, specializedPerCpuHotKeys);
  auto hot = installed.find(site);
  if (!writeCounts || hot == installed.end())
    return false;
  for (const core::Bytes &key : hot->second) {
    uint32_t bucket =
        core::writeBucket(table, key, bpf::WriteBucketBits, llvm::sys::IsLittleEndianHost);
    auto built = specializedWriteCounts.find(bucket);
    if (built == specializedWriteCounts.end())
      continue;
    auto now = writeCounts->read(bucket);
    if (!now)
      return now.takeError();
    if (*now != built->second)
      return true;
  }
  return false;
}

std::optional<core::TableSnapshot> Optimizer::takeSnapshot(CycleReport &report, bool force) {
  auto start = Clock::now();
  // Read the version before the maps: an update racing with the reads bumps
  // it, so code built from a half-updated snapshot is never installed.
  uint64_t version = guardWord.version();
  report.version = version;
  if (guardWord.changing()) {
    endCycle(report, CycleOutcome::Deferred, "a control-plane change is in progress");
    return std::nullopt;
  }
  // Before the maps: the write counts a fast path over a table the data
  // plane writes is built under (GuardTableWrites.cpp says why in this
  // order). Only once the version counting writes has run a whole period,
  // so that no packet of the original, which does not count them, is still
  // running: no fast path over written tables before that.
  cycleWriteCounts.clear();
  std::map<unsigned, std::vector<core::Bytes>> compared = everyHotKey(hotKeys, perCpuHotKeys);
  if (writeCounts && countingWritesSince && report.cycle > countingWritesSince)
    for (const auto &[site, keys] : compared)
      for (const core::Bytes &key : keys) {
        // Programs the kernel runs have the host's byte order.
        uint32_t bucket = core::writeBucket(profiledSites.at(site).table, key,
                                            bpf::WriteBucketBits, llvm::sys::IsLittleEndianHost);
        auto count = writeCounts->read(bucket);
        if (!count) {
          endCycle(report, count.takeError());
          return std::nullopt;
        }
        cycleWriteCounts[bucket] = *count;
      }
  // The hot keys' answers, looked up one by one (for an LPM trie, the
  // trie's answer to exactly that lookup).
  core::ReadPlan cyclePlan = plan;
  for (const auto &[site, keys] : compared) {
    std::vector<core::Bytes> &probe = cyclePlan[profiledSites.at(site).table].keys;
    probe.insert(probe.end(), keys.begin(), keys.end());
  }
  auto read = bpf::readSnapshot(cyclePlan, programSpec->catalog(), sharedMaps);
  if (!read) {
    endCycle(report, read.takeError());
    return std::nullopt;
  }
  // The stages each program array holds: a version gets arrays of its own,
  // with its specialized programs, for those that hold only ours.
  auto stages = stageArrays();
  if (!stages) {
    endCycle(report, stages.takeError());
    return std::nullopt;
  }
  cycleStages = std::move(*stages);
  if (adopted() && (ownerChanged(*read) || cycleStages != specializedStages) && specialized) {
    // The owner wrote what the running version answers from (a table, or a
    // stage in its program arrays), without a bump: bump now (packets run
    // the owner's code from here on), then read again and rebuild for what
    // the tables hold after the bump.
    guardWord.bump();
    version = guardWord.version();
    report.version = version;
    read = bpf::readSnapshot(cyclePlan, programSpec->catalog(), sharedMaps);
    if (!read) {
      endCycle(report, read.takeError());
      return std::nullopt;
    }
    for (const std::string &name : unstable)
      read->erase(name);
  }
  // The writable globals are polled: their writers (mmap) bypass the guard.
  // The running version checks the bytes it folded itself, so a change is
  // followed before this poll; the poll rebuilds code for the new bytes.
  auto globals = bpf::readGlobals(programSpec->globals(), sharedMaps);
  if (!globals) {
    endCycle(report, globals.takeError());
    return std::nullopt;
  }
  cycleGlobals = std::move(*globals);
  report.times.analysisMs = millisecondsSince(start);
  if (!force && specialized && version == specializedVersion && cycleStages == specializedStages &&
      programSpec->analysis().sameWhereReadOnly(*read, specializedSnapshot) &&
      hotKeys == specializedHotKeys && perCpuHotKeys == specializedPerCpuHotKeys &&
      hotTuples == specializedHotTuples &&
      cycleWriteCounts == specializedWriteCounts &&
      core::checksHold(specializedChecks, cycleGlobals)) {
    endCycle(report, CycleOutcome::Unchanged);
    return std::nullopt;
  }
  return std::move(*read);
}

// An adopted program's arrays hold the owner's programs: each counts as
// ours where it runs the same code on the same maps as our original's
// program of its name (LoadedObject::programSlots), so the stages of an
// owner that loaded what Morpheus builds from the source are specialized
// too, and any other stage stays the owner's.
Expected<bpf::ProgramSlots> Optimizer::stageArrays() const {
  return original->ownProgramSlots();
}

bool Optimizer::ownerChanged(core::TableSnapshot &read) {
  const core::TableAccessInfo &analysis = programSpec->analysis();
  auto same = [&](const std::string &name, const core::TableContents &a,
                  const core::TableContents &b) {
    return analysis.sameWhereReadOnly({{name, a}}, {{name, b}});
  };
  for (const auto &[name, contents] : read) {
    auto previous = lastPoll.find(name);
    std::vector<bool> &history = changeHistory[name];
    history.push_back(previous != lastPoll.end() && !same(name, contents, previous->second));
    if (history.size() > UnstableWindow)
      history.erase(history.begin());
    if (size_t(std::count(history.begin(), history.end(), true)) * 2 > UnstableWindow)
      unstable.insert(name);
    else
      unstable.erase(name);
  }
  lastPoll = read;
  for (const std::string &name : unstable)
    read.erase(name);
  if (read.size() != specializedSnapshot.size())
    return true;
  for (const auto &[name, built] : specializedSnapshot) {
    auto now = read.find(name);
    if (now == read.end() || !same(name, now->second, built))
      return true;
  }
  return false;
}

std::optional<Optimizer::Withheld>
Optimizer::stepFor(const core::TableSnapshot &snapshot) const {
  if (!rejection || rejection->snapshot != snapshot)
    return Withheld::Nothing;
  switch (rejection->refused) {
  case Withheld::Nothing:
    return Withheld::CompareChains;
  case Withheld::CompareChains:
    return Withheld::Regions;
  case Withheld::Regions:
    break;
  }
  return std::nullopt;
}

void Optimizer::withhold(bpf::SpecializeRequest &request, Withheld step, const std::string &why) {
  request.noCompareChains.reset();
  request.noRegions.reset();
  if (step >= Withheld::CompareChains)
    request.noCompareChains = "compare chains off" + why;
  if (step >= Withheld::Regions)
    request.noRegions = "regions off" + why;
}

// When the kernel refuses a candidate (too complex, too large, any
// verifier error), the same cycle builds it again with less, step by step
// (Withheld): without compare chains, the specialization most likely to
// multiply the verifier's work, then without regions too, whose tables
// hand the program values it checks. A step whose object is byte for byte
// the one refused is not loaded again. What was refused is remembered for
// this snapshot, so later periods start at the step the kernel took, and
// do not ask it again when it took none, until the tables change.
std::optional<Optimizer::Candidate>
Optimizer::specializeWithRetry(CycleReport &report, core::TableSnapshot &snapshot) {
  uint64_t version = report.version;
  std::optional<Withheld> step = stepFor(snapshot);
  if (!step) {
    endCycle(report, CycleOutcome::Failed,
             llvm::formatv("the kernel refused this snapshot's specializations, with and "
                           "without compare chains and regions (cycle {0}): {1}; waiting for "
                           "the tables to change",
                           rejection->cycle, rejection->reason)
                 .str());
    return std::nullopt;
  }
  bpf::SpecializeRequest request;
  request.inlineLimit = options.inlineLimit;
  request.costModel = options.costModel;
  request.tablePasses = options.tablePasses;
  request.guardVersion = version;
  request.programs = programFacts;
  request.faults = options.faults;
  request.instrument = options.traffic.mode != core::ProfileMode::Off;
  request.notProfiled = options.notProfiled;
  request.hotKeys = hotKeys;
  request.perCpuHotKeys = perCpuHotKeys;
  request.hotTuples = hotTuples;
  request.writeCounts = cycleWriteCounts;
  request.globals = cycleGlobals;
  request.compared = options.shadowPackets > 0;
  std::vector<char> refusedElf;
  for (;;) {
    if (*step != Withheld::Nothing)
      withhold(request, *step,
               llvm::formatv(": the kernel refused this snapshot's specialization with them "
                             "(cycle {0})",
                             rejection->cycle)
                   .str());
    auto start = Clock::now();
    auto object = programSpec->specialize(snapshot, request);
    report.times.codegenMs += millisecondsSince(start);
    if (!object) {
      endCycle(report, object.takeError());
      return std::nullopt;
    }
    report.log = std::move(object->log);
    std::vector<char> elf = std::move(object->elf);
    std::vector<char> comparedElf = std::move(object->comparedElf);
    if (specialized && elf == specializedElf && cycleStages == specializedStages) {
      // Byte for byte the running code, although built for this version and
      // snapshot: it depends on neither, so it stays valid for both.
      specializedVersion = version;
      specializedSnapshot = std::move(snapshot);
      specializedHotKeys = hotKeys;
      specializedPerCpuHotKeys = perCpuHotKeys;
      specializedHotTuples = hotTuples;
      specializedWriteCounts = cycleWriteCounts;
      specializedChecks = report.log.globalChecks;
      endCycle(report, CycleOutcome::Unchanged);
      return std::nullopt;
    }
    // What the kernel said when it refused this step's object.
    std::string refusal, reason;
    if (elf == refusedElf) {
      // Nothing this step leaves out was in the candidate refused.
      refusal = reason = rejection->reason;
    } else {
      start = Clock::now();
      report.times.injectionPhases.clear();
      core::PhaseClock clock(report.times.injectionPhases);
      auto attempt = loadVersion(elf, cycleStages);
      clock.end("load and verify the version");
      if (attempt) {
        if (Error err = fillVersionStages(*attempt, cycleStages)) {
          endCycle(report, std::move(err));
          return std::nullopt;
        }
        clock.end("stage arrays filled");
        return Candidate{std::move(elf), std::move(comparedElf), std::move(*attempt), start};
      }
      // Only the verifier's refusal may spare a candidate with less; any
      // other failure (a map of another layout, one the kernel cannot
      // create) would meet it just the same.
      Error failure = attempt.takeError();
      if (!failure.isA<VerifierRejection>()) {
        endCycle(report, std::move(failure));
        return std::nullopt;
      }
      llvm::handleAllErrors(std::move(failure), [&](const VerifierRejection &refused) {
        refusal = refused.message();
        reason = refused.reason();
      });
      ++report.refusedByKernel;
      refusedElf = std::move(elf);
    }
    if (*step == Withheld::Nothing)
      rejection = Rejection{snapshot, report.cycle, reason, Withheld::Nothing};
    else
      rejection->refused = *step;
    step = stepFor(snapshot);
    if (!step) {
      endCycle(report, CycleOutcome::Failed, refusal);
      return std::nullopt;
    }
  }
}

Expected<ValidationScope> Optimizer::validationScope(const CycleReport &report,
                                                     const Candidate &candidate,
                                                     const core::TableSnapshot &snapshot) const {
  ValidationScope scope;
  if (!specialized) {
    scope.whyWhole = "no version installed yet";
    return scope;
  }
  // What every program's code was built under besides its tables: the
  // stage arrays, the traffic's fast paths, the folded globals.
  if (cycleStages != specializedStages || hotKeys != specializedHotKeys ||
      perCpuHotKeys != specializedPerCpuHotKeys || hotTuples != specializedHotTuples ||
      cycleWriteCounts != specializedWriteCounts || report.log.globalChecks != specializedChecks) {
    scope.whyWhole = "the stage arrays, the traffic's fast paths or the folded globals changed";
    return scope;
  }
  // The tables whose read-only bytes changed since the installed version
  // was built (and validated). A program's specialization can only depend
  // on the tables its original code names; a changed table no program
  // names (an inner map reached through a map of maps) could be behind
  // any of them.
  const core::TableAccessInfo &analysis = programSpec->analysis();
  std::set<std::string> changed, named;
  for (const auto &[name, contents] : snapshot) {
    auto built = specializedSnapshot.find(name);
    if (built == specializedSnapshot.end() ||
        !analysis.sameWhereReadOnly({{name, contents}}, {{name, built->second}}))
      changed.insert(name);
  }
  for (const auto &[name, contents] : specializedSnapshot)
    if (!snapshot.count(name))
      changed.insert(name);
  for (const auto &[program, code] : originalCode)
    named.insert(code.maps.begin(), code.maps.end());
  for (const std::string &table : changed)
    if (!named.count(table)) {
      scope.whyWhole = "table '" + table + "' changed and no program's code names it";
      return scope;
    }
  for (const std::string &program : programSpec->programs()) {
    const bpf::LoadedObject::Code &was = originalCode.at(program);
    bool readsAChange = std::any_of(was.maps.begin(), was.maps.end(),
                                     [&](const std::string &map) { return changed.count(map); });
    bool same = false;
    if (program != entry && !was.tailCalls && !readsAChange) {
      auto now = candidate.loaded.programCode(program, report.version);
      auto installed = specialized->programCode(program, specializedVersion);
      if (!now)
        return now.takeError();
      if (!installed)
        return installed.takeError();
      same = *now == *installed;
    }
    (same ? scope.skipped : scope.validated).push_back(program);
  }
  if (scope.skipped.empty()) {
    scope.validated.clear();
    scope.whyWhole = "every program changed, tail-calls or is the entry";
  }
  return scope;
}

bool Optimizer::validate(CycleReport &report, const Candidate &candidate,
                         const core::TableSnapshot &snapshot) {
  if (!options.shadowPackets)
    return true;
  uint64_t version = report.version;
  auto validationStart = Clock::now();
  auto scope = validationScope(report, candidate, snapshot);
  if (!scope) {
    endCycle(report, scope.takeError());
    return false;
  }
  report.validation = std::move(*scope);
  ShadowOptions shadow;
  shadow.packets = options.shadowPackets;
  shadow.seed = report.cycle;
  shadow.faults = options.faults;
  if (!report.validation.validated.empty())
    shadow.programs = std::set<std::string>(report.validation.validated.begin(),
                                            report.validation.validated.end());
  auto slots = original->programSlots();
  if (!slots) {
    endCycle(report, slots.takeError());
    return false;
  }
  auto verdict = shadowValidate(*programSpec, entry, candidate.comparedElf, version,
                                LiveMaps{original->maps(), std::move(*slots)}, snapshot, shadow);
  report.times.validationMs = millisecondsSince(validationStart);
  if (verdict) {
    report.times.validationPhases = verdict->phases;
    report.validation.nondeterministic = verdict->nondeterministic;
  }
  if (guardWord.version() != version || guardWord.changing()) {
    // The maps moved under the copies: a difference would mean nothing.
    llvm::consumeError(verdict.takeError());
    endCycle(report, CycleOutcome::Superseded, TableChanged);
    return false;
  }
  if (!verdict) {
    endCycle(report, verdict.takeError());
    return false;
  }
  if (!verdict->difference.empty()) {
    report.reproducer = std::move(verdict->reproducer);
    report.differenceKey = verdict->difference;
    std::string where =
        verdict->packet ? llvm::formatv("packet {0}: ", *verdict->packet).str() : "";
    endCycle(report, CycleOutcome::Refused, "shadow validation: " + where + verdict->difference);
    return false;
  }
  return true;
}

void Optimizer::installCandidate(CycleReport &report, Candidate candidate,
                                 core::TableSnapshot snapshot) {
  int fd = candidate.loaded.programFd(entry);
  // Sites the new version records start sampling before it runs (a site
  // no running version records writes nothing).
  if (profileMap)
    for (const auto &[site, profiled] : report.log.profiled)
      if (!profiledSites.count(site))
        if (Error err = profileMap->setPeriod(site, trafficProfile.initialPeriod()))
          return endCycle(report, std::move(err));
  auto installStart = Clock::now();
  if (install)
    if (Error err = install(fd))
      return endCycle(report, std::move(err));
  report.times.injectionPhases.push_back({"install", millisecondsSince(installStart)});
  report.times.injectionMs = millisecondsSince(candidate.loadStart) - report.times.validationMs;
  retired = std::move(specialized);
  specialized.emplace(std::move(candidate.loaded));
  specializedStages = cycleStages;
  specializedVersion = report.version;
  specializedSnapshot = std::move(snapshot);
  specializedElf = std::move(candidate.elf);
  specializedHotKeys = hotKeys;
  specializedPerCpuHotKeys = perCpuHotKeys;
  specializedHotTuples = hotTuples;
  specializedWriteCounts = cycleWriteCounts;
  specializedChecks = report.log.globalChecks;
  if (profileMap)
    profiledSites = report.log.profiled;
  if (writeCounts && !countingWritesSince)
    countingWritesSince = report.cycle;
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length) == 0)
    report.instructions = info.xlated_prog_len / 8;
  report.verifiedInstructions = bpf::verifiedInstructions(fd);
  endCycle(report, CycleOutcome::Installed);
}

} // namespace morpheus::runtime
