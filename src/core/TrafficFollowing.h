// Following the traffic, the same for every backend: what the running
// version's instrumented sites sampled is counted (core::TrafficProfile),
// each site's sampling period and fast path decided, the write counters
// the fast paths over written tables are built under read before the
// snapshot, and what the installed version was built with remembered, so
// that a cycle knows whether anything the traffic decides has changed. A
// backend says only where its data plane keeps the samples and the write
// counters (TrafficSource); everything decided from them is here, once.
#pragma once

#include "core/SpecializationLog.h"
#include "core/Tables.h"
#include "core/TrafficProfile.h"
#include "support/Error.h"

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace morpheus::core {

// Where a data plane keeps what its instrumented versions record.
class TrafficSource {
public:
  virtual ~TrafficSource() = default;

  // One CPU's (one loop thread's) samples at one site since the previous read.
  struct Samples {
    unsigned cpu = 0;
    std::vector<Bytes> keys; // the latest kept, cut to the site's key size
    uint64_t written = 0;    // samples taken since the previous read
    uint32_t period = 0;     // the period they were taken at
  };
  virtual Expected<std::vector<Samples>> samples(unsigned site, uint32_t keySize) = 0;
  // One lookup in `period` sampled at `site` from now on (0: none).
  virtual Error setPeriod(unsigned site, uint32_t period) = 0;

  // The per-entry write guards' counters (guard-table-writes), by bucket
  // of `writeBucketBits` bits.
  virtual unsigned writeBucketBits() const = 0;
  virtual Expected<uint64_t> writeCount(uint32_t bucket) = 0;
  // Whether the generic code counts writes too. When it does not (the
  // eBPF backend's original program), a fast path over a written table is
  // built only once a version counting them has run a whole period: no
  // packet of the generic code can then be writing uncounted.
  virtual bool genericCountsWrites() const = 0;
};

// What a version is built with from the traffic: the fast paths' keys and
// the write counts they are guarded under.
struct TrafficChoice {
  std::map<unsigned, std::vector<Bytes>> hotKeys;     // per site, one chain for every CPU
  std::map<unsigned, PerCpuHotKeys> perCpuHotKeys;    // per site, chains of some CPUs
  std::map<unsigned, std::vector<Bytes>> hotTuples;   // per flow (flow-fast-path)
  std::map<uint32_t, uint64_t> writeCounts;           // by bucket, read before the snapshot
  bool operator==(const TrafficChoice &) const = default;

  // Every key each site's fast paths compare, its global chain's and its
  // CPUs' own, each once.
  std::map<unsigned, std::vector<Bytes>> comparedKeys() const;
};

// How often the installed version's fast path at a site answered, told by
// the keys its site sampled (instrument-table-sites records every lookup's
// key before the chain, hit or miss; the generic copy records none): each
// sampled key stands for the lookups it is weighted by in the counts
// (record()), and it is a hit when the chain its CPU takes compares it
// (FastPathKeys::covers). An estimate: a hit here still goes to the lookup
// when a written table's write count for that key moved.
struct FastPathHits {
  std::string table;
  uint64_t samples = 0; // keys read
  double lookups = 0;   // the lookups they stand for
  double hits = 0;      // of those, the ones whose key the fast path compares
  double ratio() const { return lookups > 0 ? hits / lookups : 0; }
};

class TrafficFollower {
public:
  // `source` null: the versions are not instrumented; nothing is followed.
  TrafficFollower(TrafficProfileOptions options, TrafficSource *source)
      : profile(options), source(options.mode == ProfileMode::Off ? nullptr : source) {}

  bool following() const { return source != nullptr; }
  const TrafficProfile &counts() const { return profile; }

  // Counts what the installed version's sites sampled since the last read.
  // A site keeps only its latest samples, so a data plane whose samples
  // are in reach between cycles (a loop between bursts) reads them often.
  Error record();
  // The start of a cycle: records, then decides per profiled site its
  // period (set at once) and its fast path for the next version, into
  // `decisions`. Forgets the previous cycle's choice.
  Error decide(const TableCatalog &catalog, std::map<unsigned, SiteTraffic> &decisions);
  // Before the tables are read: the write counts the chosen fast paths
  // over written tables are built under (GuardTableWrites.cpp says why in
  // this order). None until the data plane counts every write.
  Error readWriteCounts(uint64_t cycle);
  // The chosen hot keys' answers, probed one by one (for an LPM trie, its
  // answer to exactly that lookup).
  void addProbes(ReadPlan &plan) const;

  // Per site with a fast path in the installed version, what its samples
  // counted by the last decide() (those recorded since the decide before)
  // tell of its hits; sites that sampled nothing are absent.
  const std::map<unsigned, FastPathHits> &fastPathHits() const { return lastHits; }

  const TrafficChoice &choice() const { return chosen; }
  const TrafficChoice &installedChoice() const { return installed; }

  // A version built with choice() and recording `profiled` is about to
  // run: its new sites start sampling (a site no running version records
  // writes nothing).
  Error beforeInstall(const std::map<unsigned, ProfiledSite> &profiled);
  // It runs now: the sites it no longer records stop sampling, and its
  // choice is what the next cycles compare against; `fastPaths` are the
  // chains it compares (what fastPathHits() counts hits of).
  Error afterInstall(uint64_t cycle, const std::map<unsigned, ProfiledSite> &profiled,
                     const std::map<unsigned, FastPathKeys> &fastPaths);
  // A cycle found the installed version still right, built from an equal
  // snapshot: it stays, and it stands for this cycle's choice.
  void keptInstalled() { installed = chosen; }

private:
  // Whether the data plane wrote a key the installed fast path at `site`
  // answers since that version was built: its per-entry guard fired.
  Expected<bool> writesInvalidated(unsigned site, const std::string &table) const;
  uint32_t bucketOf(const std::string &table, const Bytes &key) const;

  TrafficProfile profile;
  TrafficSource *source;
  std::map<unsigned, ProfiledSite> profiledSites; // by the installed version
  std::map<unsigned, FastPathKeys> fastPaths;     // the installed version's chains
  // Hits counted by record() since the last decide(), and at it.
  std::map<unsigned, FastPathHits> hitsSinceDecide, lastHits;
  TrafficChoice chosen, installed;
  // The cycle that installed the first version counting writes (0: none yet).
  uint64_t countingWritesSince = 0;
};

} // namespace morpheus::core
