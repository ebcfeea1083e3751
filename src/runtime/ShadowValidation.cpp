#include "runtime/ShadowValidation.h"

#include "backend/bpf/BpfObject.h"
#include "core/PhaseClock.h"
#include "runtime/PacketSamples.h"
#include "runtime/VersionComparison.h"
#include "support/CpuPin.h"

#include <linux/bpf.h>
#include <nlohmann/json.hpp>

namespace morpheus::runtime {
namespace {

using core::Bytes;

// Packets aimed at the keys the snapshot holds, their fields placed where
// the live maps' BTF says the keys hold them (an LPM key starts with its
// prefix length, which no header carries: its words are used as they are).
Expected<std::vector<SamplePacket>> samplePackets(const LiveMaps &live,
                                                  const core::TableSnapshot &snapshot,
                                                  const ContextPlan &context,
                                                  const ShadowOptions &options) {
  std::vector<KeyedTable> tables;
  bpf::KernelTypes types;
  for (const auto &[name, contents] : snapshot) {
    auto fd = live.maps.find(name);
    if (fd == live.maps.end())
      continue;
    auto layout = bpf::layoutOf(fd->second, name);
    if (!layout)
      return layout.takeError();
    KeyedTable table{layout->type, {}, {}};
    if (layout->btfId && layout->type != BPF_MAP_TYPE_LPM_TRIE)
      table.keyFields = types.integerFields(layout->btfId, layout->btfKeyTypeId);
    for (const core::TableEntry &entry : contents.entries)
      table.entries.emplace_back(entry.key, entry.value.value_or(Bytes()));
    for (const Bytes &key : contents.probedKeys)
      table.entries.emplace_back(key, Bytes());
    tables.push_back(std::move(table));
  }
  Rng rng(options.seed);
  return synthesizePackets(tables, rng, options.packets, context);
}

} // namespace

Expected<ShadowVerdict> shadowValidate(const bpf::ProgramSpec &spec, const std::string &entry,
                                       llvm::ArrayRef<char> candidate, uint64_t candidateVersion,
                                       const LiveMaps &live, const core::TableSnapshot &snapshot,
                                       const ShadowOptions &options) {
  std::string context = "shadow validation of " + spec.objectName();
  // Every version on one CPU: per-CPU maps (and the CPU id a program reads)
  // then match between them.
  CpuPin pin;
  if (!pin.ok())
    return makeSystemError(errno, "{0}: cannot pin to one CPU", context);
  ShadowVerdict verdict;
  core::PhaseClock clock(verdict.phases);
  // Scratch maps hold a window of the live ones, not all of them: creating
  // and zeroing full-size copies of a load balancer's rings or a firewall's
  // bit vectors three times per cycle would cost more than the cycle itself.
  // Hash-like copies get room for the window, the keys read and what the
  // sample may insert.
  VersionComparison::Options comparing;
  comparing.sizing.window = options.entryBudget;
  comparing.sizing.headroom = 4 * options.packets + 64;
  Reproducer reproducer;
  reproducer.check = "shadow validation";
  reproducer.program = spec.path();
  reproducer.entry = entry;
  reproducer.guardVersion = candidateVersion;
  reproducer.seed = options.seed;
  for (const auto &[name, contents] : snapshot) {
    std::vector<Bytes> &keys = comparing.sizing.keys[name];
    for (const core::TableEntry &read : contents.entries) {
      keys.push_back(read.key);
      if (read.value)
        reproducer.maps[name].emplace_back(read.key, *read.value);
    }
    keys.insert(keys.end(), contents.probedKeys.begin(), contents.probedKeys.end());
  }
  comparing.guardVersion = candidateVersion;
  comparing.programs = options.programs;
  comparing.faults = options.faults;
  clock.end("the snapshot's keys and entries gathered");
  auto comparison = VersionComparison::create(spec, entry, live, comparing);
  if (!comparison)
    return withContext(comparison.takeError(), context);
  clock.append((*comparison)->setupPhases());
  if (Error err = (*comparison)->loadSpecialized(candidate))
    return withContext(std::move(err), context);
  clock.end("load and verify the specialized copy");
  auto plan = planContext(spec, entry, options.faults.zeroedContext);
  if (!plan)
    return withContext(plan.takeError(), context);
  auto packets = samplePackets(live, snapshot, *plan, options);
  if (!packets)
    return withContext(packets.takeError(), context);
  clock.end("sample packets");
  auto refuse = [&](std::string difference) {
    verdict.difference = reproducer.difference = std::move(difference);
    reproducer.differingPacket = verdict.packet;
    verdict.reproducer = reproducer.toJson().dump(1);
    return verdict;
  };
  const std::map<std::string, std::vector<Bytes>> &keys = comparing.sizing.keys;
  for (const SamplePacket &packet : *packets) {
    Step step{packet};
    auto outcome = (*comparison)->run(step, MapCheck::None, keys);
    if (!outcome)
      return withContext(outcome.takeError(), context);
    Reproducer::Packet &seen = reproducer.packets.emplace_back();
    seen.step = step;
    for (size_t version = 0; version < VersionCount; ++version)
      seen.results[version] = outcome->observed[version];
    ++verdict.packets;
    verdict.nondeterministic += outcome->nondeterministic;
    if (outcome->difference) {
      verdict.packet = verdict.packets;
      return refuse(*outcome->difference);
    }
  }
  clock.end("packets run through the three copies");
  auto maps = (*comparison)->compareMaps(MapCheck::All, keys);
  clock.end("map comparison");
  if (!maps)
    return withContext(maps.takeError(), context);
  verdict.nondeterministic += maps->nondeterministic;
  if (maps->difference)
    return refuse("after the sample: " + *maps->difference);
  comparison->reset();
  clock.end("copies released");
  return verdict;
}

} // namespace morpheus::runtime
