#include "runtime/Optimizer.h"

#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramLink.h"
#include "core/PhaseClock.h"
#include "core/WriteGuards.h"
#include "runtime/ShadowValidation.h"
#include "support/VerifierRejection.h"

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

// What an adopted owner's frozen data section `name` holds (its one value,
// `size` bytes).
Expected<std::vector<char>> ownerBytes(int fd, const std::string &name, size_t size) {
  std::vector<char> bytes(size);
  uint32_t key = 0;
  auto found = bpf::MapAccess(fd, name).lookup(
      byteView(key), llvm::MutableArrayRef<uint8_t>(reinterpret_cast<uint8_t *>(bytes.data()),
                                                    bytes.size()));
  if (!found)
    return withContext(found.takeError(), "the owner's bytes");
  if (!*found)
    return makeError("map '{0}': the owner's section holds no value", name);
  return bytes;
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
      if (Error err = bpf::MapAccess(arrayFd, array).put(index, programFd))
        return withContext(std::move(err), "program '" + program + "' in its slot");
    }
  return Error::success();
}

} // namespace

namespace {

// The guard a run starts with. The one an earlier run left pinned is kept
// (versions only grow, so no code built for an older version becomes valid
// again): the version that run left serving checks it, and goes on
// serving correctly while this run starts (Optimizer::canServeOn). One
// left in the middle of a change (a writer killed between its two bumps)
// would hold every compilation off: a fresh one replaces it.
Expected<bpf::GuardWord> startingGuard(const OptimizerOptions &options) {
  if (options.pinDir.empty() || options.adoption)
    return bpf::GuardWord::create();
  std::string pin = bpf::PinDirectory(options.pinDir).pathOf(bpf::GuardMapName);
  if (access(pin.c_str(), F_OK) != 0)
    return bpf::GuardWord::create();
  auto earlier = bpf::GuardWord::open(pin);
  if (earlier && !earlier->changing())
    return earlier;
  if (!earlier)
    llvm::consumeError(earlier.takeError());
  return bpf::GuardWord::create();
}

} // namespace

Expected<std::unique_ptr<Optimizer>> Optimizer::create(const std::string &path,
                                                       OptimizerOptions options) {
  auto guard = startingGuard(options);
  if (!guard)
    return guard.takeError();
  std::unique_ptr<Optimizer> optimizer(
      new Optimizer(std::move(options), std::move(*guard)));
  if (Error err = optimizer->load(path))
    return err;
  return optimizer;
}

Optimizer::~Optimizer() {
  // The owner of the hook has swapped the original (or the owner's program)
  // back; a packet may still be inside the last version, whose tail calls
  // reach the arrays closed below.
  if (installed || !retired.empty() || !kept.empty())
    bpf::waitForPacketsInFlight();
  installed.reset();
  retired.clear();
  kept.clear();
  unpinAll();
  if (fallbackFd >= 0)
    close(fallbackFd);
  for (auto &[name, fd] : reusedPins)
    close(fd);
}

Error Optimizer::load(const std::string &path) {
  auto start = Clock::now();
  core::PhaseClock clock(startup);
  auto spec = bpf::ProgramSpec::load(path, options.frontend, options.keptGeneric);
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
      auto again = bpf::ProgramSpec::load(path, frontend, options.keptGeneric);
      if (!again)
        return again.takeError();
      programSpec = std::move(*again);
    }
    clock.end("the owner's .rodata read (and the source built again with it)");
  }
  const core::TableCatalog &tables = programSpec->catalog();
  plan = programSpec->readPlan(options.inlineLimit);
  const std::vector<std::string> &entries = programSpec->programs();
  auto runnable = programSpec->runnableEntry(options.program);
  if (!runnable)
    return withContext(runnable.takeError(), path);
  entry = std::move(*runnable);

  if (!options.pinDir.empty() && !adopted()) {
    pins.emplace(options.pinDir);
    if (Error err = pins->create())
      return err;
    for (const auto &[name, info] : tables) {
      auto reused = pins->openMap(name);
      if (!reused)
        return reused.takeError();
      if (*reused)
        reusedPins[name] = **reused;
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
      live.pinRoot = programSpec->pinsByNameUnder(*options.pinRoot);
      // libbpf makes only the last directory of a pin path; iproute2 makes
      // its tc/globals for any object it loads.
      if (live.pinRoot != *options.pinRoot)
        if (std::error_code error = llvm::sys::fs::create_directories(live.pinRoot))
          return makeSystemError(error.value(), "{0}: cannot create the pin directory {1}",
                                 path, live.pinRoot);
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
    if (program != entry && !code->tailCalls() && !programSpec->registersCallbacks(program))
      restampable.insert(program);
    originalCode.emplace(program, std::move(*code));
  }

  auto fallback = bpf::createFallbackArray(*original, entries, entry);
  if (!fallback)
    return fallback.takeError();
  fallbackFd = fallback->fd;
  programFacts = std::move(fallback->programs);
  if (adopted() && !options.adoption->ownerIsExtension()) {
    // The entry falls back to the owner's program itself (an extension in
    // a dispatcher slot sits in no program array: to the original, built
    // on the owner's maps with its constants).
    uint32_t slot = *programFacts.at(entry).fallbackSlot;
    int owner = options.adoption->ownerProgramFd();
    if (Error err = bpf::MapAccess(fallbackFd, bpf::FallbackMapName).put(slot, owner))
      return withContext(std::move(err),
                         path + ": the owner's program cannot be the fallback of '" + entry + "'");
  }

  // Every version shares every map with the original, except frozen data
  // sections, which each version gets fresh with identical contents.
  for (const auto &[name, fd] : original->maps())
    if (!bpf::isFrozenSection(name))
      sharedMaps[name] = fd;
  sharedMaps[bpf::GuardMapName] = guardWord.fd();
  sharedMaps[bpf::FallbackMapName] = fallbackFd;
  if (options.traffic.mode != core::ProfileMode::Off) {
    auto maps = bpf::TrafficMaps::create();
    if (!maps)
      return maps.takeError();
    trafficMaps = std::move(*maps);
    // Shared with every version it runs, never pinned: no control plane
    // sees them. Copies (shadow validation, fuzzing) get their own: libbpf
    // creates one for every load it is not handed to.
    sharedMaps[bpf::ProfileMapName] = trafficMaps->profileFd();
    sharedMaps[bpf::WritesMapName] = trafficMaps->writesFd();
  }
  core::CycleBackend &steps = *this;
  cycle.emplace(steps, options.traffic, trafficMaps.get());
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
    auto live = ownerBytes(owned->second, name, bytes.size());
    if (!live)
      return live.takeError();
    if (*live == bytes)
      continue;
    for (const core::GlobalSlice &slice : *slices)
      if (slice.sectionTable == name && slice.offset + slice.size <= live->size())
        globals[slice.global].assign(live->begin() + slice.offset,
                                     live->begin() + slice.offset + slice.size);
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
    auto live = ownerBytes(owned->second, name, bytes.size());
    if (!live)
      return live.takeError();
    auto differs = std::mismatch(bytes.begin(), bytes.end(), live->begin());
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
  if (!pins)
    return Error::success();
  for (const auto &[name, info] : programSpec->catalog())
    if (!reusedPins.count(name))
      if (Error err = pins->pin(name, original->mapFd(name)))
        return err;
  // The section maps of the writable globals too, under libbpf's names,
  // so that `morpheus map dump DIR` and `explain --pin-dir` read the
  // globals a cycle reads. Never reused by a later run (libbpf fills a
  // section's map when it creates it): each run pins its own.
  std::set<std::string> sections;
  for (const core::GlobalSlice &slice : programSpec->globals())
    sections.insert(slice.sectionTable);
  for (const std::string &section : sections)
    if (int fd = original->mapFd(section); fd >= 0)
      if (Error err = pins->pin(section, fd, /*replace=*/true))
        return err;
  // A guard left mid-change by a crashed run guards nothing (startingGuard).
  if (Error err = pins->pin(bpf::GuardMapName, guardWord.fd(), /*replace=*/true))
    return err;
  // The fallback array too: the kernel empties a program array when its
  // last user reference goes, and a version left serving after this
  // process (kill -9, a handover) falls back through it when the guard is
  // bumped. Pinned, it keeps the original reachable, and the next run
  // finds it (canServeOn).
  return pins->pin(bpf::FallbackMapName, fallbackFd, /*replace=*/true);
}

bool Optimizer::canServeOn(uint32_t programId, int earlierFallback) const {
  if (installed)
    return false;
  auto running = bpf::liveProgramById(programId);
  if (!running) {
    llvm::consumeError(running.takeError());
    return false;
  }
  uint32_t guardId = bpf::objectId(guardWord.fd());
  uint32_t fallbackId = bpf::objectId(earlierFallback);
  std::set<uint32_t> live;
  for (const auto &[name, fd] : sharedMaps)
    if (name != bpf::FallbackMapName)
      live.insert(bpf::objectId(fd));
  bool checksOurGuard = false, fallsBackThere = false;
  for (uint32_t id : running->mapIds) {
    checksOurGuard |= id == guardId;
    if (id == fallbackId)
      fallsBackThere = true;
    else if (bpf::mapTypeById(id) == BPF_MAP_TYPE_PROG_ARRAY && !live.count(id))
      return false;
  }
  // A version whose roots all fall back inside the program uses no
  // fallback array. An adopted program's checks a guard of its run's own,
  // which its run kept serving because its answers depend on no guard.
  return (checksOurGuard || adopted()) &&
         (!fallsBackThere || bpf::sameProgramsInSlots(earlierFallback, fallbackFd));
}

std::vector<std::pair<std::string, int>> Optimizer::pinnedObjects() const {
  std::vector<std::pair<std::string, int>> objects;
  if (!pins)
    return objects;
  for (const auto &[name, info] : programSpec->catalog())
    objects.emplace_back(name, original->mapFd(name));
  objects.emplace_back(bpf::GuardMapName, guardWord.fd());
  return objects;
}

std::vector<std::string> Optimizer::unpinnedObjects() const {
  return pins ? pins->unpinned(pinnedObjects()) : std::vector<std::string>();
}

std::vector<std::string> Optimizer::repairPins() {
  return pins ? pins->repair(pinnedObjects()) : std::vector<std::string>();
}

void Optimizer::unpinAll() {
  if (pinsOutliveUs)
    return;
  // Maps pinned by name that this run's load made: the program that used
  // them is gone; maps pinned before it are another loader's and stay.
  if (original)
    for (const std::string &path : original->pinsMade())
      unlink(path.c_str());
  if (pins)
    pins->removeMade();
}

int Optimizer::originalFd() const { return original->programFd(entry); }

Error Optimizer::serveOriginal() {
  if (!installed)
    return Error::success();
  if (install)
    if (Error err = install(originalFd()))
      return err;
  replaceInstalled();
  return Error::success();
}

void Optimizer::replaceInstalled() {
  retired.clear();
  if (!installed)
    return;
  if (keeping && installedBuild) {
    // One kept version per settings: an older one retires.
    auto older = std::find_if(kept.begin(), kept.end(), [&](const Kept &entry) {
      return entry.build.settings == installedBuild->settings;
    });
    if (older != kept.end()) {
      retired.push_back(std::move(older->version.object));
      kept.erase(older);
    }
    kept.push_back(Kept{std::move(*installed), std::move(*installedBuild)});
  } else {
    // Closed one install later, as every replaced version: packets may
    // still run it.
    retired.push_back(std::move(installed->object));
  }
  installed.reset();
  installedBuild.reset();
}

void Optimizer::keepReplacedVersions(bool keep) {
  keeping = keep;
  if (keep)
    return;
  installedBuild.reset();
  for (Kept &entry : kept)
    retired.push_back(std::move(entry.version.object));
  kept.clear();
}

std::unique_ptr<core::CycleCandidate>
Optimizer::keptCandidate(const core::TableSnapshot &snapshot, const core::TrafficChoice &traffic,
                         core::CycleReport &report) {
  core::VersionSettings settings = versionSettings();
  auto fits = [&](const Kept &entry) {
    return entry.build.settings == settings && entry.build.traffic == traffic &&
           builtForThisCycle(entry.version, snapshot, report);
  };
  auto found = std::find_if(kept.begin(), kept.end(), fits);
  if (found == kept.end())
    return nullptr;
  Kept entry = std::move(*found);
  kept.erase(found);
  report.log = std::move(entry.build.log);
  report.reinstalledFrom = entry.build.cycle;
  // Should the cycle drop it (a table changed meanwhile), it closes at
  // once: it was replaced a whole slice of the exploration ago, far longer
  // than any packet runs.
  return std::make_unique<Candidate>(std::move(entry.version.elf), std::vector<char>{},
                                     std::move(entry.version.object), Clock::now());
}

int Optimizer::activeFd() const {
  return installed ? installed->object.programFd(entry) : originalFd();
}

Expected<bpf::LoadedObject> Optimizer::loadUnguardedTwin() const {
  if (!installed)
    return makeError("{0}: no specialization installed", entry);
  bpf::SpecializeRequest request;
  request.inlineLimit = options.inlineLimit;
  request.costModel = options.costModel;
  request.tablePasses = options.tablePasses;
  request.sharesLiveMaps = true;
  request.programs = factsFor(installed->stages);
  request.faults = options.faults;
  const core::TrafficChoice &traffic = cycle->traffic().installedChoice();
  request.hotKeys = traffic.hotKeys;
  request.perCpuHotKeys = traffic.perCpuHotKeys;
  request.hotTuples = traffic.hotTuples;
  withhold(request, stepFor(installed->snapshot).value_or(Withheld::Nothing),
           ", as in the installed version");
  auto object = programSpec->specialize(installed->snapshot, request);
  if (!object)
    return object.takeError();
  auto twin = loadVersion(object->elf, installed->stages);
  if (!twin)
    return twin.takeError();
  if (Error err = fillVersionStages(*twin, installed->stages))
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

std::map<std::string, bpf::ProgramFacts>
Optimizer::factsFor(const bpf::ProgramSlots &stages) const {
  std::map<std::string, bpf::ProgramFacts> facts = programFacts;
  for (const auto &[program, before] :
       bpf::tailCallsBefore(entry, adopted() ? 1 : 0, originalCode, stages))
    facts[program].tailCallsBefore = before;
  return facts;
}

Error Optimizer::fillVersionStages(bpf::LoadedObject &version, const bpf::ProgramSlots &stages,
                                   const std::map<std::string, int> &reused) {
  std::map<std::string, int> ownArrays;
  for (const auto &[array, slots] : stages)
    ownArrays[array] = version.mapFd(array);
  return version.fillProgramSlots(stages, ownArrays, reused);
}

int Optimizer::mapFd(const std::string &name) const {
  auto it = sharedMaps.find(name);
  return it == sharedMaps.end() ? -1 : it->second;
}

std::optional<core::TableSnapshot> Optimizer::readTables(const core::ReadPlan &cyclePlan,
                                                          core::CycleReport &report) {
  auto read = bpf::readSnapshot(cyclePlan, programSpec->catalog(), sharedMaps);
  if (!read) {
    report.fail(read.takeError());
    return std::nullopt;
  }
  // The stages each program array holds: a version gets arrays of its own,
  // with its specialized programs, for those that hold only ours.
  auto stages = stageArrays();
  if (!stages) {
    report.fail(stages.takeError());
    return std::nullopt;
  }
  cycleStages = std::move(*stages);
  if (adopted() && ownerChanged(*read) && installed) {
    // The owner wrote what the running version answers from (a table, or a
    // stage in its program arrays), without a bump: bump now (packets run
    // the owner's code from here on), then read again and rebuild for what
    // the tables hold after the bump.
    guardWord.bump();
    report.version = guardWord.version();
    read = bpf::readSnapshot(cyclePlan, programSpec->catalog(), sharedMaps);
    if (!read) {
      report.fail(read.takeError());
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
    report.fail(globals.takeError());
    return std::nullopt;
  }
  cycleGlobals = std::move(*globals);
  return std::move(*read);
}

bool Optimizer::builtForThisCycle(const Installed &version, const core::TableSnapshot &snapshot,
                                  const core::CycleReport &report) const {
  return report.version == version.version && cycleStages == version.stages &&
         programSpec->analysis().sameWhereReadOnly(snapshot, version.snapshot) &&
         core::checksHold(version.checks, cycleGlobals);
}

bool Optimizer::installedFits(const core::TableSnapshot &snapshot,
                              const core::CycleReport &report) const {
  return installed && builtForThisCycle(*installed, snapshot, report);
}

// An adopted program's arrays hold the owner's programs: each counts as
// ours where it runs the same code on the same maps as our original's
// program of its name (LoadedObject::programSlots), so the stages of an
// owner that loaded what Morpheus builds from the source are specialized
// too, and any other stage stays the owner's.
Expected<bpf::ProgramSlots> Optimizer::stageArrays() const {
  auto slots = original->ownProgramSlots();
  if (!slots)
    return slots.takeError();
  // Its other writer may put any program in it at any moment: the live
  // array answers that from the next packet on, a copy would not.
  std::erase_if(*slots, [&](const auto &array) {
    auto table = programSpec->catalog().find(array.first);
    return table != programSpec->catalog().end() && table->second.keptGeneric;
  });
  return slots;
}

bool Optimizer::ownerChanged(core::TableSnapshot &read) {
  const core::TableAccessInfo &analysis = programSpec->analysis();
  auto same = [&](const std::string &name, const core::TableContents &a,
                  const core::TableContents &b) { return analysis.sameWhereReadOnly(name, a, b); };
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
  if (!installed)
    return true;
  // A stage in the owner's program arrays changed, or a table.
  if (cycleStages != installed->stages || read.size() != installed->snapshot.size())
    return true;
  for (const auto &[name, built] : installed->snapshot) {
    auto now = read.find(name);
    if (now == read.end() || !same(name, now->second, built))
      return true;
  }
  return false;
}

std::optional<Optimizer::Withheld>
Optimizer::stepFor(const core::TableSnapshot &snapshot) const {
  if (!rejection || rejection->snapshot != snapshot ||
      rejection->tablePasses != options.tablePasses)
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

bpf::SpecializeRequest cycleRequest(const OptimizerOptions &options, uint64_t version) {
  bpf::SpecializeRequest request;
  request.inlineLimit = options.inlineLimit;
  request.costModel = options.costModel;
  request.tablePasses = options.tablePasses;
  request.guardVersion = version;
  request.faults = options.faults;
  request.instrument = options.traffic.mode != core::ProfileMode::Off;
  request.notProfiled = options.notProfiled;
  request.compared = options.shadowPackets > 0;
  return request;
}

// When the kernel refuses a candidate (too complex, too large, any
// verifier error), the same cycle builds it again with less, step by step
// (Withheld): without compare chains, the specialization most likely to
// multiply the verifier's work, then without regions too, whose tables
// hand the program values it checks. A step whose object is byte for byte
// the one refused is not loaded again. What was refused is remembered for
// this snapshot, so later periods start at the step the kernel took, and
// do not ask it again when it took none, until the tables change.
std::unique_ptr<core::CycleCandidate>
Optimizer::buildCandidate(core::TableSnapshot &snapshot, const core::TrafficChoice &traffic,
                          core::CycleReport &report) {
  if (auto again = keptCandidate(snapshot, traffic, report))
    return again;
  uint64_t version = report.version;
  std::optional<Withheld> step = stepFor(snapshot);
  if (!step) {
    report.end(core::CycleOutcome::Failed,
             llvm::formatv("the kernel refused this snapshot's specializations, with and "
                           "without compare chains and regions (cycle {0}): {1}; waiting for "
                           "the tables to change",
                           rejection->cycle, rejection->reason)
                 .str());
    return nullptr;
  }
  bpf::SpecializeRequest request = cycleRequest(options, version);
  request.programs = factsFor(cycleStages);
  request.hotKeys = traffic.hotKeys;
  request.perCpuHotKeys = traffic.perCpuHotKeys;
  request.hotTuples = traffic.hotTuples;
  request.writeCounts = traffic.writeCounts;
  request.globals = cycleGlobals;
  request.restampable = restampable;
  std::set<std::string> reused = reusablePrograms(snapshot, traffic);
  std::map<std::string, int> reusedFds;
  if (!reused.empty()) {
    request.programsBuilt.emplace();
    for (const std::string &program : programSpec->programs())
      if (!reused.count(program))
        request.programsBuilt->insert(program);
    for (const std::string &program : reused)
      reusedFds[program] = installed->restampable.at(program).program.get();
  }
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
      report.fail(object.takeError());
      return nullptr;
    }
    report.log = std::move(object->log);
    std::vector<char> elf = std::move(object->elf);
    std::vector<char> comparedElf = std::move(object->comparedElf);
    if (installed && elf == installed->elf && cycleStages == installed->stages) {
      // Byte for byte the running code, although built for this version and
      // snapshot: it depends on neither, so it stays valid for both, and so
      // do the programs it reused (their tables did not change either).
      for (auto &[program, stamped] : installed->restampable)
        if (stamped.versions.valid())
          if (Error err = bpf::stampExpectedVersion(stamped.versions.get(), stamped.slot, version)) {
            report.fail(std::move(err));
            return nullptr;
          }
      installed->version = version;
      installed->snapshot = std::move(snapshot);
      installed->checks = reused.empty() ? report.log.globalChecks
                                         : withReusedChecks(report.log.globalChecks);
      if (keeping)
        installedBuild = BuiltWith{versionSettings(), traffic, report.log, report.cycle};
      report.end(core::CycleOutcome::Unchanged);
      return nullptr;
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
        if (Error err = fillVersionStages(*attempt, cycleStages, reusedFds)) {
          report.fail(std::move(err));
          return nullptr;
        }
        clock.end("stage arrays filled");
        auto candidate = std::make_unique<Candidate>(std::move(elf), std::move(comparedElf),
                                                     std::move(*attempt), start);
        candidate->reused = reused;
        report.reused.assign(reused.begin(), reused.end());
        return candidate;
      }
      // Only the verifier's refusal may spare a candidate with less; any
      // other failure (a map of another layout, one the kernel cannot
      // create) would meet it just the same.
      Error failure = attempt.takeError();
      if (!failure.isA<VerifierRejection>()) {
        report.fail(std::move(failure));
        return nullptr;
      }
      llvm::handleAllErrors(std::move(failure), [&](const VerifierRejection &refused) {
        refusal = refused.message();
        reason = refused.reason();
      });
      ++report.refusedByKernel;
      refusedElf = std::move(elf);
    }
    if (*step == Withheld::Nothing)
      rejection =
          Rejection{snapshot, options.tablePasses, report.cycle, reason, Withheld::Nothing};
    else
      rejection->refused = *step;
    step = stepFor(snapshot);
    if (!step) {
      report.end(core::CycleOutcome::Failed, refusal);
      return nullptr;
    }
  }
}

// A partial build's log names the globals its own programs folded; the
// reused programs' are among the installed version's, which are all kept
// (a version's checks only decide whether it still fits the globals).
std::vector<core::GlobalCheck>
Optimizer::withReusedChecks(std::vector<core::GlobalCheck> built) const {
  for (const core::GlobalCheck &check : installed->checks)
    if (std::find(built.begin(), built.end(), check) == built.end())
      built.push_back(check);
  return built;
}

Optimizer::TableChanges
Optimizer::changedSinceInstalled(const core::TableSnapshot &snapshot) const {
  TableChanges changes;
  const core::TableAccessInfo &analysis = programSpec->analysis();
  for (const auto &[name, contents] : snapshot) {
    auto built = installed->snapshot.find(name);
    if (built == installed->snapshot.end() ||
        !analysis.sameWhereReadOnly(name, contents, built->second))
      changes.tables.insert(name);
  }
  for (const auto &[name, contents] : installed->snapshot)
    if (!snapshot.count(name))
      changes.tables.insert(name);
  std::set<std::string> named;
  for (const auto &[program, code] : originalCode)
    named.insert(code.maps.begin(), code.maps.end());
  for (const std::string &table : changes.tables)
    if (!named.count(table)) {
      changes.reachesAll = "table '" + table + "' changed and no program's code names it";
      break;
    }
  return changes;
}

// Reused programs. A program built restampable reads the guard version it
// expects from its slot of its object's version array. Its code is correct
// for any snapshot that agrees with the one it was built from on the tables
// it reads, where it only reads them (what the data plane writes, it reads
// live or counts, and folded globals it checks itself): stamping it with a
// later guard version whose snapshot agrees so is as sound as building it
// again, and saves its O2, code generation, loading and verification. Only
// programs that make no tail calls qualify (their stage arrays are the
// version's own), and none that registers callbacks (whose guards keep the
// immediate). The rest of what a build depends on must be as the installed
// version was built: the stage arrays, the traffic's choice, the folded
// globals' bytes and the version settings; otherwise the program is built
// again, as it would have been.
std::set<std::string> Optimizer::reusablePrograms(const core::TableSnapshot &snapshot,
                                                  const core::TrafficChoice &traffic) const {
  if (!installed || keeping || installed->restampable.empty() ||
      cycleStages != installed->stages || installed->settings != versionSettings() ||
      traffic != cycle->traffic().installedChoice() ||
      !core::checksHold(installed->checks, cycleGlobals))
    return {};
  TableChanges changes = changedSinceInstalled(snapshot);
  if (!changes.reachesAll.empty())
    return {};
  std::set<std::string> reused;
  for (const auto &[program, stamped] : installed->restampable) {
    const std::set<std::string> &reads = originalCode.at(program).maps;
    if (std::none_of(reads.begin(), reads.end(),
                     [&](const std::string &map) { return changes.tables.count(map); }))
      reused.insert(program);
  }
  return reused;
}

Expected<core::ValidationScope>
Optimizer::validationScope(const core::CycleReport &report, const Candidate &candidate,
                           const core::TableSnapshot &snapshot) const {
  core::ValidationScope scope;
  if (!installed) {
    scope.whyWhole = "no version installed yet";
    return scope;
  }
  // What every program's code was built under besides its tables: the
  // stage arrays, the traffic's fast paths, the folded globals (a
  // candidate that reuses programs was built only if they are as before).
  if (candidate.reused.empty() &&
      (cycleStages != installed->stages ||
       cycle->traffic().choice() != cycle->traffic().installedChoice() ||
       report.log.globalChecks != installed->checks)) {
    scope.whyWhole = "the stage arrays, the traffic's fast paths or the folded globals changed";
    return scope;
  }
  // The tables whose read-only bytes changed since the installed version
  // was built (and validated). A program's specialization can only depend
  // on the tables its original code names; a changed table no program
  // names (an inner map reached through a map of maps) could be behind
  // any of them.
  TableChanges changes = changedSinceInstalled(snapshot);
  if (!changes.reachesAll.empty()) {
    scope.whyWhole = changes.reachesAll;
    return scope;
  }
  for (const std::string &program : programSpec->programs()) {
    const bpf::LoadedObject::Code &was = originalCode.at(program);
    bool readsAChange = std::any_of(was.maps.begin(), was.maps.end(), [&](const std::string &map) {
      return changes.tables.count(map);
    });
    bool same = candidate.reused.count(program) > 0;
    if (!same && program != entry && !was.tailCalls() && !readsAChange &&
        installed->object.programFd(program) >= 0) {
      auto now = candidate.loaded.programCode(program, report.version);
      auto running = installed->object.programCode(program, installed->version);
      if (!now)
        return now.takeError();
      if (!running)
        return running.takeError();
      same = *now == *running;
    }
    (same ? scope.skipped : scope.validated).push_back(program);
  }
  if (scope.skipped.empty()) {
    scope.validated.clear();
    scope.whyWhole = "every program changed, tail-calls or is the entry";
  }
  return scope;
}

bool Optimizer::validateCandidate(const core::CycleCandidate &built,
                                  const core::TableSnapshot &snapshot,
                                  core::CycleReport &report) {
  const auto &candidate = static_cast<const Candidate &>(built);
  if (!options.shadowPackets || report.reinstalledFrom)
    return true;
  uint64_t version = report.version;
  auto validationStart = Clock::now();
  std::vector<core::BuildPhase> phases;
  core::PhaseClock clock(phases);
  auto scope = validationScope(report, candidate, snapshot);
  if (!scope) {
    report.fail(scope.takeError());
    return false;
  }
  report.validation = std::move(*scope);
  clock.end("what changed (validation scope)");
  ShadowOptions shadow;
  shadow.packets = options.shadowPackets;
  shadow.seed = report.cycle;
  shadow.faults = options.faults;
  if (!report.validation.validated.empty())
    shadow.programs = std::set<std::string>(report.validation.validated.begin(),
                                            report.validation.validated.end());
  auto slots = original->programSlots();
  if (!slots) {
    report.fail(slots.takeError());
    return false;
  }
  clock.end("the live program arrays read");
  auto verdict = shadowValidate(*programSpec, entry, candidate.comparedElf, version,
                                LiveMaps{original->maps(), std::move(*slots)}, snapshot, shadow);
  report.times.validationMs = millisecondsSince(validationStart);
  if (verdict) {
    clock.append(verdict->phases);
    report.times.validationPhases = std::move(phases);
    report.validation.nondeterministic = verdict->nondeterministic;
  }
  if (guardWord.version() != version || guardWord.changing()) {
    // The maps moved under the copies: a difference would mean nothing.
    llvm::consumeError(verdict.takeError());
    report.end(core::CycleOutcome::Superseded, core::TableChangedDuringCycle);
    return false;
  }
  if (!verdict) {
    report.fail(verdict.takeError());
    return false;
  }
  if (!verdict->difference.empty()) {
    report.reproducer = std::move(verdict->reproducer);
    report.differenceKey = verdict->difference;
    std::string where =
        verdict->packet ? llvm::formatv("packet {0}: ", *verdict->packet).str() : "";
    report.end(core::CycleOutcome::Refused, "shadow validation: " + where + verdict->difference);
    return false;
  }
  return true;
}

Error Optimizer::installCandidate(std::unique_ptr<core::CycleCandidate> built,
                                  core::TableSnapshot snapshot, core::CycleReport &report) {
  Candidate &candidate = static_cast<Candidate &>(*built);
  int fd = candidate.loaded.programFd(entry);
  auto installStart = Clock::now();
  // The programs reused are told the new version (sound whenever it is
  // stamped: their tables are as this version's snapshot has them) before
  // the entry that reaches them is installed.
  for (const std::string &program : candidate.reused) {
    const Restampable &stamped = installed->restampable.at(program);
    if (stamped.versions.valid())
      if (Error err = bpf::stampExpectedVersion(stamped.versions.get(), stamped.slot,
                                                report.version))
        return withContext(std::move(err), "reused program '" + program + "'");
  }
  if (install)
    if (Error err = install(fd))
      return err;
  report.times.injectionPhases.push_back({"install", millisecondsSince(installStart)});
  report.times.injectionMs = millisecondsSince(candidate.loadStart) - report.times.validationMs;
  std::map<std::string, Restampable> restamped;
  std::vector<core::GlobalCheck> checks = report.log.globalChecks;
  if (!candidate.reused.empty()) {
    for (const std::string &program : candidate.reused)
      restamped[program] = std::move(installed->restampable.at(program));
    checks = withReusedChecks(report.log.globalChecks);
  }
  const std::vector<std::string> &programs = programSpec->programs();
  for (unsigned slot = 0; slot < programs.size(); ++slot)
    if (restampable.count(programs[slot]) && candidate.loaded.programFd(programs[slot]) >= 0) {
      // A descriptor that cannot be duplicated leaves the program to be
      // built again by the next version.
      int versions = candidate.loaded.mapFd(bpf::VersionArraySection);
      Restampable own{FileDescriptor(::dup(candidate.loaded.programFd(programs[slot]))),
                      FileDescriptor(versions >= 0 ? ::dup(versions) : -1), slot};
      if (own.program.valid() && (versions < 0 || own.versions.valid()))
        restamped[programs[slot]] = std::move(own);
    }
  replaceInstalled();
  installed = Installed{std::move(candidate.loaded), std::move(restamped), versionSettings(),
                        cycleStages, report.version, std::move(snapshot), std::move(checks),
                        std::move(candidate.elf)};
  if (keeping)
    installedBuild = BuiltWith{versionSettings(), cycle->traffic().choice(), report.log,
                               report.reinstalledFrom.value_or(report.cycle)};
  report.instructions = bpf::translatedInstructions(fd);
  report.verifiedInstructions = bpf::verifiedInstructions(fd);
  return Error::success();
}

} // namespace morpheus::runtime
