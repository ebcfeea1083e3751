// What the traffic says about each instrumented lookup site: keys sampled by
// the data plane (instrument-table-sites), counted in user space, merged
// across CPUs (the global heavy hitters) with per-CPU views kept, aged each
// cycle. From the counts, per site: the sampling period for the next cycle
// (adaptive: longer while the heavy hitters stay put, shorter when they
// move), whether the site churns too much for a traffic-dependent fast path,
// and the fast path itself, sized by what it saves (heavy-hitter-fast-path).
#pragma once

#include "core/Tables.h"

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// What a fast path costs and saves, in ns per packet. The lookup costs are
// the helpers' measured on this machine kind (/work/shared/measuring.md:
// hash ~29, LPM ~35 for 500 prefixes, an array lookup the verifier inlines
// ~0.6); a compare is a load, a compare and a branch per 8-byte word.
struct FastPathCosts {
  double compareNs = 0.4;      // one hot key of up to 8 bytes
  double compareWordNs = 0.2;  // each further 8-byte word of the key
  double exactLookupNs = 29;
  double longestPrefixLookupNs = 35;
  double indexLookupNs = 0.6;
  // Reading the CPU number for per-CPU fast paths: bpf_get_smp_processor_id,
  // which the verifier inlines on x86-64 (a load from the per-CPU area; no
  // helper call). Each CPU with a chain of its own adds a compare on top.
  double cpuNumberNs = 0.5;
  // A fast path is installed only when it saves at least this much.
  double minimumSavingNs = 1.0;

  double lookupNs(TableMatch match) const;
  double perCompareNs(uint32_t keySize) const;
};

// How many of the hottest keys (shares of the traffic, hottest first) a
// fast path should compare: the number that minimises the expected cost
// per lookup (each key's compares for the hits, every compare plus the
// lookup for the misses), or 0 when even the best saves less than
// `minimumSavingNs` over the lookup alone.
size_t fastPathSize(const std::vector<double> &shares, double compareNs, double lookupNs,
                    double minimumSavingNs, size_t limit);

// The expected cost per lookup of a chain comparing keys whose shares of
// the traffic are `shares`, in chain order: key i (from 1) costs i
// compares, a miss all of them and the lookup. No key: the lookup alone.
double chainCostNs(const std::vector<double> &shares, double compareNs, double lookupNs);

enum class ProfileMode {
  Off,      // no instrumentation, no fast paths
  Adaptive, // sampled, period adapted per site
  Naive,    // every lookup recorded (for comparison)
};

struct TrafficProfileOptions {
  ProfileMode mode = ProfileMode::Adaptive;
  // Packets per sample, powers of two (the data plane jitters around them).
  uint32_t initialPeriod = 64; // at first
  uint32_t minPeriod = 4;
  uint32_t maxPeriod = 4096;
  double decay = 0.5;          // counts kept from one cycle to the next
  // A key whose share is below this is never hot (with 64 samples a cycle,
  // a key seen once is noise).
  double minShare = 0.03;
  size_t maxFastPath = 16;     // keys compared at most (verifier paths)
  // Samples the data plane keeps per site and CPU between two reads (the
  // last ones it took): the period that just fills them spreads them over
  // the whole cycle; a shorter one shows only the cycle's end, a longer
  // one starves the counts.
  uint32_t slots = 64;
  // Heavy hitters that changed, or whose per-entry write guards fired
  // (writesInvalidated), in this many cycles in a row drop the fast path;
  // calmCycles stable cycles bring it back.
  unsigned churnCycles = 3;
  unsigned calmCycles = 2;
  // Chains of their own for CPUs whose hot sets differ (perCpuChains()):
  // off, one chain for every CPU (the bench's comparison).
  bool perCpuChains = true;
  FastPathCosts costs;
};

// Per-CPU fast paths of one site: by CPU number, the chain that CPU takes
// (hottest first; empty: the lookup alone). A CPU not listed takes the
// site's global chain.
using PerCpuHotKeys = std::map<unsigned, std::vector<Bytes>>;

// One site's decision for the next specialization.
struct SiteTraffic {
  std::vector<Bytes> hotKeys; // for the fast path, hottest first; empty: none
  // Chains of their own for the CPUs whose hot sets differ from the global
  // one, when they pay for reading the CPU number (empty: one chain for
  // every CPU). Only with a global decision to follow the traffic: never
  // while churning.
  PerCpuHotKeys perCpuHotKeys;
  uint32_t period = 0;        // packets per sample from now on
  bool churning = false;
  std::string why;            // for people: what was decided and why
};

class TrafficProfile {
public:
  explicit TrafficProfile(TrafficProfileOptions options = {}) : options(options) {}

  // The sampling period a site starts with.
  uint32_t initialPeriod() const;
  const TrafficProfileOptions &settings() const { return options; }

  // Ages every count: a new cycle's samples weigh more than old ones.
  void beginCycle();
  // Keys a CPU recorded at `site` this cycle; each stands for `weight`
  // lookups (the period it was sampled at, scaled up when the data plane
  // wrote more samples than it keeps). `written` is how many samples the
  // data plane took this cycle at this site on this CPU.
  void add(unsigned site, unsigned cpu, const std::vector<Bytes> &keys, double weight,
           uint64_t written);
  // The data plane wrote a hot key of `site`'s fast path this cycle (a
  // per-entry write guard fired: guard-table-writes): for churn, a cycle
  // in which the hot set did not hold.
  void writesInvalidated(unsigned site);
  // Ends the cycle for `site`: its next period, churn, and its fast path.
  SiteTraffic decide(unsigned site, TableMatch match, uint32_t keySize);
  // The same for a flow's tuples (flow-fast-path): a hot tuple's hit saves
  // `savingNs` (the flow's lookups), each compared tuple costs a compare of
  // its size. One chain for every CPU.
  SiteTraffic decideFlow(unsigned site, double savingNs, uint32_t tupleBytes);

  // Counts (estimated lookups, aged) of `site`, all CPUs merged, and per CPU.
  std::map<Bytes, double> counts(unsigned site) const;
  std::map<Bytes, double> countsOn(unsigned site, unsigned cpu) const;

private:
  // The keys worth a place in a chain, hottest first, with their shares of
  // `counts`' total (at least minShare, at most maxFastPath of them).
  struct Ranking {
    std::vector<Bytes> keys;
    std::vector<double> shares;
  };
  Ranking rank(const std::map<Bytes, double> &counts) const;
  // Per-CPU chains for `id`, or none when one `global` chain serves every
  // CPU as well (within minimumSavingNs, the switch on the CPU number
  // paid); `why` says which and why.
  PerCpuHotKeys perCpuChains(unsigned id, const std::vector<Bytes> &global,
                             double compareNs, double lookupNs, std::string &why) const;
  SiteTraffic decideWith(unsigned id, double lookupNs, uint32_t keySize, bool perCpu);

  struct Site {
    std::map<unsigned, std::map<Bytes, double>> perCpu;
    std::map<unsigned, uint64_t> writtenOn; // samples taken this cycle, by CPU
    bool invalidatedThisCycle = false;
    uint32_t period = 0;
    std::vector<Bytes> previousChosen; // the previous cycle's hot keys
    unsigned shiftedInARow = 0;
    unsigned stableInARow = 0;
    bool churning = false;
  };
  Site &site(unsigned id);

  TrafficProfileOptions options;
  std::map<unsigned, Site> sites;
};

} // namespace morpheus::core
