// A user-space handler kept specialized: the C file compiled once to
// pristine IR (clang-19 -O2 for the host), its tables made from its
// MU_TABLE definitions, the generic version JIT-compiled and installed in
// the trampoline at load; then, every cycle (specialize(): the one cycle of
// every backend, core::SpecializationCycle, over this backend's steps), the
// core's pipeline on a copy of the pristine IR (in a context of its own,
// gone with the version) for what the tables hold now, behind the program
// guard, JIT-compiled, validated against the generic version on copies of
// the tables, and swapped in through the trampoline when the guard word
// has not moved meanwhile.
#pragma once

#include "backend/user/Jit.h"
#include "backend/user/Profile.h"
#include "backend/user/ShadowCopies.h"
#include "backend/user/WriteCounters.h"
#include "backend/user/TableSet.h"
#include "backend/user/UserSignatures.h"
#include "core/FaultInjection.h"
#include "core/LookupGenerator.h"
#include "core/PristineBitcode.h"
#include "core/SpecializationCycle.h"
#include "core/SpecializationLog.h"
#include "core/SpecializationPoints.h"
#include "core/TrafficProfile.h"
#include "support/CacheDirectory.h"
#include "support/Error.h"

#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/IR/Module.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace morpheus::user {

// The handler the event loop calls. A loop enters a burst (enter()),
// which reads the installed version once; the whole burst runs on it and
// the next burst runs whatever was installed meanwhile: no packet is lost
// or handled twice by a swap. install() keeps a handle to what it
// replaces until no burst can still be inside it: the burst boundary is
// the quiescent point. A version replaced while no burst is under way is
// let go at once; otherwise when the last burst under way ends (or at the
// next install, whichever first sees none). Whether a burst can still be
// inside: `inside` counts bursts entered and not left; enter() counts
// before it reads the version and install() stores the version before it
// reads the count (both sequentially consistent), so a burst that install
// saw as not entered reads the new version.
class Trampoline {
public:
  class Burst {
  public:
    explicit Burst(Trampoline &trampoline)
        : trampoline(&trampoline), function(trampoline.enterBurst()) {}
    ~Burst() {
      if (trampoline)
        trampoline->leaveBurst();
    }
    Burst(Burst &&other) noexcept
        : trampoline(std::exchange(other.trampoline, nullptr)), function(other.function) {}
    Burst(const Burst &) = delete;
    Burst &operator=(const Burst &) = delete;
    Burst &operator=(Burst &&) = delete;

    HandlerFunction handler() const { return function; }

  private:
    Trampoline *trampoline;
    HandlerFunction function;
  };

  // The start of a burst: the version every packet of it runs on.
  Burst enter() { return Burst(*this); }
  // The installed version's entry (null before the first install).
  HandlerFunction current() const { return function.load(std::memory_order_acquire); }
  // The installed version.
  VersionHandle installed() const;
  // Makes `version` the one the next burst runs.
  void install(VersionHandle version);
  // Versions replaced but held because a burst may be inside them.
  size_t retiredVersions() const;

private:
  HandlerFunction enterBurst();
  void leaveBurst();
  // Drops the replaced versions when no burst is under way.
  void releaseRetired();

  std::atomic<HandlerFunction> function{nullptr};
  std::atomic<uint64_t> inside{0};
  std::atomic<bool> anyRetired{false};
  mutable std::mutex mutex; // guards running and retired
  VersionHandle running;
  std::vector<VersionHandle> retired;
};

struct HandlerOptions {
  std::string entry;                // the MU_HANDLER function to run
  std::vector<std::string> cflags;  // passed to clang (-I, -D)
  // Where clang's bitcode is kept across runs (under bitcode/,
  // support/Clang.h); unset: always compile.
  std::optional<std::string> buildCache = cacheDirectory();
  uint32_t inlineLimit = 64;        // largest table inlined whole (entries)
  core::FaultInjection faults;      // test-only (core/FaultInjection.h)
  // The table passes to run, by their Passes.def names, in order (the
  // policy's custom pipeline, Iridescent's customize_opts); unset: all.
  // specialization-points always runs first (markers must not reach the
  // JIT).
  std::optional<std::vector<std::string>> tablePasses;
  // Follow the traffic (unset: off): specialized versions record sampled
  // keys of the lookups a fast path could serve (instrument-table-sites,
  // into the handler's Profile), and each cycle puts every such site's
  // heavy hitters, with their answers, in front of its lookup
  // (heavy-hitter-fast-path), as core::TrafficProfile decides. Tables the
  // handler writes get fast paths too: every version, the generic one
  // included, counts their writes per key (guard-table-writes into
  // WriteCounters), and a hot key is answered only while no write of it
  // was counted since its answer was read.
  std::optional<core::TrafficProfileOptions> traffic;
  // Custom generators (core/LookupGenerator.h, Generators.h: Iridescent's
  // add_custom_spec): the first serving a table makes its lookups' code
  // each cycle while custom-generator is among the table passes; the
  // tables they serve are read whole (up to core::GeneratorReadLimit).
  std::vector<core::LookupGenerator> generators;
  // The prefetch function sub-batches call: the handler's own (MU_PREFETCH),
  // else one derived from its code (core/PrefetchStage.h); always
  // the derived one (to compare it with the handler's); or none.
  enum class Prefetch { OwnElseDerived, Derived, None };
  Prefetch prefetch = Prefetch::OwnElseDerived;
  // Pre-swap shadow validation (ShadowCopies): each cycle's candidate runs
  // beside the generic handler, on copies of the tables, on `packets`
  // packets `samples` makes from the cycle's snapshot and a seed (the
  // runtime aims them at the tables' keys: runtime/UserShadowSamples.h);
  // a difference refuses it. Unset, or no packets: off.
  struct Shadow {
    uint32_t packets = 64;
    std::function<std::vector<ShadowPacket>(const core::TableCatalog &,
                                            const core::TableSnapshot &, uint64_t seed,
                                            uint32_t count)>
        samples;
  };
  std::optional<Shadow> shadow;
};

// Where the handler's prefetch function (Handler::prefetcher) comes from.
struct PrefetchStageOrigin {
  enum class Kind {
    None,    // none: none asked for, or none written and none derived
    Written, // the handler's own MU_PREFETCH function
    Derived, // derived from the handler (core/PrefetchStage.h)
  };
  Kind kind = Kind::None;
  std::vector<std::string> tables; // Derived: the tables it prefetches
  std::string declined;            // None: why none was derived
};
// "the handler's own", "derived: prefetches routes", "none (...)".
std::string describe(const PrefetchStageOrigin &origin);

class Handler : private core::CycleBackend {
public:
  // Compiles `path` (.c, or .ll/.bc already for the host), makes its
  // tables, JIT-compiles the generic version and installs it.
  static Expected<std::unique_ptr<Handler>> load(const std::string &path,
                                                 const HandlerOptions &options);

  TableSet &tables() { return *tableSet; }
  Trampoline &trampoline() { return handlerSlot; }
  HandlerFunction generic() const { return genericHandle->entry(); }
  // The generic version (kept as long as the handler).
  const VersionHandle &genericVersion() const { return genericHandle; }
  // The JIT-compiled versions alive (Jit::liveVersions): the generic one,
  // the installed one, and those a caller or a burst still holds.
  size_t liveVersions() const { return jit->liveVersions(); }
  // The handler's MU_PREFETCH function (`ENTRY_prefetch`), else the one
  // derived from its code, or null: the event loop's sub-batches call it
  // (EventLoop). The same for every version (derived from the generic one).
  PrefetchFunction prefetcher() const { return prefetchFunction; }
  const PrefetchStageOrigin &prefetchOrigin() const { return prefetchStage; }
  const std::string &name() const { return options.entry; }
  // The handler's IR as compiled, never specialized (analyses, reports).
  const llvm::Module &pristineModule() const { return *pristine; }
  const UserSignatures &accessSignatures() const { return signatures; }

  // One cycle: reads the guard version, the tables the passes need, runs
  // the core's pipeline with the program guard (in-program fallback: the
  // generic code is inlined behind the guard), JIT-compiles, validates, and
  // installs unless the guard moved or a change is in progress. A failed
  // cycle is the error; every other outcome is the report's.
  Expected<core::CycleReport> specialize();

  // The handler's specialization points (morpheus_spec.h), by label, with
  // the values each may take: Iridescent's spec_space.
  const std::vector<core::SpecializationPoint> &specializationSpace() const { return space; }
  // The points the next cycles assume (Iridescent's specialize(config)):
  // checked against the space; the others stay disabled.
  Error configure(const core::PointConfiguration &configuration);
  const core::PointConfiguration &configuration() const { return points; }
  // The table passes the next cycles run (HandlerOptions::tablePasses);
  // an unknown name is an error naming it.
  Error customizePasses(std::vector<std::string> passes);
  // Registers a custom generator for the next cycles (HandlerOptions::generators).
  void addGenerator(core::LookupGenerator generator) {
    options.generators.push_back(std::move(generator));
  }
  // configure(configuration), then one cycle.
  Expected<core::CycleReport> specialize(const core::PointConfiguration &configuration);

  // With HandlerOptions::traffic: reads what the installed version's
  // profiled sites sampled since the last read into the traffic profile
  // (each cycle does too). A site keeps its last Profile::Slots samples,
  // so a loop calls this between bursts at least every Slots x period
  // lookups of a site to lose none.
  void recordTraffic() { llvm::cantFail(cycle->traffic().record()); }

  // The pipeline's output for the current tables, without installing it
  // (for tests and reports): the specialized IR as text.
  Expected<std::string> specializedIR();

private:
  Handler(HandlerOptions options) : options(std::move(options)) {}
  struct Candidate : core::CycleCandidate {
    explicit Candidate(VersionHandle version) : version(std::move(version)) {}
    VersionHandle version;
    core::PristineBitcode bitcode; // what shadow validation compiles again
  };
  bool validates() const { return options.shadow && options.shadow->packets > 0; }
  // The steps of the cycle (core::CycleBackend).
  uint64_t guardVersion() const override { return tableSet->guard().version(); }
  bool guardChanging() const override { return tableSet->guard().changing(); }
  const core::TableCatalog &catalog() const override { return tableSet->catalog(); }
  core::ReadPlan readPlan() const override;
  std::optional<core::TableSnapshot> readTables(const core::ReadPlan &plan,
                                                core::CycleReport &report) override;
  // Every cycle builds: configure() and customizePasses() change what a
  // version is made of without touching the tables, and the JIT is cheap.
  bool installedFits(const core::TableSnapshot &, const core::CycleReport &) const override {
    return false;
  }
  std::unique_ptr<core::CycleCandidate> buildCandidate(core::TableSnapshot &snapshot,
                                                       const core::TrafficChoice &traffic,
                                                       core::CycleReport &report) override;
  bool validateCandidate(const core::CycleCandidate &candidate,
                         const core::TableSnapshot &snapshot, core::CycleReport &report) override;
  Error installCandidate(std::unique_ptr<core::CycleCandidate> candidate,
                         core::TableSnapshot snapshot, core::CycleReport &report) override;
  // The version's module for `snapshot`, guard `version` and `traffic`, in
  // a context of its own; what the passes decided goes to `log`.
  Expected<llvm::orc::ThreadSafeModule> specializedModule(const core::TableSnapshot &snapshot,
                                                          uint64_t version,
                                                          const core::TrafficChoice &traffic,
                                                          core::SpecializationLog &log);
  // Whether the next cycles run table pass `pass` (HandlerOptions::tablePasses).
  bool runsTablePass(const std::string &pass) const;
  // Whether versions record sampled keys and get fast paths
  // (HandlerOptions::traffic, not off).
  bool followsTraffic() const {
    return options.traffic && options.traffic->mode != core::ProfileMode::Off;
  }

  HandlerOptions options;
  llvm::orc::ThreadSafeContext context;
  std::unique_ptr<llvm::Module> pristine;
  core::PristineBitcode pristineBitcode; // what every version is parsed from
  core::PristineBitcode genericBitcode;  // the generic version's module
  std::unique_ptr<ShadowCopies> shadowCopies; // made at the first validation
  std::unique_ptr<TableSet> tableSet;
  Profile profile;
  WriteCounters writes;
  TrafficStorage trafficStorage{profile, writes};
  std::optional<core::SpecializationCycle> cycle; // made at load
  std::shared_ptr<Jit> jit;
  UserSignatures signatures;
  VersionHandle genericHandle;
  Trampoline handlerSlot; // after jit and genericHandle: let go of its versions first
  PrefetchFunction prefetchFunction = nullptr;
  PrefetchStageOrigin prefetchStage;
  std::vector<core::SpecializationPoint> space;
  core::PointConfiguration points;
  unsigned versions = 0;
};

// The directory holding morpheus_user.h, for handlers' -I.
const char *apiIncludeDirectory();

} // namespace morpheus::user
