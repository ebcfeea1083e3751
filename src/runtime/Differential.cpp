#include "runtime/Differential.h"

#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramSpec.h"
#include "core/ComparedConstants.h"
#include "core/WriteGuards.h"
#include "runtime/MapStates.h"
#include "support/CpuPin.h"
#include "support/Files.h"

#include <sched.h>

#include <algorithm>
#include <chrono>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/SwapByteOrder.h>
#include <nlohmann/json.hpp>

namespace morpheus::runtime {

namespace {

using core::Bytes;
using Clock = std::chrono::steady_clock;
using Keys = std::map<std::string, std::vector<Bytes>>;

double secondsSince(Clock::time_point start) {
  return std::chrono::duration<double>(Clock::now() - start).count();
}

// What a replay found: Morpheus could not produce a version for the state
// (a compile error, a verifier rejection), or a version behaved differently.
struct Finding {
  enum Kind { SpecializationFailed, Differed } kind;
  std::string detail;
};

Keys keysOf(const MapContents &state) {
  Keys keys;
  for (const auto &[name, rows] : state)
    for (const auto &[key, value] : rows)
      keys[name].push_back(key);
  return keys;
}

// What a control plane writes after a guard bump, which the version built
// for `state` did not see: in every table the core models (not maps of
// maps: their values are map fds), the first entry's value complemented;
// in hash tables (not LRU: an insert there evicts differently in each
// copy) with room for it, a key added, the first key with its last byte
// changed, holding the first value. Code left unguarded answers from the
// old value, or misses the new key, and differs.
MapContents changedBehindTheGuard(const MapContents &state, const core::TableCatalog &catalog) {
  MapContents changed;
  for (const auto &[name, rows] : state) {
    auto table = catalog.find(name);
    if (rows.empty() || table == catalog.end() ||
        table->second.match == core::TableMatch::Unsupported || table->second.innerTemplate)
      continue;
    const auto &[firstKey, firstValue] = rows.front();
    core::Bytes value = firstValue;
    for (uint8_t &byte : value)
      byte = ~byte;
    changed[name].emplace_back(firstKey, std::move(value));
    core::Bytes added = firstKey;
    if (added.empty())
      continue;
    added.back() ^= 0x5a;
    bool held = llvm::any_of(rows, [&](const auto &row) { return row.first == added; });
    if (table->second.match == core::TableMatch::Exact && !table->second.lookupHasSideEffects &&
        !held && rows.size() < table->second.maxEntries)
      changed[name].emplace_back(std::move(added), firstValue);
  }
  return changed;
}

// `state` with `changes` written over it.
MapContents withChanges(MapContents state, const MapContents &changes) {
  for (const auto &[name, rows] : changes)
    for (const auto &[key, value] : rows) {
      auto &held = state[name];
      auto row = llvm::find_if(held, [&](const auto &entry) { return entry.first == key; });
      if (row == held.end())
        held.emplace_back(key, value);
      else
        row->second = value;
    }
  return state;
}

class Fuzzer {
public:
  Fuzzer(const std::string &path, const FuzzOptions &options)
      : path(path), options(options), rng(options.seed) {}
  Expected<FuzzReport> run();

private:
  Error setUp();
  // Starts the maps from `state`, specializes for it and runs `steps` until
  // the first finding, to which `steps` is then cut.
  Expected<std::optional<Finding>> replay(const MapContents &state, std::vector<Step> &steps);
  // replay's first half: the copies hold `state` under a fresh guard
  // version, and the Specialized version is built and loaded for it. An
  // error of Morpheus's own (specialize, load) comes back as the message.
  Expected<std::optional<std::string>> specializeFor(const MapContents &state);
  // replay's second half: `steps` run on the three versions.
  Expected<std::optional<Finding>> runSteps(const MapContents &state, std::vector<Step> &steps);
  // A new state's packets, then packets of the state as a control plane
  // changed it after a guard bump (changedBehindTheGuard).
  std::vector<Step> stepsFor(const MapContents &state);
  // Whether replaying a failing case fails again, twice, at the same step.
  Expected<bool> reproducible(const MapContents &state, const std::vector<Step> &steps);
  // The reproducer of a failing case, shrunk: to the failing packet alone
  // when that still fails, then by dropping map entries one at a time.
  Expected<Reproducer> shrink(MapContents state, std::vector<Step> steps, Finding finding);
  Reproducer reproducerOf(MapContents state, std::vector<Reproducer::Packet> packets,
                          const Finding &finding, bool shrunk) const;

  std::string path;
  FuzzOptions options;
  Rng rng;
  std::unique_ptr<bpf::ProgramSpec> spec;
  std::string entry;
  core::ReadPlan plan;
  // A load of the original that is never run: the pristine maps every
  // version's scratch copies start from.
  std::optional<bpf::LoadedObject> reference;
  std::unique_ptr<VersionComparison> comparison;
  std::optional<MapStateGenerator> states;
  ContextPlan contextPlan;
  FuzzReport report;
  MapContents lastState; // in the copies now, to undo
  // Sites whose lookups a version records and may get a fast path for:
  // each state puts some of its own keys (and one it lacks) in front of
  // them, a hot set unrelated to any traffic.
  std::map<unsigned, core::ProfiledSite> profiledSites;
  // The last replay's packets.
  std::vector<Reproducer::Packet> lastPackets;
};

Error Fuzzer::setUp() {
  auto loaded = bpf::ProgramSpec::load(path, options.frontend);
  if (!loaded)
    return loaded.takeError();
  spec = std::move(*loaded);
  auto runnable = spec->runnableEntry(options.program);
  if (!runnable)
    return runnable.takeError();
  entry = std::move(*runnable);
  report.program = entry;
  report.type = spec->programType(entry);
  report.programs = spec->programs().size();
  plan = spec->readPlan(options.inlineLimit);
  // Built once with nothing read: every site that can be recorded is.
  bpf::SpecializeRequest everySite;
  everySite.inlineLimit = options.inlineLimit;
  everySite.guardVersion = 1;
  everySite.instrument = true;
  auto instrumented = spec->specialize({}, everySite);
  if (!instrumented)
    return instrumented.takeError();
  profiledSites = instrumented->log.profiled;
  auto object = bpf::LoadedObject::load(spec->originalElf(), spec->objectName(), {});
  if (!object)
    return object.takeError();
  reference.emplace(std::move(*object));
  // The copies' program arrays hold what the live original's load would
  // put there: its static slots.
  LiveMaps pristine{reference->maps(), spec->staticProgramSlots()};
  VersionComparison::Options comparing;
  comparing.fallback = true; // the guard-bumped packets
  comparing.faults = options.faults;
  auto created = VersionComparison::create(*spec, entry, pristine, comparing);
  if (!created)
    return created.takeError();
  comparison = std::move(*created);
  auto generator =
      MapStateGenerator::create(spec->catalog(), reference->maps(), options.configured,
                                options.maxEntries, core::comparedConstants(spec->module()));
  if (!generator)
    return generator.takeError();
  states.emplace(std::move(*generator));
  auto plan = planContext(*spec, entry, options.faults.zeroedContext);
  if (!plan)
    return plan.takeError();
  contextPlan = std::move(*plan);
  return Error::success();
}

Expected<std::optional<Finding>> Fuzzer::replay(const MapContents &state,
                                                std::vector<Step> &steps) {
  lastPackets.clear();
  auto specializationError = specializeFor(state);
  if (!specializationError)
    return specializationError.takeError();
  if (*specializationError) {
    // The running program would stay generic: safe, but Morpheus produced
    // code it should not have (or could not handle this state), a finding.
    ++report.cases;
    ++report.differed;
    steps.resize(1);
    return std::optional<Finding>(
        Finding{Finding::SpecializationFailed, std::move(**specializationError)});
  }
  return runSteps(state, steps);
}

Expected<std::optional<std::string>> Fuzzer::specializeFor(const MapContents &state) {
  if (Error err = comparison->restore(keysOf(lastState)))
    return err;
  lastState = state;
  if (Error err = comparison->write(state))
    return err;
  // A fresh version per state: the code built for the previous state must
  // not pass for this one.
  uint64_t version = comparison->guard().bump();
  // Hot keys from the state alone (a replay must build the same code): up
  // to three of the table's keys and one it does not hold.
  std::map<unsigned, std::vector<core::Bytes>> hotKeys;
  std::map<unsigned, core::PerCpuHotKeys> perCpuHotKeys;
  core::ReadPlan statePlan = plan;
  std::map<unsigned, std::vector<core::Bytes>> hotTuples;
  for (const auto &[site, profiled] : profiledSites) {
    if (profiled.flowSavingNs) {
      // A flow's hot tuples: wrong ones, built from the state's bytes (the
      // first table row's key and value, repeated to the tuple's size) and
      // all zeros; the copies they get must answer as the original.
      auto rows = state.find(profiled.table);
      core::Bytes fromState;
      if (rows != state.end() && !rows->second.empty()) {
        const auto &[key, value] = rows->second.front();
        fromState.insert(fromState.end(), key.begin(), key.end());
        fromState.insert(fromState.end(), value.begin(), value.end());
      }
      core::Bytes tuple(profiled.keySize, 0);
      for (size_t i = 0; i < tuple.size() && !fromState.empty(); ++i)
        tuple[i] = fromState[i % fromState.size()];
      hotTuples[site] = {tuple, core::Bytes(profiled.keySize, 0)};
      continue;
    }
    auto rows = state.find(profiled.table);
    if (rows == state.end() || rows->second.empty())
      continue;
    std::vector<core::Bytes> &hot = hotKeys[site];
    for (const auto &[key, value] : rows->second)
      if (hot.size() < 3 && key.size() == profiled.keySize)
        hot.push_back(key);
    core::Bytes absent = rows->second.front().first;
    if (!absent.empty()) {
      absent.back() ^= 0x5a;
      hot.push_back(absent);
    }
    std::vector<core::Bytes> &probe = statePlan[profiled.table].keys;
    probe.insert(probe.end(), hot.begin(), hot.end());
    // Every other state, per-CPU chains too, from the same keys in other
    // orders and subsets (wrong per CPU as well): CPU 0 compares them in
    // reverse, CPU 1 the last and the first only, any other CPU the chain
    // above; whichever CPU runs the packets, its arm is checked.
    if (rows->second.size() % 2 && hot.size() > 1)
      perCpuHotKeys[site] = {{0, std::vector<core::Bytes>(hot.rbegin(), hot.rend())},
                             {1, {hot.back(), hot.front()}}};
  }
  auto snapshot =
      bpf::readSnapshot(statePlan, spec->catalog(), comparison->maps(Version::Specialized));
  if (!snapshot)
    return snapshot.takeError();
  bpf::SpecializeRequest request;
  request.inlineLimit = options.inlineLimit;
  request.guardVersion = version;
  request.programs = comparison->programFacts();
  request.faults = options.faults;
  request.instrument = true;
  request.live = false; // never installed: only the copy that is compared
  request.compared = true;
  // Each load gets a fresh write count map (zeros): hot keys of tables the
  // data plane writes are built under count 0, and a step that writes one
  // takes its fast path away, as on the live program.
  for (const auto &[site, keys] : hotKeys)
    for (const core::Bytes &key : keys)
      request.writeCounts[core::writeBucket(profiledSites.at(site).table, key,
                                            bpf::WriteBucketBits,
                                            llvm::sys::IsLittleEndianHost)] = 0;
  request.hotKeys = std::move(hotKeys);
  request.perCpuHotKeys = std::move(perCpuHotKeys);
  request.hotTuples = std::move(hotTuples);
  // The copies' globals as they stand: the ones the program never writes
  // are folded under their checks, as the optimizer folds the live ones.
  auto globals = bpf::readGlobals(spec->globals(), comparison->maps(Version::Specialized));
  if (!globals)
    return globals.takeError();
  request.globals = std::move(*globals);
  auto object = spec->specialize(*snapshot, request);
  if (!object)
    return std::optional<std::string>(llvm::toString(object.takeError()));
  if (Error err = comparison->loadSpecialized(object->comparedElf))
    return std::optional<std::string>(llvm::toString(std::move(err)));
  return std::optional<std::string>();
}

Expected<std::optional<Finding>> Fuzzer::runSteps(const MapContents &state,
                                                  std::vector<Step> &steps) {
  Keys keys = keysOf(state);
  bool bumped = false;
  for (size_t i = 0; i < steps.size(); ++i) {
    if (steps[i].guardBumped && !bumped) {
      comparison->guard().bump();
      // The packets before the bump may have filled a table the program
      // inserts into: a key added where there is no room is left out.
      auto changes = comparison->writeWhereRoom(changedBehindTheGuard(state, spec->catalog()));
      if (!changes)
        return changes.takeError();
      lastState = withChanges(state, *changes); // what the next state restores
      keys = keysOf(lastState);
      bumped = true;
    }
    // Maps the analysis found read-only by the program are compared after
    // the last packet only: reading big tables after every packet would
    // leave little time for packets, and a wrong "read-only" still shows.
    bool last = i + 1 == steps.size();
    auto outcome = comparison->run(steps[i], last ? MapCheck::All : MapCheck::Written, keys);
    if (!outcome)
      return outcome.takeError();
    Reproducer::Packet &seen = lastPackets.emplace_back();
    seen.step = steps[i];
    for (size_t version = 0; version < VersionCount; ++version)
      seen.results[version] = outcome->observed[version];
    ++report.cases;
    report.nondeterministic += outcome->nondeterministic;
    if (outcome->difference) {
      ++report.differed;
      steps.resize(i + 1);
      return std::optional<Finding>(
          Finding{Finding::Differed, llvm::formatv("{0}{1}", *outcome->difference,
                                                   steps[i].guardBumped ? " (after a guard bump)"
                                                                        : "")
                                         .str()});
    }
  }
  return std::optional<Finding>();
}

// Replays are not counted as cases.
Expected<bool> Fuzzer::reproducible(const MapContents &state, const std::vector<Step> &steps) {
  uint64_t cases = report.cases, differed = report.differed,
           nondeterministic = report.nondeterministic;
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
  report.nondeterministic = nondeterministic;
  return again;
}

// Replays are not counted as cases.
Expected<Reproducer> Fuzzer::shrink(MapContents state, std::vector<Step> steps, Finding finding) {
  uint64_t cases = report.cases, differed = report.differed,
           nondeterministic = report.nondeterministic;
  std::vector<Reproducer::Packet> packets = lastPackets;
  auto start = Clock::now();
  auto fails = [&](const MapContents &candidate,
                   const std::vector<Step> &sequence) -> Expected<bool> {
    std::vector<Step> run = sequence;
    auto result = replay(candidate, run);
    if (!result)
      return result.takeError();
    // The same kind of finding, at the last step, or the shrink would
    // wander off to another one.
    if (*result && run.size() == sequence.size() && (*result)->kind == finding.kind) {
      finding = **result;
      packets = lastPackets;
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
    for (auto &[name, rows] : state)
      for (size_t i = 0; i < rows.size() && secondsSince(start) < options.shrinkSeconds;) {
        MapContents candidate = state;
        candidate[name].erase(candidate[name].begin() + i);
        auto still = fails(candidate, steps);
        if (!still)
          return still.takeError();
        if (*still)
          rows = std::move(candidate[name]);
        else
          ++i;
      }
  }
  report.cases = cases;
  report.differed = differed;
  report.nondeterministic = nondeterministic;
  return reproducerOf(std::move(state), std::move(packets), finding, shrunk);
}

Reproducer Fuzzer::reproducerOf(MapContents state, std::vector<Reproducer::Packet> packets,
                                const Finding &finding, bool shrunk) const {
  Reproducer reproducer;
  reproducer.check = "fuzz";
  reproducer.program = path;
  reproducer.entry = entry;
  reproducer.guardVersion = comparison->guard().version();
  reproducer.seed = options.seed;
  reproducer.difference = finding.kind == Finding::SpecializationFailed
                              ? "specialization failed: " + finding.detail
                              : finding.detail;
  reproducer.maps = std::move(state);
  reproducer.packets = std::move(packets);
  if (finding.kind == Finding::Differed)
    reproducer.differingPacket = reproducer.packets.size();
  reproducer.shrunk = shrunk;
  return reproducer;
}

std::vector<Step> Fuzzer::stepsFor(const MapContents &state) {
  std::vector<Step> steps = states->packets(state, rng, options.packetsPerState, contextPlan);
  // After the bump, packets drawn from the tables as changed, so that the
  // added keys are asked for too.
  MapContents changed = withChanges(state, changedBehindTheGuard(state, spec->catalog()));
  for (Step &again : states->packets(changed, rng, options.packetsPerState, contextPlan)) {
    again.guardBumped = true;
    steps.push_back(std::move(again));
  }
  return steps;
}

Expected<FuzzReport> Fuzzer::run() {
  // Setting up (compiling, loading and verifying three copies of a large
  // program) can take longer than the time asked for: it is not fuzzing,
  // so the time starts after it, and one map state at least is compared
  // whatever the time, so no run reports a clean result it never checked.
  auto settingUp = Clock::now();
  if (Error err = setUp())
    return err;
  report.setUpSeconds = secondsSince(settingUp);
  auto start = Clock::now();
  while (report.states < std::max<uint64_t>(options.minStates, 1) ||
         secondsSince(start) < options.seconds) {
    bool fromConfiguration = false;
    MapContents state = states->generate(rng, fromConfiguration);
    report.configuredStates += fromConfiguration;
    std::vector<Step> steps = stepsFor(state);
    auto finding = replay(state, steps);
    if (!finding)
      return finding.takeError();
    ++report.states;
    if (!*finding)
      continue;
    if ((*finding)->kind == Finding::Differed) {
      auto again = reproducible(state, steps);
      if (!again)
        return again.takeError();
      if (!*again) {
        // The copies are deterministic with respect to each other: a real
        // difference fails again, on the same step, with the same random
        // streams and hash orders. One that does not came from what the
        // copies could not make alike: counted apart, nothing masked.
        ++report.nondeterministic;
        --report.differed;
        continue;
      }
    }
    auto reproducer = shrink(state, steps, **finding);
    if (!reproducer)
      return reproducer.takeError();
    report.reproducer = reproducer->toJson().dump(2);
    break;
  }
  const MaskCounts &masked = comparison->masked();
  report.maskedBytes = masked.bytes;
  report.maskedVerdicts = masked.verdicts;
  report.maskedKeySets = masked.keySets;
  report.seconds = secondsSince(start);
  return report;
}

} // namespace

Expected<FuzzReport> fuzzProgram(const std::string &path, const FuzzOptions &options) {
  // Per-CPU maps must see every run on the same CPU, or the three versions'
  // per-CPU values would drift apart for no reason.
  CpuPin pin;
  if (!pin.ok())
    return makeSystemError(errno, "cannot pin the fuzzer to one CPU");
  Fuzzer fuzzer(path, options);
  auto report = fuzzer.run();
  if (!report)
    return withContext(report.takeError(), path);
  if (!report->reproducer.empty() && !options.reproducerPath.empty())
    if (Error err = writeFile(options.reproducerPath, report->reproducer + "\n",
                              FileAccess::OwnerOnly))
      return withContext(std::move(err), "the reproducer");
  return report;
}

} // namespace morpheus::runtime
