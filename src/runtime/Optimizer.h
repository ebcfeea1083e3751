// The optimizer loop for one program: keep the original loaded (it owns the
// maps and is the fallback), and on each cycle specialize a fresh clone of
// the pristine IR against the live maps, load it sharing every map, and hand
// it to whoever runs it (an XDP link, or a test).
#pragma once

#include "backend/bpf/Adoption.h"
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Guard.h"
#include "backend/bpf/PinDirectory.h"
#include "backend/bpf/Profile.h"
#include "backend/bpf/ProgramSpec.h"
#include "core/ExplorationCandidates.h"
#include "core/SpecializationCycle.h"
#include "core/TrafficProfile.h"
#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <chrono>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <iosfwd>
#include <set>
#include <string>

namespace morpheus::runtime {

struct OptimizerOptions {
  bpf::FrontendOptions frontend;
  // Where maps and the guard are pinned; "" pins nothing. Maps already
  // pinned there are reused, so a restarted Morpheus keeps the state.
  std::string pinDir;
  // Maps declared with `pinning = LIBBPF_PIN_BY_NAME`. Set (the loader of
  // the live data plane, `morpheus run`): the original re-uses the map
  // pinned at <pinRoot>/<name>, or pins its own there; "" = libbpf's
  // default, /sys/fs/bpf. Unset: pins are ignored and those maps are this
  // optimizer's own, whatever is pinned on the machine, as every load
  // Morpheus makes for its own purposes (bench, fuzz --preset) must be: it
  // neither opens nor writes a live map, nor pins one of its own.
  std::optional<std::string> pinRoot;
  // The entry program to run and attach; "" = the first XDP or TC program
  // (ProgramSpec::runnableEntry).
  std::string program;
  uint32_t inlineLimit = 64; // largest table inlined whole
  // The table passes to run, by their Passes.def names; unset runs them all.
  std::optional<std::vector<std::string>> tablePasses;
  // Prices table representations (default costs unless calibrated:
  // runtime/CostCalibration.h).
  core::CostModel costModel;
  // Pre-swap shadow validation (runtime/ShadowValidation): packets in the
  // sample, 0 = off. A refused candidate comes back with its reproducer.
  uint32_t shadowPackets = 64;
  // Following the traffic: lookup sites of tables too large to inline whole
  // record sampled keys (off: not instrumented), and each cycle puts the
  // heavy hitters in front of their lookups.
  core::TrafficProfileOptions traffic = [] {
    core::TrafficProfileOptions off;
    off.mode = core::ProfileMode::Off;
    return off;
  }();
  std::set<std::string> notProfiled; // tables never instrumented (--no-profile)
  // Adopting a program another loader attached (outlives the optimizer):
  // the owner's maps, matched to the source's by name, are reused by every
  // load (none created, none pinned), and the entry falls back to the
  // owner's program. The owner writes its maps without Morpheus: each cycle
  // polls them, and a change bumps the guard before anything is rebuilt.
  const bpf::Adoption *adoption = nullptr;
  // Maps another loader writes that are never specialized, rather than
  // polled (bpf::KeptGeneric): no version depends on them, so such a
  // writer's change holds from the next packet; a kept-generic program
  // array is shared by every version (its stages stay the live ones).
  bpf::KeptGeneric keptGeneric;
  core::FaultInjection faults; // test-only
};

// What every cycle asks of the pipeline for guard version `version`, from
// the options alone; a cycle adds what it read or learned (the loaded
// original's facts, the traffic's choice, the globals' live bytes).
// `morpheus explain` builds from the same request, so it reports the
// decisions a cycle makes.
bpf::SpecializeRequest cycleRequest(const OptimizerOptions &options, uint64_t version);

class Optimizer : private core::CycleBackend {
public:
  static Expected<std::unique_ptr<Optimizer>> create(const std::string &path,
                                                     OptimizerOptions options);
  ~Optimizer();

  // Runs one cycle (core::SpecializationCycle). `force` recompiles even
  // when nothing changed.
  core::CycleReport runCycle(bool force = false) { return cycle->run(force); }

  // Called with the new entry program fd after a successful load; when it
  // fails the new program is discarded and the running one stays.
  std::function<Error(int programFd)> install;

  // From now on, destruction leaves every pin (maps, guard, maps pinned by
  // name) in place: the program keeps serving after Morpheus (runtime/
  // Daemon's OnExit::KeepServing). Otherwise the pins this optimizer made
  // go, pins by name included (those it found pinned stay).
  void keepPins() { pinsOutliveUs = true; }

  // Whether `programId`, a version an earlier run (killed, or handing
  // over) left serving on a link this run takes over, may go on serving
  // until this optimizer's first cycle ends, so that a restart does not
  // slow the data plane: it checks our guard (the one that run left
  // pinned, kept by create()), so every update through Morpheus still
  // stops it trusting its tables; it falls back inside the program, or
  // through `earlierFallback` (that run's fallback array, which the caller
  // holds open since our pin replaced its pin) to programs of the same
  // code as our original's; and it reaches no other program array but the
  // live ones every version shares (a version's own stage arrays are
  // emptied as the run that loaded them exits). An adopted program's
  // version serves on only if its run kept it (bpf::Adoption::keepServed:
  // it depends on nothing polled, nor on any guard). Whatever it is, it
  // serves only until our first cycle ends.
  bool canServeOn(uint32_t programId, int earlierFallback) const;
  // Whether the installed version answers alike whatever the maps and the
  // program arrays hold: it was built from no table (each one it reads
  // kept generic, written by the data plane, or left out as unstable) and
  // has no stage array of its own. Nobody need poll or bump anything for
  // it, so it may serve on after this process (an adopted program's:
  // bpf::Adoption::keepServed).
  bool installedServesUnattended() const {
    return installed && installed->snapshot.empty() && installed->stages.empty();
  }

  // The table passes the cycles that follow run (unset: all of them):
  // a measured exploration (runtime/Exploration) builds each candidate
  // through an ordinary forced cycle with its passes, and leaves the chosen
  // ones for the cycles after it.
  void setTablePasses(std::optional<std::vector<std::string>> passes) {
    options.tablePasses = std::move(passes);
  }
  const std::optional<std::vector<std::string>> &tablePasses() const {
    return options.tablePasses;
  }
  // The table passes and the inline limit together, as an exploration
  // varies them (core::VersionSettings). The tables are read as far as the
  // inline limit the optimizer was created with asks: a limit set here
  // must not be higher (an exploration only lowers it).
  core::VersionSettings versionSettings() const {
    return {options.tablePasses, options.inlineLimit};
  }
  void setVersionSettings(core::VersionSettings settings) {
    options.tablePasses = std::move(settings.tablePasses);
    options.inlineLimit = settings.inlineLimit;
  }
  // Makes the original the running program again (the generic reference
  // an exploration measures): installs it as a version is installed, and
  // the specialized version retires, so the next cycle builds and installs
  // one whatever the tables hold.
  Error serveOriginal();
  // While on (an exploration's rounds), a version replaced by another or
  // by the original stays loaded, one per version settings, and a cycle
  // whose settings, guard version, tables (where read-only), stage arrays,
  // folded globals and traffic choice are those a kept version was built
  // for installs that version again: building it would give the same
  // object (a build depends on nothing else, which is also why a cycle
  // keeps running code it rebuilt byte for byte), which was validated and
  // verified when it was built. Off: the kept versions close, one install
  // later as every replaced version.
  void keepReplacedVersions(bool keep);

  // Test-only: faults for the cycles that follow (FaultInjection).
  void injectFaults(core::FaultInjection faults) { options.faults = faults; }

  // Pins removed behind Morpheus's back (an unlinked map, a deleted pin
  // directory) are pinned again, so control planes keep reaching the maps
  // and, above all, the guard; a pin path that now holds another object is
  // reported and left alone. One line per pin that needed attention.
  std::vector<std::string> repairPins();
  // The maps (and bpf::GuardMapName) whose pins in the pin directory no
  // longer hold them, checked now: removed, replaced, or their bpffs
  // unmounted. Empty without a pin directory, or adopted.
  std::vector<std::string> unpinnedObjects() const;

  // Bench only: the installed specialization built again from its
  // snapshot (its hot keys, compare chains as it had them) without the
  // program guard, loaded sharing every map but the stage arrays, which
  // are its own and hold its own stages as the installed version's do.
  // Timed beside the installed one, it says what the guard costs. Its code is correct only while the
  // tables hold that snapshot: never attached.
  Expected<bpf::LoadedObject> loadUnguardedTwin() const;

  const bpf::ProgramSpec &spec() const { return *programSpec; }
  const std::string &entryName() const { return entry; }
  int originalFd() const;      // the original entry program
  // The original's load: every program of the object, on the live maps.
  const bpf::LoadedObject &originalObject() const { return *original; }
  int activeFd() const;        // the specialized one if installed, else original
  int mapFd(const std::string &name) const; // any map the versions share
  bpf::GuardWord &guard() { return guardWord; }
  const std::string &pinDir() const { return options.pinDir; }
  uint64_t installedVersion() const { return installed ? installed->version : 0; }
  double startupMs() const { return loadMs; }
  // Where startup went: building the source (ProgramSpec::loadPhases), then
  // loading and verifying the original, the fallback array, the pins.
  const std::vector<core::BuildPhase> &startupPhases() const { return startup; }
  bool adopted() const { return options.adoption != nullptr; }
  // Adopted programs: the maps whose contents changed in most of the last
  // cycles (UnstableWindow), left to the generic code rather than inlined.
  const std::set<std::string> &unstableTables() const { return unstable; }
  static constexpr size_t UnstableWindow = 8;

private:
  Optimizer(OptimizerOptions options, bpf::GuardWord guard)
      : options(std::move(options)), guardWord(std::move(guard)) {}
  Error load(const std::string &path);
  Error pinAll();
  // What repairPins and unpinnedObjects check: every map by name, and the
  // guard.
  std::vector<std::pair<std::string, int>> pinnedObjects() const;
  // Adopted programs: the owner's bytes of every read-only global its
  // loader changed before load, by global (empty when none changed).
  Expected<std::map<std::string, std::vector<char>>> ownerReadOnlyGlobals() const;
  void unpinAll();

  // The steps of the cycle (core::CycleBackend): read the maps, specialize
  // and load (again with less if the kernel refuses: Withheld), shadow-
  // validate, install.
  struct Candidate : core::CycleCandidate {
    Candidate(std::vector<char> elf, std::vector<char> comparedElf, bpf::LoadedObject loaded,
              std::chrono::steady_clock::time_point loadStart)
        : elf(std::move(elf)), comparedElf(std::move(comparedElf)), loaded(std::move(loaded)),
          loadStart(loadStart) {}
    std::vector<char> elf;
    std::vector<char> comparedElf; // what shadow validation runs (SpecializedObject)
    bpf::LoadedObject loaded; // sharing every map with the running version
    std::chrono::steady_clock::time_point loadStart; // injection time counts from here
    // Programs taken from the installed version as loaded (not in `loaded`).
    std::set<std::string> reused;
  };
  uint64_t guardVersion() const override { return guardWord.version(); }
  bool guardChanging() const override { return guardWord.changing(); }
  const core::TableCatalog &catalog() const override { return programSpec->catalog(); }
  core::ReadPlan readPlan() const override { return plan; }
  std::optional<core::TableSnapshot> readTables(const core::ReadPlan &cyclePlan,
                                                core::CycleReport &report) override;
  bool installedFits(const core::TableSnapshot &snapshot,
                     const core::CycleReport &report) const override;
  std::unique_ptr<core::CycleCandidate> buildCandidate(core::TableSnapshot &snapshot,
                                                       const core::TrafficChoice &traffic,
                                                       core::CycleReport &report) override;
  bool validateCandidate(const core::CycleCandidate &candidate,
                         const core::TableSnapshot &snapshot, core::CycleReport &report) override;
  Error installCandidate(std::unique_ptr<core::CycleCandidate> candidate,
                         core::TableSnapshot snapshot, core::CycleReport &report) override;
  // Adopted programs: counts which maps of `read` changed since the last
  // poll, drops the unstable ones from it, and says whether the installed
  // version was built from other contents than `read` holds now, or from
  // other stages than the owner's program arrays hold (cycleStages).
  bool ownerChanged(core::TableSnapshot &read);
  Error checkFrozenSectionsAgree(const std::map<std::string, int> &ownerMaps) const;
  // The program arrays each version gets a copy of, with the version's own
  // programs in the slots where the live array holds the original's (by
  // name): its tail calls then reach the specialized stages. An array with
  // a slot holding any other program (another object's, an adopted
  // owner's), or kept generic, is not copied: the version shares the live
  // one.
  Expected<bpf::ProgramSlots> stageArrays() const;
  // Loads a version's object sharing the live maps except the arrays of
  // `stages`, which libbpf makes the version's own (empty); a
  // VerifierRejection when the kernel refused one of its programs.
  Expected<bpf::LoadedObject> loadVersion(const std::vector<char> &elf,
                                          const bpf::ProgramSlots &stages) const;
  // programFacts, with how many tail calls may come before each program
  // in a version whose program arrays hold `stages` (an adopted program's
  // versions run behind the trampoline's tail call).
  std::map<std::string, bpf::ProgramFacts> factsFor(const bpf::ProgramSlots &stages) const;
  // Fills a version's own stage arrays, slot by slot, with its programs of
  // the names the live arrays hold (`reused`: name -> fd of those it takes
  // from the installed version).
  static Error fillVersionStages(bpf::LoadedObject &version, const bpf::ProgramSlots &stages,
                                 const std::map<std::string, int> &reused = {});
  // The tables whose read-only bytes differ between `snapshot` and the
  // installed version's, and, when one no program's code names changed
  // (an inner map reached through a map of maps, which could be behind any
  // program), why every program may depend on the change.
  struct TableChanges {
    std::set<std::string> tables;
    std::string reachesAll;
  };
  TableChanges changedSinceInstalled(const core::TableSnapshot &snapshot) const;
  // `built` (a partial build's folded globals) and the installed version's.
  std::vector<core::GlobalCheck> withReusedChecks(std::vector<core::GlobalCheck> built) const;
  // The programs a version built for this cycle takes from the installed
  // one as they are loaded ("reused programs"): built restampable, and
  // nothing else they were built from changed: none of their tables, the
  // stage arrays, the traffic's choice, the folded globals, the version
  // settings. None while versions are kept (an exploration) or before the
  // first install.
  std::set<std::string> reusablePrograms(const core::TableSnapshot &snapshot,
                                         const core::TrafficChoice &traffic) const;
  // The programs the candidate's validation must load: all of them, or,
  // after a version was installed, the entry, each program whose code or
  // tables changed, and each that tail-calls (it may lead to a changed one).
  Expected<core::ValidationScope> validationScope(const core::CycleReport &report,
                                                  const Candidate &candidate,
                                                  const core::TableSnapshot &snapshot) const;

  OptimizerOptions options;
  std::unique_ptr<bpf::ProgramSpec> programSpec;
  std::string entry;
  core::ReadPlan plan;
  bpf::GuardWord guardWord;
  double loadMs = 0;
  std::vector<core::BuildPhase> startup;
  int fallbackFd = -1;
  // Per program of the original: its fallback slot, what verifying it cost.
  std::map<std::string, bpf::ProgramFacts> programFacts;
  std::map<std::string, int> sharedMaps; // reused by every version
  std::map<std::string, int> reusedPins; // fds opened from existing pins
  // What every live load (original, versions) starts from: for an adopted
  // program, the owner's expected attach type; empty otherwise.
  bpf::LoadOptions ownerLoad;
  // The pins of a live run (OptimizerOptions::pinDir; none when adopted).
  std::optional<bpf::PinDirectory> pins;
  std::optional<bpf::LoadedObject> original;
  // Per program of the original, read at load: its code, whose maps are the
  // tables its specialization may depend on (validationScope).
  std::map<std::string, bpf::LoadedObject::Code> originalCode;
  // The running specialized version and what it was built from; none
  // before the first install.
  // A program of a version that reads the guard version it expects from
  // its slot of its object's version array (bpf::VersionArraySection), so
  // that later versions can reuse it as loaded: the descriptors keep the
  // program and the array when the object that loaded them closes.
  struct Restampable {
    FileDescriptor program;
    FileDescriptor versions; // none: the program has no guard to stamp
    unsigned slot = 0;
  };
  // The programs of the object (all but the entry and those that make tail
  // calls or register callbacks) its versions build restampable.
  std::set<std::string> restampable;
  struct Installed {
    bpf::LoadedObject object;
    // Its restampable programs, its own and those it reused, by name.
    std::map<std::string, Restampable> restampable;
    core::VersionSettings settings; // what it was built with
    bpf::ProgramSlots stages;     // its stage arrays (stageArrays)
    uint64_t version = 0;         // the guard version it is valid for
    core::TableSnapshot snapshot; // the tables it was built from
    std::vector<core::GlobalCheck> checks; // the global bytes it folded (and checks)
    std::vector<char> elf;
  };
  std::optional<Installed> installed;
  // Whether `version` was built for what this cycle read: its guard
  // version, stage arrays, read-only tables and folded globals.
  bool builtForThisCycle(const Installed &version, const core::TableSnapshot &snapshot,
                         const core::CycleReport &report) const;
  // What a version was built with besides its tables, and its build's log,
  // for installing it again (keepReplacedVersions).
  struct BuiltWith {
    core::VersionSettings settings;
    core::TrafficChoice traffic;
    core::SpecializationLog log;
    uint64_t cycle = 0;
  };
  std::optional<BuiltWith> installedBuild; // set while keeping
  struct Kept {
    Installed version;
    BuiltWith build;
  };
  bool keeping = false;
  std::vector<Kept> kept;
  // Keeps the installed version (keepReplacedVersions) or retires it.
  void replaceInstalled();
  // A kept version fitting this cycle, taken out of `kept`, as a candidate.
  std::unique_ptr<core::CycleCandidate> keptCandidate(const core::TableSnapshot &snapshot,
                                                      const core::TrafficChoice &traffic,
                                                      core::CycleReport &report);
  // The versions replaced since the last install (and the kept ones when
  // keeping stops): packets still running them (until the kernel's grace
  // period ends) tail-call through their stage arrays, which the kernel
  // empties when the object closes. Closed one install later.
  std::vector<bpf::LoadedObject> retired;
  // The stage arrays (stageArrays) and the globals as this cycle read them.
  bpf::ProgramSlots cycleStages;
  core::GlobalValues cycleGlobals;
  // What a specialization leaves out after the kernel refused one built
  // from the same snapshot, step by step: each step leaves out what the
  // one before did, and more. Compare chains (with the derived tables and
  // fast paths that honour the switch) multiply the verifier's work;
  // regions (region-as-table) hand the program values from a table.
  enum class Withheld { Nothing, CompareChains, Regions };
  // The snapshot whose specializations the kernel refused (the first
  // refusal's cycle and reason) and the last step it refused: a later
  // cycle on the same snapshot starts at the step after it, or, when the
  // last step was refused too, fails without asking the kernel again.
  struct Rejection {
    core::TableSnapshot snapshot;
    // The passes the refused specializations ran: another set of passes
    // (an exploration's candidate) builds other code, not refused yet.
    std::optional<std::vector<std::string>> tablePasses;
    uint64_t cycle = 0;
    std::string reason;
    Withheld refused = Withheld::Nothing;
  };
  std::optional<Rejection> rejection;
  // The step a specialization of `snapshot` takes (after the one the kernel
  // last refused for it); none when it refused every step.
  std::optional<Withheld> stepFor(const core::TableSnapshot &snapshot) const;
  // Sets what `request` leaves out at `step`, each with "... off" + `why`.
  static void withhold(bpf::SpecializeRequest &request, Withheld step, const std::string &why);
  // Following the traffic (OptimizerOptions::traffic): the maps its
  // versions record into; null when off.
  std::unique_ptr<bpf::TrafficMaps> trafficMaps;
  // The cycle over this backend, made once the maps are loaded.
  std::optional<core::SpecializationCycle> cycle;
  bool pinsOutliveUs = false;
  // Adopted programs: per map, whether it changed in each recent cycle.
  std::map<std::string, std::vector<bool>> changeHistory;
  std::set<std::string> unstable;
  core::TableSnapshot lastPoll;
};

} // namespace morpheus::runtime
