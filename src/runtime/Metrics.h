// Figures for Prometheus: a registry of counters, gauges and histograms
// rendered in the text exposition format 0.0.4, for the node agent to
// publish per-program figures (runtime/MetricsServer.h serves the text).
//
// Why it is shaped this way:
// - A family is registered once with its HELP text and label names; its
//   children are found by label values (`with({"fw", "installed"})`), so
//   code that records an outcome never spells the exposition's syntax.
// - Names are checked against the format's grammar when the family is
//   registered, and registering a name again with another type, help,
//   labels or buckets is refused, naming what differs: one wrong name would
//   make every scrape unparseable, so it fails where it is written, not at
//   the scraper. The same registration again returns the same family.
// - Programs come and go while the agent runs: `removeWhere("program",
//   "fw")` drops a program's children, so a removed program stops being
//   reported instead of showing its last values forever.
// - A child handle (Counter, Gauge, Histogram) shares its cell with the
//   family: a handle kept across `removeWhere` keeps working on a cell that
//   is no longer exposed, never on freed memory; `with` the same values
//   afterwards starts a new child from zero.
// - Thread-safe: the registry, each family and each child have a lock,
//   always taken in that order. A child's samples are read under its lock,
//   so a histogram's _count always equals its +Inf bucket.
// - The same state renders the same text: families by name, children by
//   label values.
#pragma once

#include "support/Error.h"

#include <cstddef>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <vector>

namespace morpheus::runtime::metrics {

template <typename Child> class Family;

namespace detail {
struct Cell;
struct Family;

// What every child handle holds: its cell, shared with the family, so a
// handle outlives removeWhere (above). Handles are cheap to copy and keep;
// only a Family makes them.
class Handle {
protected:
  explicit Handle(std::shared_ptr<Cell> cell) : cell(std::move(cell)) {}
  std::shared_ptr<Cell> cell;
};
} // namespace detail

// Counts something that only goes up (cycles, packets, failures).
class Counter : detail::Handle {
public:
  // `amount` is >= 0: a counter that went down would read as a restart to
  // Prometheus. A negative or NaN amount is a programming error (asserted;
  // ignored in release builds).
  void inc(double amount = 1);

private:
  template <typename> friend class Family;
  using Handle::Handle;
};

// A value read at a moment (entries in a map, ns per packet, a state).
class Gauge : detail::Handle {
public:
  void set(double value);
  void inc(double amount = 1);
  void dec(double amount = 1);

private:
  template <typename> friend class Family;
  using Handle::Handle;
};

// A distribution (a cycle's duration in seconds) in the family's buckets.
class Histogram : detail::Handle {
public:
  // Counted in the first bucket whose bound is >= `value` (+Inf when none
  // is, NaN included, which then makes the sum NaN as Prometheus expects).
  void observe(double value);

private:
  template <typename> friend class Family;
  using Handle::Handle;
};

// A metric's family, registered in a Registry; a cheap handle to copy and
// keep (it stays valid as long as any copy does).
template <typename Child> class Family {
public:
  // The child of `labelValues` (one per label name, in registration order),
  // made at zero on first use. A wrong number of values is a programming
  // error: asserted; in release builds the child returned is exposed
  // nowhere, so a bad call loses its figure but never corrupts the page.
  Child with(const std::vector<std::string> &labelValues) const;
  // Drops every child whose label `label` has `value`; how many were.
  // `label` must be one of the family's label names (asserted).
  size_t removeWhere(std::string_view label, std::string_view value) const;

private:
  friend class Registry;
  explicit Family(std::shared_ptr<detail::Family> family) : family(std::move(family)) {}
  std::shared_ptr<detail::Family> family;
};

using CounterFamily = Family<Counter>;
using GaugeFamily = Family<Gauge>;
using HistogramFamily = Family<Histogram>;
extern template class Family<Counter>;
extern template class Family<Gauge>;
extern template class Family<Histogram>;

class Registry {
public:
  Registry();
  ~Registry();
  Registry(const Registry &) = delete;
  Registry &operator=(const Registry &) = delete;

  // Errors (`metric 'NAME': ...`): a name outside [a-zA-Z_:][a-zA-Z0-9_:]*,
  // a label name outside [a-zA-Z_][a-zA-Z0-9_]* or starting with "__", a
  // label named twice, a name registered before in another shape, a name
  // whose lines would mix with another family's (histogram `x` and gauge
  // `x_count`; counter `x_total` and gauge `x`, which parsers following
  // OpenMetrics read as one family). A family without labels has its one
  // child from the start, so it is exposed at 0 before anything is recorded.
  Expected<CounterFamily> counter(const std::string &name, const std::string &help,
                                  const std::vector<std::string> &labels = {});
  Expected<GaugeFamily> gauge(const std::string &name, const std::string &help,
                              const std::vector<std::string> &labels = {});
  // `bounds`: the buckets' upper bounds, finite and strictly increasing;
  // the +Inf bucket is always there. "le" is not a label name here: the
  // format uses it for the bounds.
  Expected<HistogramFamily> histogram(const std::string &name, const std::string &help,
                                      const std::vector<std::string> &labels,
                                      const std::vector<double> &bounds);

  // The whole page, as served at /metrics.
  std::string exposition() const;

private:
  // `candidate`'s family, or the one registered before in the same shape.
  template <typename Child> Expected<Family<Child>> add(std::shared_ptr<detail::Family> candidate);

  mutable std::mutex mutex;
  std::map<std::string, std::shared_ptr<detail::Family>> families;
};

// `value` as the format writes it: NaN, +Inf, -Inf; integers up to 2^53
// in digits (1000000, not 1e+06); anything else the shortest text that
// reads back as the same double.
std::string formatValue(double value);

} // namespace morpheus::runtime::metrics
