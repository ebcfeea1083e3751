// A user-space handler kept specialized: the C file compiled once to
// pristine IR (clang-19 -O2 for the host), its tables made from its
// MU_TABLE definitions, the generic version JIT-compiled and installed in
// the trampoline at load; then, every cycle (specialize()), the core's
// pipeline on a copy of the pristine IR (in a context of its own, gone
// with the version) for what the tables hold now,
// behind the program guard, JIT-compiled and swapped in through the
// trampoline when the guard word has not moved meanwhile.
#pragma once

#include "backend/user/Jit.h"
#include "backend/user/Profile.h"
#include "backend/user/WriteCounters.h"
#include "backend/user/TableSet.h"
#include "backend/user/UserSignatures.h"
#include "core/FaultInjection.h"
#include "core/LookupGenerator.h"
#include "core/PristineBitcode.h"
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
  // else one derived from its code (core/passes/PrefetchStage.h); always
  // the derived one (to compare it with the handler's); or none.
  enum class Prefetch { OwnElseDerived, Derived, None };
  Prefetch prefetch = Prefetch::OwnElseDerived;
};

// Where the handler's prefetch function (Handler::prefetcher) comes from.
struct PrefetchStageOrigin {
  enum class Kind {
    None,    // none: none asked for, or none written and none derived
    Written, // the handler's own MU_PREFETCH function
    Derived, // derived from the handler (core/passes/PrefetchStage.h)
  };
  Kind kind = Kind::None;
  std::vector<std::string> tables; // Derived: the tables it prefetches
  std::string declined;            // None: why none was derived
};
// "the handler's own", "derived: prefetches routes", "none (...)".
std::string describe(const PrefetchStageOrigin &origin);

// What one specialization cycle did.
struct Cycle {
  enum class Outcome {
    Installed, // the specialized version now runs
    Deferred,  // a control-plane change was in progress: nothing compiled
    Discarded, // the tables changed while it compiled: not installed
  };
  Outcome outcome = Outcome::Deferred;
  uint64_t version = 0;         // the guard version it was built for
  core::SpecializationLog log;  // per site, what the passes decided
  // Per profiled site: its hot keys, sampling period, churn, and why.
  std::map<unsigned, core::SiteTraffic> traffic;
  // The write counters its fast paths over tables the handler writes are
  // built under, by bucket, read before the snapshot (WriteCounters).
  std::map<uint32_t, uint64_t> writeCounts;
  std::chrono::microseconds passes{0}, jit{0};
};

class Handler {
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
  // generic code is inlined behind the guard), JIT-compiles, and installs
  // unless the guard moved or a change is in progress.
  Expected<Cycle> specialize();

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
  Expected<Cycle> specialize(const core::PointConfiguration &configuration);

  // With HandlerOptions::traffic: reads what the installed version's
  // profiled sites sampled since the last read into the traffic profile
  // (each cycle does too). A site keeps its last Profile::Slots samples,
  // so a loop calls this between bursts at least every Slots x period
  // lookups of a site to lose none.
  void recordTraffic();

  // The pipeline's output for the current tables, without installing it
  // (for tests and reports): the specialized IR as text.
  Expected<std::string> specializedIR();

  // Builds and JIT-compiles a specialized version without installing it;
  // the cycle's outcome says whether specialize() would install it.
  Expected<std::pair<Cycle, VersionHandle>> build();

private:
  Handler(HandlerOptions options)
      : options(std::move(options)), trafficProfile(this->options.traffic.value_or(
                                         core::TrafficProfileOptions{})) {}
  // The version's module for `cycle`, in a context of its own; none while
  // a control-plane change is in progress.
  Expected<llvm::orc::ThreadSafeModule> specializedModule(Cycle &cycle);
  // Whether the next cycles run table pass `pass` (HandlerOptions::tablePasses).
  bool runsTablePass(const std::string &pass) const;
  // Whether versions record sampled keys and get fast paths
  // (HandlerOptions::traffic, not off).
  bool followsTraffic() const {
    return options.traffic && options.traffic->mode != core::ProfileMode::Off;
  }
  // Counts what the profiled sites sampled since the last cycle, sets
  // their periods and chooses their hot keys (hotKeys).
  void followTraffic(Cycle &cycle);
  // After `cycle`'s version is installed: the sites it records sample from
  // now on, the others no longer.
  void startSampling(const Cycle &cycle);
  // Whether the handler wrote a key of `table` the installed version's fast
  // path at `site` answers since that version was built: its per-entry
  // guard fired (for churn, core::TrafficProfile::writesInvalidated).
  bool writesInvalidated(unsigned site, const std::string &table) const;

  HandlerOptions options;
  llvm::orc::ThreadSafeContext context;
  std::unique_ptr<llvm::Module> pristine;
  core::PristineBitcode pristineBitcode; // what every version is parsed from
  std::unique_ptr<TableSet> tableSet;
  Profile profile;
  WriteCounters writes;
  core::TrafficProfile trafficProfile;
  std::map<unsigned, core::ProfiledSite> profiledSites; // by the installed version
  std::map<unsigned, std::vector<Bytes>> hotKeys;       // per site, for the next version
  std::map<unsigned, std::vector<Bytes>> installedHotKeys; // per site, of the installed version
  std::map<uint32_t, uint64_t> installedWriteCounts;       // its Cycle::writeCounts
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
