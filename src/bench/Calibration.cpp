#include "Calibration.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/TestRun.h"
#include "runtime/CostCalibration.h"

#include <linux/bpf.h>

#include <llvm/ADT/ArrayRef.h>
#include <llvm/Support/FormatVariadic.h>

#include <arpa/inet.h>
#include <cmath>
#include <ctime>
#include <fstream>
#include <random>
#include <unistd.h>

extern "C" const unsigned char bench_calibrate_start[], bench_calibrate_end[];

namespace morpheus::bench {

namespace {

// A program of calibrate.bpf.c and the operations it does per run.
struct Probe {
  const char *program;
  double operations;
};

constexpr Probe Control = {"control", 1}, FlowControl = {"control_flow", 1};
constexpr Probe Hash = {"hash_lookup", 16}, Array = {"array_lookup", 16},
                Helper = {"helper_call", 16}, Trie = {"trie_lookup", 16};
constexpr uint32_t TableKeys = 1024;              // hash_table, array_table
constexpr uint32_t Flows = 1024;                  // flows
constexpr uint32_t TrieSizes[] = {2, 16, 256, 4096}; // prefixes

// A probe of an operation whose cost depends on a size.
struct SizedProbe {
  Probe probe;
  double size;
};
// Searches by intervals (the probe's operations: its levels), derived
// loads by table bytes.
constexpr SizedProbe Searches[] = {
    {{"search_4", 2}, 4}, {{"search_32", 5}, 32}, {{"search_256", 8}, 256}};
// Compare chains by their compares.
constexpr SizedProbe Chains[] = {{{"compare_chain_8", 8}, 8},
                                 {{"compare_chain_64", 64}, 64},
                                 {{"compare_chain_512", 512}, 512},
                                 {{"compare_chain_4096", 4096}, 4096}};
constexpr SizedProbe DerivedLoads[] = {{{"derived_load_4k", 8}, 4096},
                                       {{"derived_load_128k", 8}, 128 * 1024},
                                       {{"derived_load_1m", 8}, 1024 * 1024}};

double loadAverage() {
  std::ifstream in("/proc/loadavg");
  double load = 0;
  in >> load;
  return load;
}

// Mean ns per run of `fd` over `runs` runs (the kernel's own clock).
Expected<double> timeRuns(int fd, const char *name, uint32_t runs) {
  uint8_t packet[64] = {}; // an Ethernet-sized frame; the programs never read it
  bpf::TestRunInput run;
  run.packet = packet;
  run.repeat = runs;
  auto ran = bpf::testRun(fd, run);
  if (!ran)
    return withContext(ran.takeError(), std::string("calibration: program ") + name);
  return double(ran->meanNs);
}

// Per round, in an order rotated by the round, each probe and the control;
// returns per probe ns per operation, per round.
Expected<std::vector<Series>> measure(const bpf::LoadedObject &object,
                                      const std::vector<Probe> &probes,
                                      const CalibrationOptions &options,
                                      Probe control = Control) {
  std::vector<Probe> rotation = probes;
  rotation.push_back(control);
  std::vector<Series> perProbe(probes.size());
  for (uint32_t round = 0; round < options.rounds; ++round) {
    std::vector<double> ns(rotation.size());
    for (size_t k = 0; k < rotation.size(); ++k) {
      size_t i = (k + round) % rotation.size();
      auto time = timeRuns(object.programFd(rotation[i].program), rotation[i].program,
                           options.runs);
      if (!time)
        return time.takeError();
      ns[i] = *time;
    }
    for (size_t i = 0; i < probes.size(); ++i)
      perProbe[i].values.push_back((ns[i] - ns.back()) / probes[i].operations);
  }
  return perProbe;
}

Error fillTable(int fd, const char *name) {
  bpf::MapAccess table(fd, name);
  for (uint32_t key = 0; key < TableKeys; ++key)
    if (Error err = table.put(key, key))
      return withContext(std::move(err), "calibration");
  return Error::success();
}

// The flows' destinations: random addresses, in network order.
Error fillFlows(int fd, std::mt19937 &random) {
  bpf::MapAccess flows(fd, "flows");
  for (uint32_t index = 0; index < Flows; ++index) {
    uint32_t address = htonl(uint32_t(random()));
    if (Error err = flows.put(index, address))
      return withContext(std::move(err), "calibration");
  }
  return Error::success();
}

// Measures `sized` against `control`: per probe, its series of ns per
// operation, named `what` and the size, and the curve of its medians.
Expected<core::SizeCurve> measureBySize(const bpf::LoadedObject &object,
                                        llvm::ArrayRef<SizedProbe> sized, const char *what,
                                        const CalibrationOptions &options,
                                        CalibrationResult &result, Probe control) {
  std::vector<Probe> probes;
  for (const SizedProbe &probe : sized)
    probes.push_back(probe.probe);
  auto measured = measure(object, probes, options, control);
  if (!measured)
    return measured.takeError();
  core::SizeCurve curve;
  for (size_t i = 0; i < sized.size(); ++i) {
    result.operations.push_back({llvm::formatv(what, uint64_t(sized[i].size)).str(), (*measured)[i]});
    curve.points.emplace_back(sized[i].size, std::max(0.0, (*measured)[i].median()));
  }
  return curve;
}

struct TrieKey {
  uint32_t prefixlen;
  uint32_t address; // network order
};

// Replaces the trie's prefixes by `count` random ones of /8 to /32.
Error fillTrie(int fd, std::vector<TrieKey> &stored, uint32_t count, std::mt19937 &random) {
  bpf::MapAccess trie(fd, "trie");
  for (const TrieKey &key : stored)
    if (auto removed = trie.remove(byteView(key)); !removed)
      return withContext(removed.takeError(), "calibration");
  stored.clear();
  while (stored.size() < count) {
    uint32_t length = 8 + random() % 25;
    uint32_t address = uint32_t(random()) & (length == 32 ? ~0u : ~(~0u >> length));
    TrieKey key = {length, htonl(address)};
    uint32_t value = uint32_t(stored.size());
    auto added = trie.insert(byteView(key), byteView(value));
    if (!added)
      return withContext(added.takeError(),
                         llvm::formatv("calibration: adding prefix {0} of {1} to the trie",
                                       stored.size() + 1, count)
                             .str());
    if (*added)
      stored.push_back(key);
  }
  return Error::success();
}

std::string utcNow() {
  char text[32];
  std::time_t now = std::time(nullptr);
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M UTC", std::gmtime(&now));
  return text;
}

} // namespace

Expected<CalibrationResult> calibrate(const CalibrationOptions &options) {
  if (options.rounds == 0 || options.runs == 0)
    return makeError("calibration: rounds and runs must be at least 1");
  CalibrationResult result;
  result.loadAverage = loadAverage();
  pinToCpu(options.cpu >= 0 ? options.cpu : int(sysconf(_SC_NPROCESSORS_ONLN)) - 1);
  auto object = bpf::LoadedObject::load(
      {reinterpret_cast<const char *>(bench_calibrate_start),
       size_t(bench_calibrate_end - bench_calibrate_start)},
      "bench_calibrate", {});
  if (!object)
    return withContext(object.takeError(), "calibration");
  if (Error err = fillTable(object->mapFd("hash_table"), "hash_table"))
    return err;
  if (Error err = fillTable(object->mapFd("array_table"), "array_table"))
    return err;

  if (options.progress)
    options.progress(llvm::formatv("calibrating: {0} rounds of {1} runs per program",
                                   options.rounds, options.runs)
                         .str());
  std::vector<Probe> probes = {Hash, Array, Helper};
  auto units = measure(*object, probes, options);
  if (!units)
    return units.takeError();
  const char *names[] = {"hash lookup (1,024 keys of 4 bytes)", "array lookup (inlined)",
                         "helper call (bpf_get_prandom_u32)"};
  for (size_t i = 0; i < probes.size(); ++i)
    result.operations.push_back({names[i], (*units)[i]});

  auto compare = measureBySize(*object, Chains, "compare in a chain of {0}", options, result,
                               Control);
  if (!compare)
    return compare.takeError();

  std::mt19937 random(1);
  if (Error err = fillFlows(object->mapFd("flows"), random))
    return err;
  auto searchLevel = measureBySize(*object, Searches,
                                   "binary search level, {0} intervals (1,024 flows)", options,
                                   result, FlowControl);
  if (!searchLevel)
    return searchLevel.takeError();
  auto derivedLoad = measureBySize(*object, DerivedLoads,
                                   "derived-table load, {0} bytes (dependent)", options, result,
                                   FlowControl);
  if (!derivedLoad)
    return derivedLoad.takeError();

  std::vector<TrieKey> stored;
  core::SizeCurve trie;
  for (uint32_t size : TrieSizes) {
    if (Error err = fillTrie(object->mapFd("trie"), stored, size, random))
      return err;
    auto lookups = measure(*object, {Trie}, options);
    if (!lookups)
      return lookups.takeError();
    trie.points.emplace_back(double(size), std::max(0.0, (*lookups)[0].median()));
    result.operations.push_back(
        {llvm::formatv("LPM trie lookup, {0} prefixes", size).str(), (*lookups)[0]});
  }

  auto median = [&](size_t i) { return std::max(0.0, (*units)[i].median()); };
  core::OperationCosts costs;
  costs.hashLookupNs = median(0);
  costs.arrayLookupNs = median(1);
  costs.helperCallNs = median(2);
  costs.compareNs = std::move(*compare);
  costs.searchLevelNs = std::move(*searchLevel);
  costs.derivedLoadNs = std::move(*derivedLoad);
  costs.lpmLookupNs = std::move(trie);
  result.model = core::CostModel(
      costs, llvm::formatv("calibrated on {0}, {1}, load {2:f1}, {3} rounds of {4} runs",
                           runtime::machineDescription(), utcNow(), result.loadAverage,
                           options.rounds, options.runs)
                 .str());
  return result;
}

std::string formatCalibration(const CalibrationResult &result) {
  std::string text = result.model.source() + "\n";
  text += "  operation                                    ns (median)   min-max\n";
  for (const MeasuredOperation &operation : result.operations)
    text += llvm::formatv("  {0,-44} {1,8:f2}   ({2:f2}-{3:f2})\n", operation.name,
                          operation.ns.median(), operation.ns.min(), operation.ns.max());
  return text;
}

} // namespace morpheus::bench
