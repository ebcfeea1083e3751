#include "core/SpecializationCycle.h"

#include <chrono>
#include <ostream>

namespace morpheus::core {

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
  if (reinstalledFrom)
    text += " again: the version cycle " + std::to_string(*reinstalledFrom) +
            " built, kept loaded (nothing built, validated or loaded)";
  if (!detail.empty())
    text += ": " + detail;
  return text;
}

CycleReport SpecializationCycle::run(bool force) {
  using Clock = std::chrono::steady_clock;
  CycleReport report;
  report.cycle = ++count;
  auto start = Clock::now();
  if (Error err = follower.decide(backend->catalog(), report.traffic)) {
    report.fail(std::move(err));
    return report;
  }
  report.fastPathHits = follower.fastPathHits();
  // The version before the tables: an update racing with the reads bumps
  // it, so code built from a half-updated snapshot is never installed.
  report.version = backend->guardVersion();
  if (backend->guardChanging()) {
    report.end(CycleOutcome::Deferred, "a control-plane change is in progress");
    return report;
  }
  if (Error err = follower.readWriteCounts(report.cycle)) {
    report.fail(std::move(err));
    return report;
  }
  ReadPlan plan = backend->readPlan();
  follower.addProbes(plan);
  std::optional<TableSnapshot> snapshot = backend->readTables(plan, report);
  if (!snapshot)
    return report;
  report.writeCounts = follower.choice().writeCounts;
  report.times.analysisMs =
      std::chrono::duration<double, std::milli>(Clock::now() - start).count();
  if (!force && follower.choice() == follower.installedChoice() &&
      backend->installedFits(*snapshot, report)) {
    report.end(CycleOutcome::Unchanged);
    return report;
  }
  std::unique_ptr<CycleCandidate> candidate = backend->buildCandidate(*snapshot, follower.choice(), report);
  if (!candidate) {
    if (report.outcome == CycleOutcome::Unchanged)
      follower.keptInstalled();
    return report;
  }
  if (backend->guardVersion() != report.version || backend->guardChanging()) {
    report.end(CycleOutcome::Superseded, TableChangedDuringCycle);
    return report;
  }
  if (!backend->validateCandidate(*candidate, *snapshot, report))
    return report;
  if (Error err = follower.beforeInstall(report.log.profiled)) {
    report.fail(std::move(err));
    return report;
  }
  if (Error err = backend->installCandidate(std::move(candidate), std::move(*snapshot), report)) {
    report.fail(std::move(err));
    return report;
  }
  // The version runs whatever follows: a site left sampling is noise in
  // its counts, said in the detail, never a failed install.
  std::string sampling;
  if (Error err = follower.afterInstall(report.cycle, report.log.profiled, report.log.fastPaths))
    sampling = "sampling not stopped where the version no longer records: " +
               llvm::toString(std::move(err));
  report.end(CycleOutcome::Installed, std::move(sampling));
  return report;
}

} // namespace morpheus::core
