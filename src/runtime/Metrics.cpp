// The registry of runtime/Metrics.h and its rendering in the text
// exposition format 0.0.4: `# HELP` and `# TYPE` lines, then one line per
// sample, `name{label="value",...} number`.
#include "runtime/Metrics.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <set>

namespace morpheus::runtime::metrics {

namespace detail {

enum class Kind { Counter, Gauge, Histogram };

// One child's figures.
struct Cell {
  // `bounds`: a histogram's, shared with its family (a handle may outlive
  // the family); null for counters and gauges.
  explicit Cell(std::shared_ptr<const std::vector<double>> bounds)
      : bounds(std::move(bounds)), bucketCounts(this->bounds ? this->bounds->size() + 1 : 0) {}

  const std::shared_ptr<const std::vector<double>> bounds;
  std::mutex mutex;
  // A counter's or gauge's value; a histogram's sum of observations.
  double value = 0;
  // A histogram's observations per bucket (not cumulative), +Inf last.
  std::vector<uint64_t> bucketCounts;
};

struct Family {
  Kind kind;
  std::string name;
  std::string help;
  std::vector<std::string> labels;
  // A histogram's bucket bounds without +Inf; null for the other kinds.
  std::shared_ptr<const std::vector<double>> bounds;

  std::mutex mutex;
  std::map<std::vector<std::string>, std::shared_ptr<Cell>> children;

  std::shared_ptr<Cell> makeCell() const { return std::make_shared<Cell>(bounds); }
};

} // namespace detail

using detail::Kind;

namespace {

const char *kindName(Kind kind) {
  switch (kind) {
  case Kind::Counter:
    return "counter";
  case Kind::Gauge:
    return "gauge";
  case Kind::Histogram:
    return "histogram";
  }
  return "untyped";
}

bool isValidName(std::string_view name, bool colonAllowed) {
  auto isStart = [&](char c) {
    return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
           (colonAllowed && c == ':');
  };
  auto isRest = [&](char c) { return isStart(c) || (c >= '0' && c <= '9'); };
  return !name.empty() && isStart(name.front()) &&
         std::all_of(name.begin() + 1, name.end(), isRest);
}

const std::vector<double> &boundsOf(const detail::Family &family) {
  static const std::vector<double> none;
  return family.bounds ? *family.bounds : none;
}

// The names a family's lines start with: its own, and a histogram's with
// _bucket, _sum and _count; a counter `x_total` also takes `x`, the name
// OpenMetrics and Prometheus's Python parser give its family. Two families
// must share none, or a parser would mix their samples.
std::vector<std::string> namesTaken(const detail::Family &family) {
  std::vector<std::string> names = {family.name};
  if (family.kind == Kind::Histogram)
    for (const char *suffix : {"_bucket", "_sum", "_count"})
      names.push_back(family.name + suffix);
  if (family.kind == Kind::Counter && family.name.ends_with("_total"))
    names.push_back(family.name.substr(0, family.name.size() - 6));
  return names;
}

Error checkShape(const detail::Family &family) {
  auto fail = [&](const std::string &why) {
    return makeError("metric '{0}': {1}", family.name, why);
  };
  if (!isValidName(family.name, /*colonAllowed=*/true))
    return fail("not a metric name ([a-zA-Z_:][a-zA-Z0-9_:]*)");
  std::set<std::string_view> seen;
  for (const std::string &label : family.labels) {
    if (!isValidName(label, /*colonAllowed=*/false))
      return fail("label '" + label + "' is not a label name ([a-zA-Z_][a-zA-Z0-9_]*)");
    if (label.starts_with("__"))
      return fail("label '" + label + "': names starting with __ are Prometheus's own");
    if (family.kind == Kind::Histogram && label == "le")
      return fail("label 'le' is a histogram's bucket bound");
    if (!seen.insert(label).second)
      return fail("label '" + label + "' named twice");
  }
  const std::vector<double> &bounds = boundsOf(family);
  for (size_t i = 0; i < bounds.size(); ++i) {
    if (!std::isfinite(bounds[i]))
      return fail("bucket bound " + formatValue(bounds[i]) +
                  " is not finite (the +Inf bucket is always there)");
    if (i > 0 && !(bounds[i - 1] < bounds[i]))
      return fail("bucket bounds are not strictly increasing (" + formatValue(bounds[i - 1]) +
                  " then " + formatValue(bounds[i]) + ")");
  }
  return Error::success();
}

std::string joined(const std::vector<std::string> &names) {
  std::string text;
  for (const std::string &name : names)
    text += (text.empty() ? "" : ", ") + name;
  return "(" + text + ")";
}

std::string joined(const std::vector<double> &bounds) {
  std::vector<std::string> texts;
  for (double bound : bounds)
    texts.push_back(formatValue(bound));
  return joined(texts);
}

// What differs between the family registered as `known` and `candidate`,
// field by field; "" when they are the same.
std::string differences(const detail::Family &known, const detail::Family &candidate) {
  std::string text;
  auto add = [&](const std::string &what) { text += (text.empty() ? "" : "; ") + what; };
  if (known.kind != candidate.kind)
    add(std::string("registered as a ") + kindName(known.kind) + ", now as a " +
        kindName(candidate.kind));
  if (known.labels != candidate.labels)
    add("labels " + joined(known.labels) + " changed to " + joined(candidate.labels));
  if (boundsOf(known) != boundsOf(candidate))
    add("buckets " + joined(boundsOf(known)) + " changed to " + joined(boundsOf(candidate)));
  if (known.help != candidate.help)
    add("help \"" + known.help + "\" changed to \"" + candidate.help + "\"");
  return text;
}

// HELP text escapes backslash and newline; label values also the double
// quote that ends them.
void appendEscaped(std::string &out, std::string_view text, bool quoteToo) {
  for (char c : text) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '\n')
      out += "\\n";
    else if (c == '"' && quoteToo)
      out += "\\\"";
    else
      out += c;
  }
}

// `{a="x",b="y"}` (with `le` last when given), nothing for no labels.
void appendLabels(std::string &out, const std::vector<std::string> &names,
                  const std::vector<std::string> &values, const std::string *le = nullptr) {
  if (names.empty() && !le)
    return;
  out += '{';
  for (size_t i = 0; i < names.size(); ++i) {
    out += (i ? "," : "") + names[i] + "=\"";
    appendEscaped(out, values[i], /*quoteToo=*/true);
    out += '"';
  }
  if (le)
    out += (names.empty() ? "" : ",") + std::string("le=\"") + *le + '"';
  out += '}';
}

void appendSample(std::string &out, const std::string &name, const std::vector<std::string> &names,
                  const std::vector<std::string> &values, double value,
                  const std::string *le = nullptr) {
  out += name;
  appendLabels(out, names, values, le);
  out += ' ' + formatValue(value) + '\n';
}

void appendFamily(std::string &out, detail::Family &family) {
  out += "# HELP " + family.name + ' ';
  appendEscaped(out, family.help, /*quoteToo=*/false);
  out += "\n# TYPE " + family.name + ' ' + kindName(family.kind) + '\n';
  std::lock_guard familyLock(family.mutex);
  for (const auto &[values, cell] : family.children) {
    std::lock_guard cellLock(cell->mutex);
    if (family.kind != Kind::Histogram) {
      appendSample(out, family.name, family.labels, values, cell->value);
      continue;
    }
    uint64_t cumulative = 0;
    for (size_t i = 0; i < cell->bucketCounts.size(); ++i) {
      cumulative += cell->bucketCounts[i];
      std::string le = i < family.bounds->size() ? formatValue((*family.bounds)[i]) : "+Inf";
      appendSample(out, family.name + "_bucket", family.labels, values, double(cumulative), &le);
    }
    appendSample(out, family.name + "_sum", family.labels, values, cell->value);
    appendSample(out, family.name + "_count", family.labels, values, double(cumulative));
  }
}

std::shared_ptr<detail::Family> newFamily(Kind kind, const std::string &name,
                                          const std::string &help,
                                          const std::vector<std::string> &labels,
                                          std::shared_ptr<const std::vector<double>> bounds) {
  auto family = std::make_shared<detail::Family>();
  family->kind = kind;
  family->name = name;
  family->help = help;
  family->labels = labels;
  family->bounds = std::move(bounds);
  return family;
}

} // namespace

std::string formatValue(double value) {
  if (std::isnan(value))
    return "NaN";
  if (std::isinf(value))
    return value > 0 ? "+Inf" : "-Inf";
  char text[32];
  // Below 2^53 every integer is exact: print its digits rather than the
  // shortest form, which would turn 1000000 into 1e+06.
  if (value == std::trunc(value) && std::fabs(value) <= 9007199254740992.0) {
    auto end = std::to_chars(text, text + sizeof text, int64_t(value)).ptr;
    return std::string(text, end);
  }
  auto end = std::to_chars(text, text + sizeof text, value).ptr;
  return std::string(text, end);
}

void Counter::inc(double amount) {
  assert(amount >= 0 && "a counter never goes down");
  if (!(amount >= 0))
    return;
  std::lock_guard lock(cell->mutex);
  cell->value += amount;
}

void Gauge::set(double value) {
  std::lock_guard lock(cell->mutex);
  cell->value = value;
}

void Gauge::inc(double amount) {
  std::lock_guard lock(cell->mutex);
  cell->value += amount;
}

void Gauge::dec(double amount) { inc(-amount); }

void Histogram::observe(double value) {
  // `value <= bound` is false for NaN: it falls through to +Inf.
  const std::vector<double> &bounds = *cell->bounds;
  size_t bucket =
      std::find_if(bounds.begin(), bounds.end(), [&](double bound) { return value <= bound; }) -
      bounds.begin();
  std::lock_guard lock(cell->mutex);
  cell->value += value;
  ++cell->bucketCounts[bucket];
}

template <typename Child> Child Family<Child>::with(const std::vector<std::string> &values) const {
  assert(values.size() == family->labels.size() && "one value per label name");
  if (values.size() != family->labels.size())
    return Child(family->makeCell());
  std::lock_guard lock(family->mutex);
  std::shared_ptr<detail::Cell> &cell = family->children[values];
  if (!cell)
    cell = family->makeCell();
  return Child(cell);
}

template <typename Child>
size_t Family<Child>::removeWhere(std::string_view label, std::string_view value) const {
  auto position = std::find(family->labels.begin(), family->labels.end(), label);
  assert(position != family->labels.end() && "removeWhere names a label of the family");
  size_t index = position - family->labels.begin();
  std::lock_guard lock(family->mutex);
  return std::erase_if(family->children, [&](const auto &child) {
    return index < child.first.size() && child.first[index] == value;
  });
}

template class Family<Counter>;
template class Family<Gauge>;
template class Family<Histogram>;

Registry::Registry() = default;
Registry::~Registry() = default;

template <typename Child>
Expected<Family<Child>> Registry::add(std::shared_ptr<detail::Family> candidate) {
  if (Error err = checkShape(*candidate))
    return std::move(err);
  std::lock_guard lock(mutex);
  if (auto known = families.find(candidate->name); known != families.end()) {
    std::string differ = differences(*known->second, *candidate);
    if (!differ.empty())
      return makeError("metric '{0}': {1}", candidate->name, differ);
    return Family<Child>(known->second);
  }
  std::vector<std::string> ours = namesTaken(*candidate);
  for (const auto &[name, family] : families)
    for (const std::string &theirs : namesTaken(*family))
      if (std::find(ours.begin(), ours.end(), theirs) != ours.end())
        return makeError("metric '{0}': '{1}' is taken by {2} '{3}'", candidate->name, theirs,
                         kindName(family->kind), name);
  if (candidate->labels.empty())
    candidate->children[{}] = candidate->makeCell();
  families.emplace(candidate->name, candidate);
  return Family<Child>(std::move(candidate));
}

Expected<CounterFamily> Registry::counter(const std::string &name, const std::string &help,
                                          const std::vector<std::string> &labels) {
  return add<Counter>(newFamily(Kind::Counter, name, help, labels, nullptr));
}

Expected<GaugeFamily> Registry::gauge(const std::string &name, const std::string &help,
                                      const std::vector<std::string> &labels) {
  return add<Gauge>(newFamily(Kind::Gauge, name, help, labels, nullptr));
}

Expected<HistogramFamily> Registry::histogram(const std::string &name, const std::string &help,
                                              const std::vector<std::string> &labels,
                                              const std::vector<double> &bounds) {
  return add<Histogram>(newFamily(Kind::Histogram, name, help, labels,
                                  std::make_shared<const std::vector<double>>(bounds)));
}

std::string Registry::exposition() const {
  std::string out;
  std::lock_guard lock(mutex);
  for (const auto &[name, family] : families)
    appendFamily(out, *family);
  return out;
}

} // namespace morpheus::runtime::metrics
