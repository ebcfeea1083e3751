#include "core/TrafficFollowing.h"

#include "core/WriteGuards.h"

#include <llvm/Support/SwapByteOrder.h>

#include <algorithm>
#include <set>
#include <utility>

namespace morpheus::core {

std::map<unsigned, std::vector<Bytes>> TrafficChoice::comparedKeys() const {
  std::map<unsigned, std::set<Bytes>> keys;
  for (const auto &[site, chain] : hotKeys)
    keys[site].insert(chain.begin(), chain.end());
  for (const auto &[site, cpus] : perCpuHotKeys)
    for (const auto &[cpu, chain] : cpus)
      keys[site].insert(chain.begin(), chain.end());
  std::map<unsigned, std::vector<Bytes>> every;
  for (const auto &[site, set] : keys)
    every[site].assign(set.begin(), set.end());
  return every;
}

// Data planes run with the host's byte order (the kernel's programs and the
// JIT-compiled handlers alike).
uint32_t TrafficFollower::bucketOf(const std::string &table, const Bytes &key) const {
  return writeBucket(table, key, source->writeBucketBits(), llvm::sys::IsLittleEndianHost);
}

Error TrafficFollower::record() {
  if (!source)
    return Error::success();
  for (const auto &[site, profiled] : profiledSites) {
    auto samples = source->samples(site, profiled.keySize);
    if (!samples)
      return samples.takeError();
    for (const TrafficSource::Samples &cpu : *samples) {
      if (cpu.keys.empty())
        continue;
      // Each kept key stands for the lookups between samples, and for the
      // samples the data plane could not keep.
      double weight = double(std::max<uint32_t>(cpu.period, 1)) * double(cpu.written) /
                      double(cpu.keys.size());
      profile.add(site, cpu.cpu, cpu.keys, weight, cpu.written);
      if (auto chain = fastPaths.find(site); chain != fastPaths.end()) {
        FastPathHits &hits = hitsSinceDecide[site];
        hits.table = profiled.table;
        hits.samples += cpu.keys.size();
        hits.lookups += weight * double(cpu.keys.size());
        for (const Bytes &key : cpu.keys)
          if (chain->second.covers(cpu.cpu, key))
            hits.hits += weight;
      }
    }
  }
  return Error::success();
}

Error TrafficFollower::decide(const TableCatalog &catalog,
                              std::map<unsigned, SiteTraffic> &decisions) {
  chosen = {};
  if (!source)
    return Error::success();
  if (Error err = record())
    return err;
  lastHits = std::exchange(hitsSinceDecide, {});
  for (const auto &[site, profiled] : profiledSites) {
    SiteTraffic decision;
    if (profiled.flowSavingNs) {
      // A flow's tuples: no lookup of their own to probe or to guard.
      decision = profile.decideFlow(site, *profiled.flowSavingNs, profiled.keySize);
      if (!decision.hotKeys.empty())
        chosen.hotTuples[site] = decision.hotKeys;
    } else {
      auto invalidated = writesInvalidated(site, profiled.table);
      if (!invalidated)
        return invalidated.takeError();
      if (*invalidated)
        profile.writesInvalidated(site);
      decision = profile.decide(site, catalog.at(profiled.table).match, profiled.keySize);
      if (!decision.hotKeys.empty())
        chosen.hotKeys[site] = decision.hotKeys;
      if (!decision.perCpuHotKeys.empty())
        chosen.perCpuHotKeys[site] = decision.perCpuHotKeys;
    }
    if (Error err = source->setPeriod(site, decision.period))
      return err;
    decisions[site] = std::move(decision);
  }
  // This cycle's counts weigh less in the next; samples recorded between
  // cycles (record()) count in full.
  profile.beginCycle();
  return Error::success();
}

Error TrafficFollower::readWriteCounts(uint64_t cycle) {
  chosen.writeCounts.clear();
  if (!source)
    return Error::success();
  if (!source->genericCountsWrites() && (!countingWritesSince || cycle <= countingWritesSince))
    return Error::success();
  for (const auto &[site, keys] : chosen.comparedKeys())
    for (const Bytes &key : keys) {
      uint32_t bucket = bucketOf(profiledSites.at(site).table, key);
      auto count = source->writeCount(bucket);
      if (!count)
        return count.takeError();
      chosen.writeCounts[bucket] = *count;
    }
  return Error::success();
}

void TrafficFollower::addProbes(ReadPlan &plan) const {
  for (const auto &[site, keys] : chosen.comparedKeys()) {
    std::vector<Bytes> &probe = plan[profiledSites.at(site).table].keys;
    probe.insert(probe.end(), keys.begin(), keys.end());
  }
}

Expected<bool> TrafficFollower::writesInvalidated(unsigned site, const std::string &table) const {
  std::map<unsigned, std::vector<Bytes>> compared = installed.comparedKeys();
  auto hot = compared.find(site);
  if (hot == compared.end())
    return false;
  for (const Bytes &key : hot->second) {
    auto built = installed.writeCounts.find(bucketOf(table, key));
    if (built == installed.writeCounts.end())
      continue;
    auto now = source->writeCount(built->first);
    if (!now)
      return now.takeError();
    if (*now != built->second)
      return true;
  }
  return false;
}

Error TrafficFollower::beforeInstall(const std::map<unsigned, ProfiledSite> &profiled) {
  if (!source)
    return Error::success();
  for (const auto &[site, sampled] : profiled)
    if (!profiledSites.count(site))
      if (Error err = source->setPeriod(site, profile.initialPeriod()))
        return err;
  return Error::success();
}

Error TrafficFollower::afterInstall(uint64_t cycle,
                                    const std::map<unsigned, ProfiledSite> &profiled,
                                    const std::map<unsigned, FastPathKeys> &chains) {
  installed = chosen;
  fastPaths = chains;
  hitsSinceDecide.clear(); // the samples of the version replaced
  if (!source)
    return Error::success();
  std::map<unsigned, ProfiledSite> dropped = std::exchange(profiledSites, profiled);
  if (!countingWritesSince)
    countingWritesSince = cycle;
  for (const auto &[site, sampled] : dropped)
    if (!profiled.count(site))
      if (Error err = source->setPeriod(site, 0))
        return err;
  return Error::success();
}

} // namespace morpheus::core
