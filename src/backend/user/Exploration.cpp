#include "backend/user/Exploration.h"

#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <cmath>

namespace morpheus::user {

std::vector<Dimension>
pointDimensions(const std::vector<core::SpecializationPoint> &space,
                const std::map<std::string, std::vector<int64_t>> &generic) {
  std::vector<Dimension> dimensions;
  for (const core::SpecializationPoint &point : space) {
    Dimension dimension{point.label, point.candidates, true};
    if (point.kind == core::PointKind::Generic || point.candidates.empty()) {
      auto named = generic.find(point.label);
      if (named == generic.end())
        continue; // nothing to try
      dimension.values = named->second;
    }
    dimensions.push_back(std::move(dimension));
  }
  return dimensions;
}

std::string describe(const Configuration &configuration, const std::vector<Dimension> &dimensions) {
  if (configuration.empty())
    return "(generic)";
  auto nameOf = [&](const std::string &name, int64_t value) {
    for (const Dimension &dimension : dimensions)
      if (dimension.name == name)
        for (size_t i = 0; i < dimension.valueNames.size() && i < dimension.values.size(); ++i)
          if (dimension.values[i] == value)
            return dimension.valueNames[i];
    return std::to_string(value);
  };
  std::string text;
  for (const auto &[name, value] : configuration)
    text += (text.empty() ? "" : " ") + name + "=" + nameOf(name, value);
  return text;
}

namespace {

// What every strategy keeps: the best configuration reported so far (the
// highest metric), which best() returns.
class KeepsBest : public SearchStrategy {
public:
  void report(const Configuration &configuration, double metric) override {
    if (!bestMetric || metric > *bestMetric) {
      bestMetric = metric;
      bestConfiguration = configuration;
    }
  }
  Configuration best() const override { return bestConfiguration; }

protected:
  void forgetBest() {
    bestMetric.reset();
    bestConfiguration.clear();
  }
  std::optional<double> bestMetric;
  Configuration bestConfiguration;
};

class ExhaustiveSearch : public KeepsBest {
public:
  explicit ExhaustiveSearch(size_t limit) : limit(limit) {}
  const char *name() const override { return "exhaustive"; }

  void start(const std::vector<Dimension> &dimensions) override {
    this->dimensions = dimensions;
    // Index per dimension into off + values; all off first.
    position.assign(dimensions.size(), 0);
    proposed = 0;
    done = false;
    forgetBest();
  }

  std::optional<Configuration> next() override {
    if (done || proposed >= limit)
      return std::nullopt;
    Configuration configuration;
    for (size_t d = 0; d < dimensions.size(); ++d) {
      size_t offset = dimensions[d].canBeOff ? 1 : 0;
      if (position[d] >= offset)
        configuration[dimensions[d].name] = dimensions[d].values[position[d] - offset];
    }
    ++proposed;
    advance();
    return configuration;
  }


private:
  void advance() {
    for (size_t d = 0; d < dimensions.size(); ++d) {
      size_t choices = dimensions[d].values.size() + (dimensions[d].canBeOff ? 1 : 0);
      if (++position[d] < choices)
        return;
      position[d] = 0;
    }
    done = true; // wrapped around
  }

  size_t limit;
  std::vector<Dimension> dimensions;
  std::vector<size_t> position;
  size_t proposed = 0;
  bool done = false;
};

class GreedySearch : public KeepsBest {
public:
  const char *name() const override { return "greedy"; }

  void start(const std::vector<Dimension> &dimensions) override {
    this->dimensions = dimensions;
    forgetBest();
    for (const Dimension &dimension : dimensions)
      if (!dimension.canBeOff && !dimension.values.empty())
        bestConfiguration[dimension.name] = dimension.values.front();
    dimension = 0;
    value = 0;
    baselineProposed = false;
  }

  std::optional<Configuration> next() override {
    if (!baselineProposed) {
      baselineProposed = true;
      return bestConfiguration;
    }
    while (dimension < dimensions.size()) {
      const Dimension &current = dimensions[dimension];
      if (value < current.values.size()) {
        Configuration configuration = bestConfiguration;
        int64_t candidate = current.values[value++];
        auto kept = bestConfiguration.find(current.name);
        if (kept != bestConfiguration.end() && kept->second == candidate)
          continue; // the baseline already measured it
        configuration[current.name] = candidate;
        return configuration;
      }
      ++dimension;
      value = 0;
    }
    return std::nullopt;
  }


private:
  std::vector<Dimension> dimensions;
  size_t dimension = 0, value = 0;
  bool baselineProposed = false;
};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  return values[values.size() / 2];
}

} // namespace

std::unique_ptr<SearchStrategy> exhaustiveSearch(size_t limit) {
  return std::make_unique<ExhaustiveSearch>(limit);
}

std::unique_ptr<SearchStrategy> greedySearch() { return std::make_unique<GreedySearch>(); }

Explorer::Explorer(std::vector<Dimension> dimensions, std::unique_ptr<SearchStrategy> strategy,
                   Apply apply, ExplorerOptions options)
    : dimensions(std::move(dimensions)), strategy(std::move(strategy)), apply(std::move(apply)),
      options(options) {
  this->options.windowsPerTrial = std::max(1u, this->options.windowsPerTrial);
}

Error Explorer::start() {
  if (why.empty())
    why.push_back("start");
  ++explorations;
  searching = true;
  window.clear();
  strategy->start(dimensions);
  return applyNext();
}

Error Explorer::applyNext() {
  std::optional<Configuration> next = strategy->next();
  if (!next) {
    searching = false;
    settledWindows = 0;
    Configuration best = strategy->best();
    double metric = 0;
    for (const Trial &trial : history)
      if (trial.exploration == explorations && trial.configuration == best)
        metric = std::max(metric, trial.metric);
    choice = Trial{best, metric, explorations};
    running = best;
    return apply(best);
  }
  running = *next;
  return apply(*next);
}

Error Explorer::observe(double metric) {
  if (searching) {
    window.push_back(metric);
    if (window.size() < options.windowsPerTrial)
      return Error::success();
    double measured = median(window);
    window.clear();
    history.push_back({running, measured, explorations});
    strategy->report(running, measured);
    return applyNext();
  }
  ++settledWindows;
  double reference = choice ? choice->metric : 0;
  if (reference > 0 && std::fabs(metric / reference - 1) >= options.reexploreThreshold) {
    double percent = (metric / reference - 1) * 100;
    why.push_back(llvm::formatv("the metric moved by {0}{1:F0} % from the chosen "
                                "configuration's",
                                percent >= 0 ? "+" : "", percent)
                      .str());
    return start();
  }
  if (options.reexploreEvery && settledWindows >= options.reexploreEvery) {
    why.push_back(llvm::formatv("periodic, after {0} windows", settledWindows).str());
    return start();
  }
  return Error::success();
}

} // namespace morpheus::user
