#include "runtime/Exploration.h"

#include <llvm/Support/FormatVariadic.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace morpheus::runtime {

namespace {

double msBetween(Exploration::Clock::time_point from, Exploration::Clock::time_point to) {
  return std::chrono::duration<double, std::milli>(to - from).count();
}

} // namespace

Exploration::Exploration(Optimizer &optimizer, std::function<int()> charged, Log &log,
                         ExploreOptions options,
                         std::vector<core::ExplorationCandidate> candidates,
                         std::vector<core::ExplorationCandidate> widened,
                         double predictedSavingNs,
                         core::VersionSettings model, Clock::time_point now)
    : opt(optimizer), charged(std::move(charged)), log(log), options(options),
      candidates(std::move(candidates)), widened(std::move(widened)),
      predictedSaving(predictedSavingNs), model(std::move(model)),
      rounds(this->candidates.size(), options.rounds), started(now), sliceStart(now),
      sliceEnd(now) {
  std::string text = llvm::formatv("explore: {0} versions and the generic program, {1} "
                                   "rounds of slices of at least {2} ms and {3} runs each, "
                                   "budget {4:f1} s:\n",
                                   this->candidates.size(), options.rounds,
                                   options.slice.count(), options.minRuns,
                                   options.budget.count() / 1000.0)
                         .str();
  nlohmann::json names = nlohmann::json::array();
  for (size_t slot = 1; slot <= this->candidates.size(); ++slot) {
    text += "  " + nameOf(slot) + "\n";
    names.push_back(nameOf(slot));
  }
  if (!this->widened.empty())
    text += llvm::formatv("  then, if the model's version saves less than {0:f0} % of the "
                          "{1:f1} ns/packet it predicts (by more than {2:f0} ns): {3} more\n",
                          options.shortfall.fraction * 100, predictedSaving,
                          options.shortfall.noiseNs, this->widened.size())
                .str();
  log.record("explore_start",
             {{"candidates", names},
              {"rounds", options.rounds},
              {"predicted_saving_ns", predictedSaving},
              {"widened", this->widened.size()}},
             text);
  auto enabled = bpf::enableRunTimeStats();
  if (!enabled) {
    abandon("cannot measure: " + llvm::toString(enabled.takeError()));
    return;
  }
  stats = std::move(*enabled);
  // A version serves a slice a round: built, validated and loaded once,
  // then kept loaded for the rounds after.
  opt.keepReplacedVersions(true);
  serveNext(now);
}

core::VersionSettings Exploration::settingsOf(size_t slot) const {
  return core::candidateSettings(candidates.at(slot - 1), model);
}

std::string Exploration::nameOf(size_t slot) const {
  return slot == 0 ? "the generic program" : candidates.at(slot - 1).description;
}

bool Exploration::serve(size_t slot) {
  if (slot == 0) {
    if (Error err = opt.serveOriginal()) {
      abandon("cannot serve the generic program: " + llvm::toString(std::move(err)));
      return true;
    }
    installedSlot.reset();
    keptFrom.reset();
  } else {
    opt.setVersionSettings(settingsOf(slot));
    core::CycleReport cycle = opt.runCycle(/*force=*/true);
    bool same = cycle.outcome == core::CycleOutcome::Unchanged;
    if (same && installedSlot && *installedSlot != slot) {
      log.record("explore_skip", {{"candidate", nameOf(slot)}, {"same_as", nameOf(*installedSlot)}},
                 "explore: " + nameOf(slot) + ": builds the code of " +
                     nameOf(*installedSlot) + ": not tried\n");
      rounds.skip(slot);
      return false;
    }
    if (!cycle.installed() && !same) {
      log.record("explore_skip", {{"candidate", nameOf(slot)}, {"cycle", cycle.describe()}},
                 "explore: " + nameOf(slot) + ": not tried: " + cycle.describe() + "\n");
      rounds.skip(slot);
      return false;
    }
    installedSlot = slot;
    keptFrom = cycle.reinstalledFrom;
  }
  serving = slot;
  // The slice starts once the version runs: its build is not measured.
  sliceStart = Clock::now();
  sliceEnd = sliceStart + options.slice;
  base = bpf::programRunStats(charged());
  return true;
}

void Exploration::serveNext(Clock::time_point now) {
  while (!over) {
    if (now - started >= options.budget) {
      finish(llvm::formatv("the budget ({0:f1} s) is spent", options.budget.count() / 1000.0));
      return;
    }
    std::optional<size_t> slot = rounds.next();
    if (!slot && widen())
      slot = rounds.next();
    if (!slot) {
      finish("");
      return;
    }
    if (serve(*slot))
      return;
    now = Clock::now();
  }
}

void Exploration::step(Clock::time_point now) {
  if (over || now < sliceEnd)
    return;
  bpf::ProgramRunStats current = bpf::programRunStats(charged());
  if (current.programId != base.programId) {
    // Another program took the hook meanwhile (a port attached again):
    // its counters say nothing of this slice; measure it afresh.
    base = current;
    sliceStart = now;
    sliceEnd = now + options.slice;
    return;
  }
  uint64_t runs = current.runCount - base.runCount;
  if (runs < options.minRuns) {
    if (now - started >= options.budget) {
      finish(llvm::formatv("the budget ({0:f1} s) is spent: the traffic ran the program {1} "
                           "times in {2:f0} ms, fewer than the {3} runs a slice needs",
                           options.budget.count() / 1000.0, runs, msBetween(sliceStart, now),
                           options.minRuns));
      return;
    }
    sliceEnd = now + options.slice; // too little traffic yet: the slice goes on
    return;
  }
  double ns = double(current.runTimeNs - base.runTimeNs) / double(runs);
  rounds.record(serving, ns);
  std::string text = llvm::formatv("explore: tried {0}  {1:f1} ns/packet ({2} runs)",
                                   nameOf(serving), ns, runs)
                         .str();
  nlohmann::json fields = {{"candidate", nameOf(serving)},
                           {"ns_per_packet", ns},
                           {"runs", runs},
                           {"generic", serving == 0}};
  if (serving != 0 && keptFrom) {
    text += llvm::formatv(" (built in cycle {0}, kept loaded)", *keptFrom).str();
    fields["kept_from_cycle"] = *keptFrom;
  }
  if (serving != 0 && rounds.dropped(serving)) {
    text += llvm::formatv("; slower than the generic program ({0:f1} ns/packet): not tried "
                          "again, never kept",
                          *rounds.median(0))
                .str();
    fields["dropped"] = true;
  }
  log.record("explore_trial", std::move(fields), text + "\n");
  serveNext(now);
}

bool Exploration::widen() {
  std::optional<double> generic = rounds.median(0), model = rounds.median(1);
  if (widened.empty() || !generic || !model ||
      !core::gainFallsShort(predictedSaving, *generic, *model, options.shortfall))
    return false;
  std::string text = llvm::formatv("explore: the model's version saves {0:f1} ns/packet "
                                   "measured ({1:f1} against the generic program's {2:f1}), "
                                   "{3:f1} predicted: trying {4} more:\n",
                                   *generic - *model, *model, *generic, predictedSaving,
                                   widened.size())
                         .str();
  nlohmann::json names = nlohmann::json::array();
  for (core::ExplorationCandidate &candidate : widened) {
    text += "  " + candidate.description + "\n";
    names.push_back(candidate.description);
    candidates.push_back(std::move(candidate));
  }
  log.record("explore_shortfall",
             {{"measured_saving_ns", *generic - *model},
              {"predicted_saving_ns", predictedSaving},
              {"candidates", names}},
             text);
  rounds.extend(widened.size());
  widened.clear();
  return true;
}

void Exploration::finish(const std::string &why) {
  std::optional<double> generic = rounds.median(0);
  // Without the reference, or without a version measured, nothing is known
  // to be faster than the generic program, nor slower: the model's
  // version stays.
  bool candidateMeasured = false;
  for (size_t slot = 1; slot < rounds.size(); ++slot)
    candidateMeasured |= rounds.median(slot).has_value();
  chosen = generic && candidateMeasured ? rounds.choice() : 1;
  std::string text;
  nlohmann::json medians = nlohmann::json::object();
  for (size_t slot = 0; slot < rounds.size(); ++slot)
    if (std::optional<double> median = rounds.median(slot)) {
      text += llvm::formatv("  {0,-12} {1}: median {2:f1} ns/packet over {3} slice{4}{5}\n",
                            slot == chosen ? "chosen" : "measured", nameOf(slot), *median,
                            rounds.measured(slot).size(),
                            rounds.measured(slot).size() == 1 ? "" : "s",
                            slot != 0 && rounds.dropped(slot) ? " (slower than generic)" : "")
                  .str();
      medians[nameOf(slot)] = *median;
    }
  std::string choice;
  if (chosen == 0) {
    opt.setVersionSettings(model);
    if (Error err = opt.serveOriginal())
      log.error("explore: cannot serve the generic program: " + llvm::toString(std::move(err)));
    choice = "explore: chose the generic program: no version measured faster";
  } else {
    opt.setVersionSettings(settingsOf(chosen));
    if (installedSlot != chosen) {
      core::CycleReport cycle = opt.runCycle(/*force=*/true);
      if (!cycle.installed() && cycle.outcome != core::CycleOutcome::Unchanged) {
        opt.setVersionSettings(model);
        log.error("explore: the chosen version could not be installed again (" +
                  cycle.describe() + "): the model's version from the next cycle");
      }
    }
    std::optional<double> ns = rounds.median(chosen);
    if (generic && ns)
      choice = llvm::formatv("explore: chose {0}: {1:f1} ns/packet, {2:f1} % less than the "
                             "generic program's {3:f1} ns/packet",
                             nameOf(chosen), *ns, (1 - *ns / *generic) * 100, *generic)
                   .str();
    else
      choice = "explore: too little measured to choose: the model's version stays";
  }
  opt.keepReplacedVersions(false);
  if (!why.empty())
    choice += " (stopped early: " + why + ")";
  log.record("explore_choice",
             {{"chosen", nameOf(chosen)},
              {"medians", medians},
              {"stopped_early", why},
              {"ms", msBetween(started, Clock::now())}},
             text + choice + llvm::formatv(" [{0:f0} ms]\n", msBetween(started, Clock::now())).str());
  stats.reset();
  over = true;
}

void Exploration::abandon(const std::string &why) {
  if (over)
    return;
  opt.setVersionSettings(model);
  // Another candidate's version would fit the tables as well as the
  // model's: the next cycle would keep it. Serving the original makes it
  // build the model's.
  if (installedSlot && *installedSlot != 1)
    if (Error err = opt.serveOriginal())
      log.error("explore: " + llvm::toString(std::move(err)));
  opt.keepReplacedVersions(false);
  log.record("explore_abandoned", {{"why", why}},
             "explore: abandoned: " + why + "; the model's version from the next cycle\n");
  stats.reset();
  chosen = 1;
  over = true;
}

} // namespace morpheus::runtime
