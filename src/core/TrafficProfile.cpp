#include "core/TrafficProfile.h"

#include <llvm/Support/MathExtras.h>

#include <algorithm>
#include <cstdio>
#include <set>

namespace morpheus::core {

double FastPathCosts::lookupNs(TableMatch match) const {
  switch (match) {
  case TableMatch::Exact:
    return exactLookupNs;
  case TableMatch::LongestPrefix:
    return longestPrefixLookupNs;
  case TableMatch::Index:
    return indexLookupNs;
  case TableMatch::Unsupported:
    break;
  }
  return 0; // nothing to save
}

double FastPathCosts::perCompareNs(uint32_t keySize) const {
  uint32_t words = std::max<uint32_t>(1, (keySize + 7) / 8);
  return compareNs + (words - 1) * compareWordNs;
}

double chainCostNs(const std::vector<double> &shares, double compareNs, double lookupNs) {
  double hitCompares = 0, hitShare = 0;
  for (size_t i = 0; i < shares.size(); ++i) {
    hitCompares += double(i + 1) * shares[i];
    hitShare += shares[i];
  }
  return compareNs * hitCompares +
         std::max(0.0, 1 - hitShare) * (double(shares.size()) * compareNs + lookupNs);
}

size_t fastPathSize(const std::vector<double> &shares, double compareNs, double lookupNs,
                    double minimumSavingNs, size_t limit) {
  // The k hottest keys compared in order, for each k.
  size_t best = 0;
  double bestCost = lookupNs;
  std::vector<double> chain;
  for (size_t k = 1; k <= std::min(limit, shares.size()); ++k) {
    chain.push_back(shares[k - 1]);
    double cost = chainCostNs(chain, compareNs, lookupNs);
    if (cost < bestCost) {
      bestCost = cost;
      best = k;
    }
  }
  return lookupNs - bestCost >= minimumSavingNs ? best : 0;
}

uint32_t TrafficProfile::initialPeriod() const {
  return options.mode == ProfileMode::Naive ? 1 : options.initialPeriod;
}

TrafficProfile::Site &TrafficProfile::site(unsigned id) {
  auto [at, added] = sites.try_emplace(id);
  if (added)
    at->second.period = initialPeriod();
  return at->second;
}

void TrafficProfile::beginCycle() {
  for (auto &[id, site] : sites) {
    site.writtenOn.clear();
    for (auto &[cpu, counts] : site.perCpu)
      for (auto it = counts.begin(); it != counts.end();) {
        it->second *= options.decay;
        // Forgotten once it stands for less than a lookup.
        it = it->second < 1 ? counts.erase(it) : std::next(it);
      }
  }
}

void TrafficProfile::add(unsigned id, unsigned cpu, const std::vector<Bytes> &keys,
                         double weight, uint64_t written) {
  Site &at = site(id);
  at.writtenOn[cpu] += written;
  std::map<Bytes, double> &counts = at.perCpu[cpu];
  for (const Bytes &key : keys)
    counts[key] += weight;
}

std::map<Bytes, double> TrafficProfile::countsOn(unsigned id, unsigned cpu) const {
  auto at = sites.find(id);
  if (at == sites.end())
    return {};
  auto counts = at->second.perCpu.find(cpu);
  return counts == at->second.perCpu.end() ? std::map<Bytes, double>{} : counts->second;
}

std::map<Bytes, double> TrafficProfile::counts(unsigned id) const {
  std::map<Bytes, double> merged;
  if (auto at = sites.find(id); at != sites.end())
    for (const auto &[cpu, counts] : at->second.perCpu)
      for (const auto &[key, count] : counts)
        merged[key] += count;
  return merged;
}

void TrafficProfile::writesInvalidated(unsigned id) { site(id).invalidatedThisCycle = true; }

TrafficProfile::Ranking TrafficProfile::rank(const std::map<Bytes, double> &counts) const {
  double total = 0;
  std::vector<std::pair<double, Bytes>> ranked;
  for (const auto &[key, count] : counts) {
    total += count;
    ranked.emplace_back(count, key);
  }
  // Hottest first; equal counts by key, so the order never depends on the
  // map's iteration (equal counts are never merged: each is its own key).
  std::sort(ranked.begin(), ranked.end(), [](const auto &a, const auto &b) {
    return a.first != b.first ? a.first > b.first : a.second < b.second;
  });
  Ranking top;
  for (const auto &[count, key] : ranked) {
    double share = total > 0 ? count / total : 0;
    if (share < options.minShare || top.keys.size() == options.maxFastPath)
      break;
    top.keys.push_back(key);
    top.shares.push_back(share);
  }
  return top;
}

PerCpuHotKeys TrafficProfile::perCpuChains(unsigned id, const std::vector<Bytes> &global,
                                           double compareNs, double lookupNs,
                                           std::string &why) const {
  const std::map<unsigned, std::map<Bytes, double>> &perCpu = sites.at(id).perCpu;
  if (perCpu.size() < 2 || !options.perCpuChains)
    return {}; // one CPU seen: its chain is the global one
  double total = 0;
  for (const auto &[cpu, counts] : perCpu)
    for (const auto &[key, count] : counts)
      total += count;
  // Per CPU, weighted by its share of the lookups: what the global chain
  // costs it, and what its own chain (sized by the same benefit rule)
  // would; a CPU whose own chain is the global one needs no arm.
  PerCpuHotKeys chains;
  double globalCost = 0, perCpuCost = 0;
  for (const auto &[cpu, counts] : perCpu) {
    double cpuTotal = 0;
    for (const auto &[key, count] : counts)
      cpuTotal += count;
    if (cpuTotal <= 0)
      continue;
    double weight = cpuTotal / total;
    std::vector<double> globalShares;
    for (const Bytes &key : global) {
      auto count = counts.find(key);
      globalShares.push_back(count == counts.end() ? 0 : count->second / cpuTotal);
    }
    double onGlobal = chainCostNs(globalShares, compareNs, lookupNs);
    Ranking own = rank(counts);
    size_t size = fastPathSize(own.shares, compareNs, lookupNs, options.costs.minimumSavingNs,
                               options.maxFastPath);
    own.keys.resize(size);
    own.shares.resize(size);
    double onOwn = chainCostNs(own.shares, compareNs, lookupNs);
    globalCost += weight * onGlobal;
    if (own.keys != global && onOwn < onGlobal) {
      perCpuCost += weight * onOwn;
      chains[unsigned(cpu)] = std::move(own.keys);
    } else {
      perCpuCost += weight * onGlobal;
    }
  }
  // Every packet reads the CPU number and passes the arms' compares.
  double switchCost = options.costs.cpuNumberNs + double(chains.size()) * compareNs;
  auto ns = [](double value) {
    char text[32];
    std::snprintf(text, sizeof text, "%.1f ns", value);
    return std::string(text);
  };
  if (chains.empty()) {
    why = "the CPUs' hot sets agree: one chain for all";
    return {};
  }
  double saving = globalCost - (perCpuCost + switchCost);
  if (saving < options.costs.minimumSavingNs) {
    why = "per-CPU chains would save " + ns(std::max(0.0, saving)) +
          " per lookup over one chain, the switch on the CPU number paid: one chain for all";
    return {};
  }
  why = std::to_string(chains.size()) + " CPUs with chains of their own, " + ns(saving) +
        " per lookup saved over one chain";
  return chains;
}

SiteTraffic TrafficProfile::decide(unsigned id, TableMatch match, uint32_t keySize) {
  return decideWith(id, options.costs.lookupNs(match), keySize, true);
}

SiteTraffic TrafficProfile::decideFlow(unsigned id, double savingNs, uint32_t tupleBytes) {
  return decideWith(id, savingNs, tupleBytes, false);
}

SiteTraffic TrafficProfile::decideWith(unsigned id, double lookupNs, uint32_t keySize,
                                       bool perCpu) {
  Site &at = site(id);
  Ranking top = rank(counts(id));
  const std::vector<double> &shares = top.shares;
  double compareNs = options.costs.perCompareNs(keySize);
  size_t size = fastPathSize(shares, compareNs, lookupNs, options.costs.minimumSavingNs,
                             options.maxFastPath);
  std::vector<Bytes> chosen(top.keys.begin(), top.keys.begin() + size);
  std::string perCpuWhy;
  PerCpuHotKeys perCpuHot =
      perCpu ? perCpuChains(id, chosen, compareNs, lookupNs, perCpuWhy) : PerCpuHotKeys();

  // Did the heavy hitters that matter move? Compared as sets (their order
  // among themselves changes with noise), and only the keys worth a fast
  // path: the noise under them moves all the time.
  // Per-CPU chains' keys count as chosen too.
  std::set<Bytes> now(chosen.begin(), chosen.end()),
      before(at.previousChosen.begin(), at.previousChosen.end());
  for (const auto &[cpu, keys] : perCpuHot)
    now.insert(keys.begin(), keys.end());
  size_t common = 0;
  for (const Bytes &key : now)
    common += before.count(key);
  // Churn is a fast path losing its keys: a hot set that only gains keys
  // (found where there was none, or completed as the counts build up over
  // a shift) is not.
  bool previousKept = double(common) >= 0.75 * double(before.size());
  // A fast path whose keys the data plane rewrote lasted less than a period.
  bool stable = previousKept && !at.invalidatedThisCycle;
  bool invalidated = at.invalidatedThisCycle;
  at.invalidatedThisCycle = false;
  at.previousChosen.assign(now.begin(), now.end());
  if (stable) {
    ++at.stableInARow;
    at.shiftedInARow = 0;
  } else {
    ++at.shiftedInARow;
    at.stableInARow = 0;
  }

  SiteTraffic decision;
  if (options.mode == ProfileMode::Adaptive) {
    // The data plane keeps the last `slots` samples of each CPU: a cycle
    // that wrote more shows only its own end, which on bursty traffic (a
    // flow's packets in runs, as a trace's locality gives them) is one or
    // two flows. The period that would have just filled the slots spreads
    // them over the whole cycle. Only a hot set losing its keys speeds the
    // sampling up (a short window of the newest traffic, to find the new
    // set); one that only gains keys is being completed by the wider view.
    uint64_t most = 0;
    for (const auto &[cpu, written] : at.writtenOn)
      most = std::max(most, written);
    if (!previousKept)
      at.period = std::max(options.minPeriod, at.period / 8);
    else if (most >= options.slots)
      at.period = uint32_t(std::min<uint64_t>(
          options.maxPeriod, uint64_t(at.period) * std::max<uint64_t>(
                                                       2, llvm::PowerOf2Ceil(
                                                              most / options.slots))));
    else if (most < options.slots / 4)
      at.period = std::max(options.minPeriod, at.period / 2);
  }
  decision.period = at.period;

  if (at.churning && at.stableInARow >= options.calmCycles)
    at.churning = false;
  else if (!at.churning && at.shiftedInARow >= options.churnCycles)
    at.churning = true;
  decision.churning = at.churning;
  if (at.churning) {
    decision.why = "heavy hitters changed or their write guards fired in " +
                   std::to_string(options.churnCycles) +
                   "+ cycles in a row: no fast path until they hold still for " +
                   std::to_string(options.calmCycles) +
                   (invalidated ? " (the data plane wrote a hot key this cycle)" : "");
    return decision;
  }
  decision.hotKeys = chosen;
  decision.perCpuHotKeys = perCpuHot;
  double covered = 0;
  for (size_t i = 0; i < size; ++i)
    covered += shares[i];
  decision.why = size ? std::to_string(size) + " hot keys, " +
                            std::to_string(int(covered * 100 + 0.5)) + "% of the samples"
                      : "no set of hot keys pays for its compares";
  if (!perCpuWhy.empty())
    decision.why += "; " + perCpuWhy;
  return decision;
}

} // namespace morpheus::core
