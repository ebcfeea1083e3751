// The specialization cycle, one for every backend: follow the traffic,
// read what the passes need under the guard's version, specialize, check
// the tables did not move, validate, install. What differs between the
// eBPF backend (runtime/Optimizer: maps, the kernel's loader and verifier,
// XDP links) and the user-space one (user::Handler: tables in the process,
// the ORC JIT, the trampoline) is behind CycleBackend; the order of the
// steps, their outcomes, and everything the traffic decides
// (core/TrafficFollowing) are here, once, so both backends get every
// traffic optimization and every check from the same code.
#pragma once

#include "core/PhaseClock.h"
#include "core/SpecializationLog.h"
#include "core/Tables.h"
#include "core/TrafficFollowing.h"
#include "core/TrafficProfile.h"
#include "support/Error.h"

#include <cstdint>
#include <iosfwd>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

struct CycleTimes {
  double analysisMs = 0;   // t1: read the tables, decide
  double codegenMs = 0;    // t2: passes, O2, code generation
  double injectionMs = 0;  // load (JIT-compile) and swap
  double validationMs = 0; // shadow validation (not part of injection)
  // Where validation and injection went (the load and verification of the
  // version, its stage arrays, the install).
  std::vector<BuildPhase> validationPhases, injectionPhases;
};

// What a cycle did. Callers decide on the kind; `detail` is for people.
enum class CycleOutcome {
  Installed,  // a new specialized version now runs
  Unchanged,  // the running version already fits the tables (and guard)
  Deferred,   // a control-plane change is in progress; nothing was read
  Superseded, // a table changed during the cycle; the new code was discarded
  Failed,     // table read, compile, load, verifier or install error
  Refused,    // shadow validation found a difference; the code was discarded
};

// "installed", "failed", ...
const char *outcomeName(CycleOutcome outcome);
std::ostream &operator<<(std::ostream &out, CycleOutcome outcome);

// What a cycle's shadow validation ran its copies of, and what it left out
// and why.
struct ValidationScope {
  // The programs every copy loaded (the entry, the changed ones, those
  // whose tail calls may reach them); empty: the whole program.
  std::vector<std::string> validated;
  // Left out: code identical to the installed version's (tables by name),
  // reading no table that changed since that version was validated.
  std::vector<std::string> skipped;
  // Why the whole program was validated, when it was.
  std::string whyWhole;
  // Sample packets (and the table comparison) on which the witness
  // disagreed with the original (nondeterministic code).
  uint32_t nondeterministic = 0;
};

struct CycleReport {
  uint64_t cycle = 0;
  uint64_t version = 0; // guard version the new code is valid for
  CycleOutcome outcome = CycleOutcome::Failed;
  // Why, for Failed, Refused, Superseded and Deferred: the error's message,
  // or the difference shadow validation found.
  std::string detail;
  // Refused only: the difference as JSON (packets, both versions' results),
  // and a key that is equal for equal differences (not for each sample).
  std::string reproducer;
  std::string differenceKey;
  CycleTimes times;
  SpecializationLog log;
  ValidationScope validation;
  // The programs the new version took from the running one as they are
  // (their tables unchanged since it was built): not built, loaded or
  // validated again, only told the new guard version.
  std::vector<std::string> reused;
  // Per profiled site id, what the traffic decided this cycle.
  std::map<unsigned, SiteTraffic> traffic;
  // Per site with a fast path in the version installed before this cycle,
  // its hits as the samples this cycle counted tell (TrafficFollower).
  std::map<unsigned, FastPathHits> fastPathHits;
  // The write counts the version's fast paths over tables the data plane
  // writes are built under, by bucket, read before the snapshot.
  std::map<uint32_t, uint64_t> writeCounts;
  size_t instructions = 0; // of the installed entry program, as it runs (eBPF: xlated)
  // What verifying the installed entry program cost (verified_insns), if
  // the kernel says.
  std::optional<uint64_t> verifiedInstructions;
  // Candidates the loader refused this cycle (each one rebuilt with less).
  unsigned refusedByKernel = 0;
  // Set when the cycle installed again a version an earlier cycle (this
  // one) built, validated and loaded, kept loaded since it was replaced
  // (an exploration's rounds): nothing was built, validated or loaded.
  std::optional<uint64_t> reinstalledFrom;

  bool installed() const { return outcome == CycleOutcome::Installed; }
  // One line for people: "installed", "failed: <detail>", ...
  std::string describe() const;
  // Ends the cycle: what its steps return through the report.
  void end(CycleOutcome ended, std::string why = "") {
    outcome = ended;
    detail = std::move(why);
  }
  void fail(Error err) { end(CycleOutcome::Failed, llvm::toString(std::move(err))); }
};

// Why a cycle was Superseded: its code was built from tables that moved.
inline constexpr const char *TableChangedDuringCycle = "a table changed during the cycle";

// A version built and loaded but not yet running; each backend's own.
class CycleCandidate {
public:
  virtual ~CycleCandidate() = default;
};

// What a backend does for the cycle. A step that ends the cycle sets the
// report's outcome (report.end, report.fail) and returns nothing or false.
class CycleBackend {
public:
  virtual ~CycleBackend() = default;

  // The guard word every specialized version checks.
  virtual uint64_t guardVersion() const = 0;
  virtual bool guardChanging() const = 0;
  virtual const TableCatalog &catalog() const = 0;
  // What the passes need read, before the traffic's probes.
  virtual ReadPlan readPlan() const = 0;

  // Reads `plan`, and whatever else the backend's versions are built
  // under. May bump the guard (an adopted program's owner wrote a table
  // without it) and set report.version to the new version.
  virtual std::optional<TableSnapshot> readTables(const ReadPlan &plan, CycleReport &report) = 0;
  // Whether the installed version was built from what `snapshot` holds
  // where the program reads, and from the same guard version (the
  // traffic's choice is compared by the cycle). False before any.
  virtual bool installedFits(const TableSnapshot &snapshot, const CycleReport &report) const = 0;
  // Specializes for `snapshot` and `traffic` and loads the result. Ends
  // the cycle as Unchanged when the code is the installed version's.
  virtual std::unique_ptr<CycleCandidate> buildCandidate(TableSnapshot &snapshot,
                                                         const TrafficChoice &traffic,
                                                         CycleReport &report) = 0;
  // Runs the candidate and the generic code side by side on copies of the
  // tables (off: true at once). Ends the cycle as Refused on a difference,
  // or Superseded when the tables moved under the copies.
  virtual bool validateCandidate(const CycleCandidate &candidate,
                                 const TableSnapshot &snapshot, CycleReport &report) = 0;
  // Makes the candidate the running version.
  virtual Error installCandidate(std::unique_ptr<CycleCandidate> candidate,
                                 TableSnapshot snapshot, CycleReport &report) = 0;
};

class SpecializationCycle {
public:
  // `traffic` null: versions are not instrumented, no fast paths.
  SpecializationCycle(CycleBackend &backend, TrafficProfileOptions trafficOptions,
                      TrafficSource *traffic)
      : backend(&backend), follower(trafficOptions, traffic) {}

  // One cycle. `force` builds a version even when the installed one fits.
  CycleReport run(bool force = false);

  TrafficFollower &traffic() { return follower; }
  const TrafficFollower &traffic() const { return follower; }
  uint64_t cycles() const { return count; }

private:
  CycleBackend *backend;
  TrafficFollower follower;
  uint64_t count = 0;
};

} // namespace morpheus::core
