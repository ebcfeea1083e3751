// Measured exploration of a handler's specialization space (after
// Iridescent's policy API): the dimensions (a handler's specialization
// points, or any knob the policy applies itself: burst size, an LPM
// template), a pluggable search strategy that proposes the configurations
// to try, and an Explorer that applies each one, takes the metric the
// running loop measured under it (packets per second of the loop thread's
// CPU time, end to end: never a model's guess), keeps the best, and
// explores again when the metric moves by the re-exploration threshold
// (25 %) or every `reexploreEvery` windows.
#pragma once

#include "backend/user/Handler.h"
#include "core/SpecializationPoints.h"
#include "support/Error.h"

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::user {

// A configuration: a value per dimension; a dimension absent is off (a
// point disabled, a knob at its default).
using Configuration = core::PointConfiguration;

struct Dimension {
  std::string name;
  std::vector<int64_t> values; // tried besides "off"
  bool canBeOff = true;        // false: one of `values` is always chosen
  // What values[i] stands for, printed by describe (empty: the numbers).
  std::vector<std::string> valueNames = {};
};

// The dimensions of a handler's points: each point's candidates (a generic
// point: the `generic` values the policy names for it, or none: then it is
// left out).
std::vector<Dimension>
pointDimensions(const std::vector<core::SpecializationPoint> &space,
                const std::map<std::string, std::vector<int64_t>> &generic = {});

// "name=value ..." ("(generic)" when empty); a value of a dimension among
// `dimensions` with value names by its name.
std::string describe(const Configuration &configuration,
                     const std::vector<Dimension> &dimensions = {});

// What proposes configurations. `next` is called after each `report` (and
// once after `start`); nullopt ends the search, whose result is `best`.
// Higher metrics are better.
class SearchStrategy {
public:
  virtual ~SearchStrategy() = default;
  virtual const char *name() const = 0;
  virtual void start(const std::vector<Dimension> &dimensions) = 0;
  virtual std::optional<Configuration> next() = 0;
  virtual void report(const Configuration &configuration, double metric) = 0;
  virtual Configuration best() const = 0;
};

// Every combination (off and every value of each dimension), up to
// `limit` of them in order; the best measured wins.
std::unique_ptr<SearchStrategy> exhaustiveSearch(size_t limit = 256);
// Everything off first; then one dimension at a time, each of its values
// with the others at the best so far; a value is kept when it measures
// better. Tries 1 + sum of values configurations.
std::unique_ptr<SearchStrategy> greedySearch();

struct ExplorerOptions {
  unsigned windowsPerTrial = 3; // measurements per configuration (median)
  double reexploreThreshold = 0.25;
  unsigned reexploreEvery = 0;  // windows in the settled state; 0: only on a move
};

// One measured configuration.
struct Trial {
  Configuration configuration;
  double metric = 0; // median of the trial's windows
  unsigned exploration = 0; // which exploration (1, 2, ...)
};

class Explorer {
public:
  // Makes `configuration` the running one (compiles and installs it).
  using Apply = std::function<Error(const Configuration &)>;

  Explorer(std::vector<Dimension> dimensions, std::unique_ptr<SearchStrategy> strategy,
           Apply apply, ExplorerOptions options = {});

  // Starts an exploration: applies the strategy's first proposal.
  Error start();
  // The metric of one window run under current(). Moves the search on
  // when the trial has its windows; applies the next configuration, or
  // the best when the search is over; in the settled state, starts over
  // when the metric has moved by the threshold from the chosen
  // configuration's, or after reexploreEvery windows.
  Error observe(double metric);

  bool exploring() const { return searching; }
  const Configuration &current() const { return running; }
  // The configuration the last finished exploration chose, and its metric.
  const std::optional<Trial> &chosen() const { return choice; }
  const std::vector<Trial> &trials() const { return history; }
  // Why each exploration started ("start", "metric moved by +31 %", ...).
  const std::vector<std::string> &reasons() const { return why; }
  const SearchStrategy &searchStrategy() const { return *strategy; }

private:
  Error applyNext();

  std::vector<Dimension> dimensions;
  std::unique_ptr<SearchStrategy> strategy;
  Apply apply;
  ExplorerOptions options;
  bool searching = false;
  Configuration running;
  std::vector<double> window; // metrics of the current trial
  std::optional<Trial> choice;
  std::vector<Trial> history;
  std::vector<std::string> why;
  unsigned explorations = 0, settledWindows = 0;
};

} // namespace morpheus::user
