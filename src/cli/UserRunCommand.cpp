// `morpheus user-run`: a network function in Morpheus's user-space data
// plane (backend/user) — the router (nf/router/user/router_user.c), the
// firewall (nf/firewall/user/firewall_user.c) or the NAT
// (nf/nat/user/nat_user.c), --nf, each behind
// UserPipelines.h — JIT-compiled in process, configured from the
// function's own files, a pcap trace replayed through the event loop by
// the generic and the specialized handler in turn; prints what was
// specialized, checks that both treat the trace alike, and their
// packets/s. With --profile, the specialized version records sampled keys
// while the trace runs once more, and the next cycle adds fast paths for
// the heavy hitters (Morpheus's traffic-dependent step), timed as a third
// version. With --generator nested-if-lpm, the LPM library's nested-if
// generator (backend/user/Generators.h) is registered for the pipeline's
// LPM tables: a version built with custom-generator is timed beside the
// others and exploration may choose it; the other versions are built
// without it. With --dpdk or --af-xdp, both are timed again receiving
// from DPDK ports: a net_pcap port replaying the trace, or AF_XDP sockets
// on kernel interfaces (net_af_xdp) receiving what an injector sends.
#ifdef MORPHEUS_WITH_DPDK
#include "backend/user/DpdkPorts.h"
#include "backend/user/Eal.h"
#endif
#include "backend/user/BatchModel.h"
#include "backend/user/EventLoop.h"
#include "backend/user/Exploration.h"
#include "backend/user/Generators.h"
#include "backend/user/Handler.h"
#include "bench/Trace.h"
#include "cli/Commands.h"
#include "cli/ExplorationTrials.h"
#include "cli/UserPipelines.h"
#include "runtime/UserShadowSamples.h"
#include "core/Pipeline.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <cstdio>
#include <map>
#include <memory>
#include <set>

namespace morpheus::cli {

namespace {

struct UserRunFlags {
  std::string nf = "router";                   // the pipeline (UserPipelines.h)
  std::string handler;                         // "": the pipeline's own
  std::string routes, neighbors;               // --nf router
  std::string rules;                           // --nf firewall
  bool acceptByDefault = false;                // --nf firewall, no rule matched
  std::string natConfig;                       // --nf nat
  std::string trace;
  std::string lpm = "dir24";  // lpmKinds()
  std::string hash = "own";   // hashKinds()
  user::HandlerOptions::Prefetch prefetch = user::HandlerOptions::Prefetch::OwnElseDerived;
  bool dpdk = false;
  std::vector<std::string> afXdp; // interfaces, one AF_XDP port each
  std::string exceptionVdev;      // --dpdk's or --af-xdp's slow path for MU_PASS
  std::string explore; // "", exhaustive or greedy
  core::ProfileMode profile = core::ProfileMode::Off;
  bool oracle = false;
  bool batchModel = false;
  uint32_t exploreWindows = 3;
  std::vector<std::string> noPasses; // table passes left out (Passes.def names)
  std::string generator;             // "" or nested-if-lpm, for the routes table
  uint32_t burst = 32, rounds = 9, repeat = 10, ports = 4, inlineLimit = 64, checkPackets = 10000;
  uint32_t shadowPackets = runtime::packetsAimedAtTables().packets;
};

#ifdef MORPHEUS_WITH_DPDK
// The DPDK ports of --dpdk or --af-xdp. --dpdk: the trace from a net_pcap
// port that replays it from memory without end; MU_TX packets go back out
// of it (port 0; others are freed). infinite_rx holds the whole trace in
// packet buffers: a pool that size. --af-xdp: whatever arrives on the
// interfaces (an injector on their peers), port i on the i-th; each port's
// fill ring holds buffers from the start, and so may the exception port's
// when it is one too. Memory for the pool: a buffer takes about 2.3 KiB;
// EAL without hugepages needs room to spare.
user::DpdkOptions dpdkOptions(const user::ReplayRing &ring, const UserRunFlags &flags) {
  user::DpdkOptions options;
  if (flags.dpdk) {
    options.vdevs = {"net_pcap0,rx_pcap=" + flags.trace + ",infinite_rx=1"};
    options.mbufs = uint32_t(ring.sequence.size()) + 8192;
  } else {
    for (size_t port = 0; port < flags.afXdp.size(); ++port)
      options.vdevs.push_back(user::afXdpVdev(unsigned(port), flags.afXdp[port]));
    options.mbufs = uint32_t(flags.afXdp.size() + 1) * user::AfXdpFillBuffers + 8192;
  }
  options.exceptionVdev = flags.exceptionVdev;
  options.memoryMegabytes = uint32_t(uint64_t(options.mbufs) * 4096 / (1 << 20)) + 256;
  return options;
}
#endif

// The pipeline --nf names, from its configuration files.
Expected<std::unique_ptr<UserPipeline>> makePipeline(const UserRunFlags &flags) {
  if (flags.nf == "firewall")
    return firewallPipeline(flags.rules, flags.acceptByDefault);
  if (flags.nf == "nat")
    return natPipeline(flags.natConfig);
  return routerPipeline(flags.routes, flags.neighbors, flags.ports);
}

std::string handlerPath(const UserPipeline &pipeline, const UserRunFlags &flags) {
  return flags.handler.empty() ? pipeline.defaultHandler() : flags.handler;
}

// What every build of the pipeline's handler (measured, twin, the other
// LPM kinds, the oracle) is compiled and specialized with: its entry, the
// inline limit, and the pipeline's flags for LPM kind `lpm` and --hash.
user::HandlerOptions handlerOptions(const UserPipeline &pipeline, const UserRunFlags &flags,
                                    const std::string &lpm) {
  user::HandlerOptions options;
  options.entry = pipeline.entry();
  options.inlineLimit = flags.inlineLimit;
  options.cflags = pipeline.cflags({lpm, flags.hash});
  options.prefetch = flags.prefetch;
  if (flags.shadowPackets)
    options.shadow = runtime::packetsAimedAtTables(flags.shadowPackets);
  return options;
}

// The table passes of the handler's versions: all but --no-pass's, and
// custom-generator only when `generator` (a version or trial with the
// registered generator).
std::vector<std::string> versionPasses(const UserRunFlags &flags, bool generator) {
  std::vector<std::string> leftOut = flags.noPasses;
  if (!generator)
    leftOut.push_back("custom-generator");
  return core::tablePassesWithout(leftOut);
}

// The handler (--handler, or the pipeline's) built for LPM kind `lpm`
// and configured.
Expected<std::unique_ptr<user::Handler>> loadHandler(const UserPipeline &pipeline,
                                                     const UserRunFlags &flags,
                                                     const std::string &lpm) {
  user::HandlerOptions options = handlerOptions(pipeline, flags, lpm);
  if (!flags.noPasses.empty() || !flags.generator.empty())
    options.tablePasses = versionPasses(flags, false);
  if (flags.generator == "nested-if-lpm")
    for (const std::string &table : pipeline.lpmTables())
      options.generators.push_back(user::nestedIfLpm(table));
  if (flags.profile != core::ProfileMode::Off) {
    core::TrafficProfileOptions traffic;
    traffic.mode = flags.profile;
    options.traffic = traffic;
  }
  auto handler = user::Handler::load(handlerPath(pipeline, flags), options);
  if (!handler)
    return handler.takeError();
  if (Error err = pipeline.configure((*handler)->tables()))
    return err;
  return handler;
}

// What the batching model hands the exploration (--batch-model with
// --explore): its pick, and every point it predicts within
// ModelPruneFraction of the pick's prediction: the only bursts and
// sub-batches the exploration then tries, so that measurement confirms or
// overrides the model's pick among the points the model cannot tell apart.
struct BatchModelPick {
  user::BatchPoint pick;
  std::vector<user::BatchPoint> near;
};
constexpr double ModelPruneFraction = 0.05;

std::string subBatchName(user::BatchPoint point) {
  return point.subBatch ? std::to_string(point.subBatch) : std::string("none");
}

// The batching model (backend/user/BatchModel) for the installed
// version: the loop measured over a grid of burst sizes B and, with
// `prefetcher` (the version's prefetch function), sub-batches b, in
// interleaved rounds (median ns/packet of the loop thread's CPU time);
// the model fitted on B = 8, 32, 128 with b = none, 2, 8, B (B alone
// without a prefetcher), its prediction beside the measurement at every
// point, and its pick confirmed or overridden by measurement's.
Expected<BatchModelPick> compareBatchModel(user::Trampoline &trampoline,
                                           user::PrefetchFunction prefetcher,
                                           const user::ReplayRing &ring,
                                           const UserRunFlags &flags) {
  std::vector<uint32_t> subBatches, fittedSubBatches;
  if (prefetcher) {
    subBatches = {2, 4, 8, 16};
    fittedSubBatches = {2, 8};
  }
  const std::vector<user::BatchPoint> candidates =
      user::batchGrid({4, 8, 16, 32, 64, 128, 256}, subBatches);
  const std::vector<user::BatchPoint> fitted = user::batchGrid({8, 32, 128}, fittedSubBatches);
  std::map<user::BatchPoint, std::vector<double>> rounds;
  for (uint32_t r = 0; r < flags.rounds; ++r)
    for (user::BatchPoint point : candidates)
      rounds[point].push_back(1e9 / user::EventLoop(trampoline, point.burst)
                                        .prefetching(prefetcher, point.subBatch)
                                        .run(ring, flags.repeat)
                                        .packetsPerSecond());
  std::map<user::BatchPoint, double> measured;
  for (auto &[point, ns] : rounds) {
    std::sort(ns.begin(), ns.end());
    measured[point] = ns[ns.size() / 2];
  }
  std::vector<user::BatchSample> samples;
  for (user::BatchPoint point : fitted)
    samples.push_back({point, measured[point]});
  auto model = user::BatchModel::fit(samples);
  if (!model)
    return model.takeError();
  std::printf("batch model: t(B) = %.2f + %.1f / B + %.4f * B ns/packet\n", model->perPacketNs,
              model->perBurstNs, model->perPacketPerBurstNs);
  if (const auto &sub = model->subBatching)
    std::printf("  sub-batches of b (b' = min(b, B)), prefetched: %+.2f %+.1f / b' %+.1f / B "
                "%+.4f * b' ns/packet\n",
                sub->prefetchPerPacketNs, sub->perSubBatchNs, sub->firstSubBatchStallNs,
                sub->footprintPerPacketNs);
  std::printf("  fitted at %zu points (B = 8, 32, 128; b = %s): residuals %.2f ns/packet rms\n",
              fitted.size(), prefetcher ? "none, 2, 8, B" : "none", model->rmsResidualNs());
  user::BatchPoint bestMeasured = candidates.front(), worstHeldOut;
  double heldOutError = 0, worstError = 0;
  for (user::BatchPoint point : candidates) {
    if (measured[point] < measured[bestMeasured])
      bestMeasured = point;
    double error = model->predictNs(point) / measured[point] - 1;
    bool isFitted = std::find(fitted.begin(), fitted.end(), point) != fitted.end();
    if (!isFitted) {
      heldOutError += std::fabs(error);
      if (std::fabs(error) >= std::fabs(worstError)) {
        worstError = error;
        worstHeldOut = point;
      }
    }
    std::printf("  B=%-4u b=%-4s predicted %7.2f ns/packet  measured %7.2f ns/packet  %+6.1f "
                "%%%s\n",
                point.burst, subBatchName(point).c_str(), model->predictNs(point), measured[point],
                error * 100, isFitted ? "  (fitted)" : "");
  }
  std::printf("  the %zu points not fitted: predicted within %.1f %% on average, at worst %+.1f %% "
              "(B=%u b=%s)\n",
              candidates.size() - fitted.size(),
              heldOutError / (candidates.size() - fitted.size()) * 100, worstError * 100,
              worstHeldOut.burst, subBatchName(worstHeldOut).c_str());
  user::BatchPoint picked = model->pick(candidates);
  std::printf("  the model picks B=%u b=%s (measured %.2f ns/packet), measurement B=%u b=%s "
              "(%.2f): ",
              picked.burst, subBatchName(picked).c_str(), measured[picked], bestMeasured.burst,
              subBatchName(bestMeasured).c_str(), measured[bestMeasured]);
  if (picked == bestMeasured)
    std::printf("confirmed\n");
  else
    std::printf("overridden (the pick measured %+.1f %% slower)\n",
                (measured[picked] / measured[bestMeasured] - 1) * 100);
  BatchModelPick result{picked, {}};
  for (user::BatchPoint point : candidates)
    if (model->predictNs(point) <= model->predictNs(picked) * (1 + ModelPruneFraction))
      result.near.push_back(point);
  return result;
}

// Morpheus's traffic-dependent step: the trace once through the installed
// version, its sampled keys read after every burst (a site keeps only its
// last samples), then the cycle that puts the heavy hitters in front of
// their lookups.
Expected<core::CycleReport> cycleOnTraffic(user::Handler &handler, const user::ReplayRing &ring,
                                     uint32_t burst) {
  user::EventLoop(handler.trampoline(), burst).run(ring, 1, [&] { handler.recordTraffic(); });
  return handler.specialize();
}

std::string decisions(const core::SpecializationLog &log, bool applied) {
  std::map<std::string, std::set<std::string>> byTable;
  for (const core::SiteDecision &decision : log.decisions)
    if (decision.applied == applied)
      byTable[decision.table].insert(applied ? decision.pass : decision.detail);
  std::string text;
  for (const auto &[table, what] : byTable)
    text += "\n    " + table + ": " + llvm::join(what, "; ");
  return text.empty() ? " none" : text;
}

// What the installed version does to `head`'s packets, compared with what
// the generic twin did.
Error sameAsGeneric(user::Trampoline &version, const user::ReplayRing &head,
                    const std::vector<user::PacketResult> &expected, const UserRunFlags &flags) {
  auto actual = user::EventLoop(version, flags.burst).collect(head);
  for (size_t i = 0; i < expected.size(); ++i)
    if (!(actual[i] == expected[i]))
      return makeError("packet {0} of {1}: the specialized handler gave verdict {2} port "
                       "{3}, the generic one verdict {4} port {5}{6}",
                       i, flags.trace, actual[i].verdict, actual[i].port, expected[i].verdict,
                       expected[i].port,
                       actual[i].bytes == expected[i].bytes ? "" : " (bytes differ)");
  return Error::success();
}

// The measured exploration (backend/user/Exploration), NFMorph-style
// templates among its dimensions: whether the Morpheus-specialized handler
// runs at all, the burst size, the other LPM implementations (`handler`
// uses --lpm, `others` the other kinds this build makes, on the same
// routes: lpm=KIND), the routes as code
// (lpm-as-code's search over the prefixes, up to the inline limit) and as
// a derived table (lpm-as-array's 16-8-8 array, for the routes the search
// does not take), both off: the table's own lookup stays, and the
// handler's own specialization points (what a configuration runs:
// cli/ExplorationTrials.h). Each trial is
// compiled, installed and measured by the loop itself (packets/s of its
// thread's CPU time over `repeat` replays of the trace); the best measured
// wins. With the batching model's pick (`model`), the bursts and
// sub-batches tried are the ones it predicts near its pick, and the
// outcome says whether measurement confirmed the pick. Returns the handler
// the chosen configuration runs on.
Expected<user::Handler *>
explore(user::Handler &handler,
        const std::map<std::string, std::unique_ptr<user::Handler>> &others,
        const user::ReplayRing &ring, const UserRunFlags &flags,
        const std::optional<BatchModelPick> &model) {
  using namespace dimension;
  const std::vector<std::string> kinds = builtLpmKinds();
  // The burst given first: the generic handler at that burst is the
  // baseline of both searches.
  std::vector<int64_t> bursts = {flags.burst};
  std::set<int64_t> subBatches = {4, 8, 16, 32};
  if (model) {
    subBatches.clear();
    for (user::BatchPoint point : model->near) {
      if (std::find(bursts.begin(), bursts.end(), int64_t(point.burst)) == bursts.end())
        bursts.push_back(point.burst);
      if (point.subBatch)
        subBatches.insert(point.effectiveSubBatch());
    }
    auto listed = [](const auto &values) {
      std::vector<std::string> names;
      for (int64_t value : values)
        names.push_back(std::to_string(value));
      return names.empty() ? std::string("none") : llvm::join(names, ", ");
    };
    std::printf("explore: the batch model's pick B=%u b=%s and the %zu point%s it predicts "
                "within %.0f %% of it: bursts %s (%u the baseline's), sub-batches %s\n",
                model->pick.burst, subBatchName(model->pick).c_str(), model->near.size(),
                model->near.size() == 1 ? "" : "s",
                ModelPruneFraction * 100, listed(bursts).c_str(), flags.burst,
                listed(subBatches).c_str());
  } else {
    for (int64_t burst : {8, 16, 32, 64, 128})
      if (burst != flags.burst)
        bursts.push_back(burst);
  }
  std::vector<user::Dimension> dimensions = {{Specialized, {1}, true},
                                             {Burst, bursts, false},
                                             lpmDimension(kinds, flags.lpm),
                                             {LpmAsCode, {1}, true},
                                             {LpmAsArray, {1}, true}};
  // Sub-batches with the next one's entries prefetched (the handler's
  // MU_PREFETCH function, or the one derived from its code), when it has one.
  bool allPrefetch = handler.prefetcher();
  for (const auto &[kind, other] : others)
    allPrefetch &= other->prefetcher() != nullptr;
  if (allPrefetch && !subBatches.empty())
    dimensions.push_back(
        {Prefetch, std::vector<int64_t>(subBatches.begin(), subBatches.end()), true});
  // The registered custom generator (--generator), on or off.
  if (!flags.generator.empty())
    dimensions.push_back({Generator, {1}, true});
  // The handler's specialization points, beside the knobs applied here.
  std::set<std::string> points;
  for (user::Dimension &point : user::pointDimensions(handler.specializationSpace())) {
    points.insert(point.name);
    dimensions.push_back(std::move(point));
  }
  auto strategy = flags.explore == "greedy" ? user::greedySearch() : user::exhaustiveSearch();
  uint32_t burst = flags.burst, subBatch = 0;
  user::Handler *active = &handler;
  user::ExplorerOptions options;
  options.windowsPerTrial = flags.exploreWindows;
  user::Explorer explorer(
      dimensions, std::move(strategy),
      [&](const user::Configuration &configuration) -> Error {
        TrialPlan plan = planTrial(configuration, flags.lpm, kinds, points, flags.noPasses);
        burst = plan.burst;
        subBatch = plan.subBatch;
        active = plan.lpm == flags.lpm ? &handler : others.at(plan.lpm).get();
        if (!plan.specialize) {
          active->trampoline().install(active->genericVersion());
          return Error::success();
        }
        if (Error err = active->customizePasses(core::tablePassesWithout(plan.passesLeftOut)))
          return err;
        auto cycle = active->specialize(plan.points);
        // Following the traffic, the trial's fast paths as the measured
        // version's (the windows' own samples would show only the trace's
        // last bursts: a high-locality trace's one or two flows).
        if (cycle && flags.profile != core::ProfileMode::Off &&
            cycle->outcome == core::CycleOutcome::Installed)
          cycle = cycleOnTraffic(*active, ring, burst);
        if (!cycle)
          return cycle.takeError();
        if (cycle->outcome != core::CycleOutcome::Installed)
          return makeError("the specialization for {0} was not installed",
                           user::describe(configuration, dimensions));
        return Error::success();
      },
      options);
  std::printf("explore (%s search, %zu dimensions, %u windows of %u replays per trial):\n",
              explorer.searchStrategy().name(), dimensions.size(), options.windowsPerTrial,
              flags.repeat);
  if (Error err = explorer.start())
    return err;
  while (explorer.exploring()) {
    user::LoopStats window = user::EventLoop(active->trampoline(), burst)
                                 .prefetching(active->prefetcher(), subBatch)
                                 .run(ring, flags.repeat);
    if (Error err = explorer.observe(window.packetsPerSecond()))
      return err;
  }
  double generic = 0;
  for (const user::Trial &trial : explorer.trials()) {
    if (trial.configuration == user::Configuration{{Burst, int64_t(flags.burst)}})
      generic = trial.metric;
    std::printf("  tried  %-52s %8.2f Mpps  %7.1f ns/packet\n",
                user::describe(trial.configuration, dimensions).c_str(), trial.metric / 1e6,
                1e9 / trial.metric);
  }
  const user::Trial &chosen = *explorer.chosen();
  std::printf("  chosen %-52s %8.2f Mpps",
              user::describe(chosen.configuration, dimensions).c_str(),
              chosen.metric / 1e6);
  if (generic > 0)
    std::printf("  %+.1f %% over the generic handler (%s, burst %u)",
                (chosen.metric / generic - 1) * 100, flags.lpm.c_str(), flags.burst);
  std::printf("\n");
  if (model) {
    auto valueOf = [&](const std::string &name, int64_t otherwise) {
      auto found = chosen.configuration.find(name);
      return found == chosen.configuration.end() ? otherwise : found->second;
    };
    int64_t burst = valueOf(Burst, flags.burst), subBatch = valueOf(Prefetch, 0);
    bool confirmed = burst == model->pick.burst &&
                     subBatch == (model->pick.subBatch ? model->pick.effectiveSubBatch() : 0);
    std::printf("  the batch model's pick B=%u b=%s: %s", model->pick.burst,
                subBatchName(model->pick).c_str(),
                confirmed ? "confirmed by the exploration\n" : "overridden by the exploration");
    if (!confirmed)
      std::printf(" (burst=%lld, %s)\n", static_cast<long long>(burst),
                  subBatch ? ("prefetch=" + std::to_string(subBatch)).c_str() : "no prefetching");
  }
  return active;
}

// ": copies made 120.1; sample 0.3; ..." (ms), or "" when not validated.
std::string validationPhases(const core::CycleReport &cycle) {
  return cycle.times.validationPhases.empty()
             ? ""
             : ": " + core::phasesText(cycle.times.validationPhases);
}

// The versions user-run times, in order: generic, specialized, with fast
// paths (--profile), the generator's (--generator); each named.
using NamedVersions = std::vector<std::pair<std::string, user::VersionHandle>>;

// The first cycle, then (--profile) the cycle on the trace's traffic, then
// (--generator) the generator's version, each printed; the last but the
// generator's stays installed. `generated` is the generator's version.
Expected<NamedVersions> specializeInTurn(user::Handler &measured, const user::ReplayRing &ring,
                                         const UserRunFlags &flags,
                                         user::VersionHandle &generated) {
  auto cycle = measured.specialize();
  if (!cycle)
    return cycle.takeError();
  if (cycle->outcome != core::CycleOutcome::Installed)
    return makeError("the specialization was not installed: {0}", cycle->describe());
  std::printf("user-run: specialized in %.1f ms (passes and O2) + %.1f ms (JIT) + %.1f ms "
              "(shadow validation%s)\n  specialized:%s\n  left generic:%s\n",
              cycle->times.codegenMs, cycle->times.injectionMs, cycle->times.validationMs,
              validationPhases(*cycle).c_str(), decisions(cycle->log, true).c_str(),
              decisions(cycle->log, false).c_str());
  NamedVersions versions = {{"generic", measured.genericVersion()},
                            {"specialized", measured.trampoline().installed()}};
  // Following the traffic: the trace through the recording version, then
  // the cycle that puts the heavy hitters in front of their lookups.
  if (flags.profile != core::ProfileMode::Off) {
    auto followed = cycleOnTraffic(measured, ring, flags.burst);
    if (!followed)
      return followed.takeError();
    if (followed->outcome != core::CycleOutcome::Installed)
      return makeError("the fast-path version was not installed: {0}", followed->describe());
    std::printf("user-run: fast paths in %.1f ms + %.1f ms (JIT) + %.1f ms (shadow "
                "validation%s)\n",
                followed->times.codegenMs, followed->times.injectionMs,
                followed->times.validationMs, validationPhases(*followed).c_str());
    for (const auto &[site, traffic] : followed->traffic)
      std::printf("  site %u (%s): %zu hot keys, period %u: %s\n", site,
                  followed->log.profiled.at(site).table.c_str(), traffic.hotKeys.size(),
                  traffic.period, traffic.why.c_str());
    versions.push_back({"fast paths", measured.trampoline().installed()});
  }
  // The registered generator's version (its equivalence checked on its
  // own); the version before it stays installed.
  if (!flags.generator.empty()) {
    if (Error err = measured.customizePasses(versionPasses(flags, true)))
      return std::move(err);
    auto built = measured.specialize();
    if (!built)
      return built.takeError();
    if (built->outcome != core::CycleOutcome::Installed)
      return makeError("the {0} version was not installed: {1}", flags.generator,
                       built->describe());
    if (Error err = measured.customizePasses(versionPasses(flags, false)))
      return std::move(err);
    std::printf("user-run: %s in %.1f ms + %.1f ms (JIT)\n  specialized:%s\n  left generic:%s\n",
                flags.generator.c_str(), built->times.codegenMs,
                built->times.injectionMs, decisions(built->log, true).c_str(),
                decisions(built->log, false).c_str());
    generated = measured.trampoline().installed();
    measured.trampoline().install(versions.back().second);
    versions.push_back({flags.generator, generated});
  }
  return versions;
}

// The hand-specialized oracle: compiled from the handler's source with
// the configuration and the trace's hot keys written in (the pipeline's
// oracle, from `twin`'s tables), its other tables specialized by Morpheus
// (every table pass, whatever --no-pass leaves out of the measured
// handler's), configured and installed.
Expected<std::unique_ptr<user::Handler>> loadOracle(const UserPipeline &pipeline,
                                                    const UserRunFlags &flags,
                                                    user::TableSet &twin,
                                                    const bench::Trace &trace) {
  std::string path = handlerPath(pipeline, flags);
  auto source = pipeline.oracle(path, twin, trace);
  if (!source)
    return source.takeError();
  llvm::SmallString<128> written;
  int fd;
  if (std::error_code error =
          llvm::sys::fs::createTemporaryFile("morpheus-oracle", "c", fd, written))
    return makeError("the oracle's source: {0}", error.message());
  {
    llvm::raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << source->source;
  }
  // Every table pass (--no-pass is not applied) and no traffic
  // following; the handler's directory for its includes.
  user::HandlerOptions options = handlerOptions(pipeline, flags, flags.lpm);
  options.cflags.insert(options.cflags.end(), {"-I", llvm::sys::path::parent_path(path).str()});
  auto oracle = user::Handler::load(written.str().str(), options);
  llvm::sys::fs::remove(written);
  if (!oracle)
    return oracle.takeError();
  if (Error err = pipeline.configure((*oracle)->tables()))
    return std::move(err);
  auto built = (*oracle)->specialize();
  if (!built)
    return built.takeError();
  std::printf("user-run: oracle: %s; specialized:%s\n", source->description.c_str(),
              decisions(built->log, true).c_str());
  return std::move(*oracle);
}

// Every version against the generic twin on the trace's first packets
// (`head`, whose results on the twin are `expected`): verdict, port and
// bytes of every packet, then every table (the twin ran the trace as often).
Error checkAgainstTwin(user::Handler &measured, user::Handler &twin,
                       const user::VersionHandle &generated, user::Handler *oracle,
                       const user::ReplayRing &ring, const user::ReplayRing &head,
                       const std::vector<user::PacketResult> &expected,
                       const UserRunFlags &flags) {
  if (Error err = sameAsGeneric(measured.trampoline(), head, expected, flags))
    return err;
  if (measured.tables().dump() != twin.tables().dump())
    return makeError("the tables differ after the first {0} packets", expected.size());
  std::printf("user-run: the first %zu packets: generic and specialized identical (verdicts, "
              "bytes, tables)\n",
              expected.size());
  if (generated) {
    user::Trampoline checked;
    checked.install(generated);
    if (Error err = sameAsGeneric(checked, head, expected, flags))
      return withContext(std::move(err), "the " + flags.generator + " version");
    std::printf("user-run: the %s version treats them as the generic handler does\n",
                flags.generator.c_str());
  }
  if (oracle) {
    // On its own tables, through the twin's history: the whole trace once
    // when the traffic was followed, then the first packets.
    if (flags.profile != core::ProfileMode::Off)
      user::EventLoop(oracle->trampoline(), flags.burst).run(ring, 1);
    if (Error err = sameAsGeneric(oracle->trampoline(), head, expected, flags))
      return withContext(std::move(err), "the oracle");
    if (oracle->tables().dump() != twin.tables().dump())
      return makeError("the oracle's tables differ from the generic handler's after the "
                       "first {0} packets",
                       expected.size());
    std::printf("user-run: the oracle treats them as the generic handler does (tables too)\n");
  }
  return Error::success();
}

// Interleaved rounds: `round` (the whole trace) through each version in
// turn, installed in `trampoline`; the medians printed, the last version
// left installed.
void timeVersions(const NamedVersions &versions, user::Trampoline &trampoline,
                  const UserRunFlags &flags, const char *label,
                  const std::function<user::LoopStats()> &round) {
  std::vector<std::vector<double>> rates(versions.size());
  for (uint32_t r = 0; r < flags.rounds; ++r)
    for (size_t variant = 0; variant < versions.size(); ++variant) {
      trampoline.install(versions[variant].second);
      rates[variant].push_back(round().packetsPerSecond());
    }
  std::vector<double> median;
  for (std::vector<double> &variant : rates) {
    std::sort(variant.begin(), variant.end());
    median.push_back(variant[variant.size() / 2]);
  }
  for (size_t variant = 0; variant < versions.size(); ++variant) {
    std::printf("%s%-12s %8.2f Mpps  %7.1f ns/packet", label, versions[variant].first.c_str(),
                median[variant] / 1e6, 1e9 / median[variant]);
    if (variant)
      std::printf("  %+.1f %%", (median[variant] / median[0] - 1) * 100);
    std::printf("\n");
  }
  trampoline.install(versions.back().second);
}

// --explore: the measured exploration over this LPM kind's handler and the
// other kinds', its choice checked against the generic twin of --lpm's kind.
Error exploreAndCheck(const UserPipeline &pipeline, user::Handler &measured,
                      const user::ReplayRing &ring, const user::ReplayRing &head,
                      const std::vector<user::PacketResult> &expected, const UserRunFlags &flags,
                      const std::optional<BatchModelPick> &modelPick) {
  std::map<std::string, std::unique_ptr<user::Handler>> others;
  for (const std::string &kind : builtLpmKinds()) {
    if (kind == flags.lpm)
      continue;
    auto other = loadHandler(pipeline, flags, kind);
    if (!other)
      return other.takeError();
    others[kind] = std::move(*other);
  }
  auto chosen = explore(measured, others, ring, flags, modelPick);
  if (!chosen)
    return chosen.takeError();
  if (Error err = sameAsGeneric((*chosen)->trampoline(), head, expected, flags))
    return err;
  std::printf("user-run: the chosen configuration treats the first %zu packets as the "
              "generic handler does\n",
              expected.size());
  return Error::success();
}

// --dpdk, --af-xdp: the same interleaved rounds, received from the ports.
Error timeOnPorts(const NamedVersions &versions, user::Trampoline &trampoline,
                  const user::ReplayRing &ring, const UserRunFlags &flags) {
#ifdef MORPHEUS_WITH_DPDK
  auto ports = user::DpdkPorts::open(dpdkOptions(ring, flags));
  if (!ports)
    return ports.takeError();
  uint64_t packets = uint64_t(ring.sequence.size()) * flags.repeat;
  timeVersions(versions, trampoline, flags, flags.dpdk ? "dpdk " : "af_xdp ", [&] {
    return (*ports)->run(trampoline, flags.burst, packets, 1000000).loop;
  });
  if (flags.dpdk)
    std::printf("(DPDK net_pcap, --no-huge: the same rounds, received from the port)\n");
  else
    std::printf("(DPDK net_af_xdp, --no-huge: rounds of as many packets, received from "
                "the interfaces)\n");
  return Error::success();
#else
  return makeError("--dpdk, --af-xdp: this build has no DPDK (install dpdk-dev, re-run cmake)");
#endif
}

int userRun(const UserRunFlags &flags) {
  auto pipeline = makePipeline(flags);
  if (!pipeline)
    return fail(pipeline.takeError());
  auto trace = bench::readPcapTrace(flags.trace, flags.trace);
  if (!trace)
    return fail(trace.takeError());
  user::ReplayRing ring{trace->frames, trace->sequence, 0};
#ifdef MORPHEUS_WITH_DPDK
  // The process's one EAL, sized for --dpdk's or --af-xdp's packet buffers
  // before a DPDK table (--lpm rte, --hash rte) starts it with less.
  if (flags.dpdk || !flags.afXdp.empty())
    if (Error err = user::initialiseEal(dpdkOptions(ring, flags).memoryMegabytes))
      return fail(std::move(err));
#endif

  // Two instances on twin tables: `measured` is measured (generic, then
  // specialized, in turn), `twin` stays generic for the equivalence check.
  auto measured = loadHandler(**pipeline, flags, flags.lpm);
  if (!measured)
    return fail(measured.takeError());
  auto twin = loadHandler(**pipeline, flags, flags.lpm);
  if (!twin)
    return fail(twin.takeError());
  std::printf("user-run: %s, %s; trace %s: %zu packets, %zu distinct frames\n",
              handlerPath(**pipeline, flags).c_str(),
              (*pipeline)->summary((*measured)->tables()).c_str(), flags.trace.c_str(),
              ring.sequence.size(), ring.frames.size());
  std::printf("user-run: prefetch function (sub-batches): %s\n",
              user::describe((*measured)->prefetchOrigin()).c_str());

  user::VersionHandle generated;
  auto versions = specializeInTurn(**measured, ring, flags, generated);
  if (!versions)
    return fail(versions.takeError());
  std::unique_ptr<user::Handler> oracle;
  if (flags.oracle) {
    auto loaded = loadOracle(**pipeline, flags, (*twin)->tables(), *trace);
    if (!loaded)
      return fail(loaded.takeError());
    oracle = std::move(*loaded);
    versions->push_back({"oracle", oracle->trampoline().installed()});
  }

  user::ReplayRing head = ring;
  head.sequence.resize(std::min<size_t>(head.sequence.size(), flags.checkPackets));
  if (flags.profile != core::ProfileMode::Off)
    user::EventLoop((*twin)->trampoline(), flags.burst).run(ring, 1);
  auto expected = user::EventLoop((*twin)->trampoline(), flags.burst).collect(head);
  if (Error err = checkAgainstTwin(**measured, **twin, generated, oracle.get(), ring, head,
                                   expected, flags))
    return fail(std::move(err));

  user::Trampoline &trampoline = (*measured)->trampoline();
  timeVersions(*versions, trampoline, flags, "",
               [&] { return user::EventLoop(trampoline, flags.burst).run(ring, flags.repeat); });
  std::printf("(median of %u interleaved rounds of %u replays of the trace, burst %u, one "
              "thread, its CPU time)\n",
              flags.rounds, flags.repeat, flags.burst);
  std::optional<BatchModelPick> modelPick;
  if (flags.batchModel) {
    auto pick = compareBatchModel(
        trampoline, oracle ? oracle->prefetcher() : (*measured)->prefetcher(), ring, flags);
    if (!pick)
      return fail(pick.takeError());
    modelPick = std::move(*pick);
  }
  if (!flags.explore.empty())
    if (Error err = exploreAndCheck(**pipeline, **measured, ring, head, expected, flags, modelPick))
      return fail(std::move(err));
  if (flags.dpdk || !flags.afXdp.empty())
    if (Error err = timeOnPorts(*versions, trampoline, ring, flags))
      return fail(std::move(err));
  return 0;
}

} // namespace

void addUserRunCommand(CLI::App &morpheus) {
  auto flags = std::make_shared<UserRunFlags>();
  CLI::App &command = commandline::addCommand(
      morpheus, "user-run",
      "replay a trace through a user-space router, firewall or NAT, generic and specialized",
      "Compiles the network function's user-space handler (--nf router:\n"
      "nf/router/user/router_user.c, firewall: nf/firewall/user/firewall_user.c,\n"
      "nat: nf/nat/user/nat_user.c) for this machine, JIT-compiles it in process\n"
      "(LLVM ORC), fills its tables from the function's own files (routes and\n"
      "neighbours, a rule file, a NAT configuration), specializes it with\n"
      "Morpheus's passes behind the guard, checks that the generic and the\n"
      "specialized handler treat the trace's first packets alike, and prints\n"
      "both one's packets/s over the whole trace (a pcap, e.g. from\n"
      "tools/traces/gen_trace.py --nf router|firewall|nat).\n"
      "No kernel, no root (but --af-xdp: AF_XDP sockets on kernel interfaces).",
      [flags](const CLI::App &command) {
        if (flags->nf == "router" && (flags->routes.empty() || flags->neighbors.empty()))
          return commandline::usageError(command, "--nf router needs --routes and --neighbors");
        if (flags->nf == "firewall" && flags->rules.empty())
          return commandline::usageError(command, "--nf firewall needs --rules");
        if (flags->nf == "nat" && flags->natConfig.empty())
          return commandline::usageError(command, "--nf nat needs --config");
        if (!flags->exceptionVdev.empty() && !flags->dpdk && flags->afXdp.empty())
          return commandline::usageError(command, "--exception-vdev needs --dpdk or --af-xdp");
        return userRun(*flags);
      });
  command.add_option("--nf", flags->nf, "the network function: router (default), firewall or nat")
      ->check(CLI::IsMember({"router", "firewall", "nat"}))
      ->type_name("router|firewall|nat");
  command.add_option("--routes", flags->routes, "--nf router: routes file (`PREFIX NEXTHOP [PORT]`)")
      ->type_name("FILE");
  command.add_option("--neighbors", flags->neighbors, "--nf router: neighbours file")
      ->type_name("FILE");
  command
      .add_option("--rules", flags->rules,
                  "--nf firewall: rule file (ClassBench lines, nf/firewall/configs)")
      ->type_name("FILE");
  command
      .add_option("--config", flags->natConfig,
                  "--nf nat: the NAT's configuration (nf/nat/configs; inside-port and "
                  "outside-port names are ports 0 and 1)")
      ->type_name("FILE");
  command.add_flag("--accept-by-default", flags->acceptByDefault,
                   "--nf firewall: accept packets no rule matches (default: drop them)");
  command.add_option("--trace", flags->trace, "the packets to replay (pcap)")
      ->required()
      ->type_name("PCAP");
  command
      .add_option("--lpm", flags->lpm,
                  "the LPM tables (routes, the firewall's prefixes, the NAT's inside "
                  "prefixes): dir24 (DIR-24-8, default), linear (a scan, longest first) or "
                  "rte (DPDK's rte_lpm; builds with DPDK)")
      ->check(CLI::IsMember(lpmKinds()))
      ->type_name("dir24|linear|rte");
  command
      .add_option("--hash", flags->hash,
                  "the exact-match tables the control plane or the handler fills (the "
                  "router's neighbours, the NAT's bindings): own (open addressing, default) "
                  "or rte (DPDK's rte_hash; builds with DPDK)")
      ->check(CLI::IsMember(hashKinds()))
      ->type_name("own|rte");
  command
      .add_option("--prefetch", flags->prefetch,
                  "the prefetch function of sub-batches (--batch-model, --explore's "
                  "prefetch=b): own (the handler's MU_PREFETCH function, else one derived "
                  "from its code: its code up to the first lookup with a per-packet key, "
                  "prefetched instead; default), derived (always the derived one), none")
      ->transform(commandline::oneOf(std::map<std::string, user::HandlerOptions::Prefetch>{
          {"own", user::HandlerOptions::Prefetch::OwnElseDerived},
          {"derived", user::HandlerOptions::Prefetch::Derived},
          {"none", user::HandlerOptions::Prefetch::None}}))
      ->type_name("own|derived|none");
  command.add_option("--burst", flags->burst, "packets per burst (default 32)")->type_name("N");
  command.add_option("--rounds", flags->rounds, "rounds per version (default 9)")->type_name("N");
  command.add_option("--repeat", flags->repeat, "times the trace is replayed per round (default 10)")
      ->type_name("N");
  command.add_option("--ports", flags->ports, "ports 0..N-1 are bound (default 4)")->type_name("N");
  command
      .add_option("--shadow-packets", flags->shadowPackets,
                  "before each swap, run N sample packets aimed at the tables' keys through the "
                  "new version and the generic handler, each on copies of the tables; a "
                  "difference refuses the swap; 0 turns this off (default 64)")
      ->type_name("N");
  command.add_option("--check-packets", flags->checkPackets,
                     "packets compared between generic and specialized (default 10000)")
      ->type_name("N");
  command
      .add_option("--profile", flags->profile,
                  "follow the traffic: after the first specialization, replay the trace once "
                  "through it (recording sampled lookup keys), then specialize again with fast "
                  "paths for the heavy hitters, timed as a third version; adaptive or naive "
                  "sampling (as `morpheus run`), off (default)")
      ->transform(commandline::oneOf(std::map<std::string, core::ProfileMode>{
          {"off", core::ProfileMode::Off},
          {"adaptive", core::ProfileMode::Adaptive},
          {"naive", core::ProfileMode::Naive}}))
      ->type_name("off|adaptive|naive");
  command.add_flag("--batch-model", flags->batchModel,
                   "then fit the batching model (P4C's) to the last version measured at "
                   "bursts 8, 32 and 128, with the handler's prefetch function (its own, or "
                   "derived from its code) at sub-batches "
                   "of 2, 8 and the whole burst besides none, and print its predictions "
                   "beside measurements at bursts 4 to 256 with sub-batches of none, 2, 4, "
                   "8, 16 and the whole burst, and the (burst, sub-batch) each picks; with "
                   "--explore, the exploration then tries only the bursts and sub-batches the "
                   "model predicts within 5 % of its pick, and says whether it confirms it");
  command.add_flag("--oracle", flags->oracle,
                   "also time a hand-specialized version: the routes (or rules) written in as "
                   "compares, the trace's 8 hottest destinations (or flows) first; the NAT's "
                   "configuration as constants (checked against the generic handler, packets "
                   "and tables)");
  auto *dpdk = command.add_flag("--dpdk", flags->dpdk,
                                "also time both versions receiving the trace from a DPDK "
                                "net_pcap port (no NIC, no hugepages)");
  command
      .add_option("--af-xdp", flags->afXdp,
                  "also time both versions receiving packets from AF_XDP sockets on these "
                  "interfaces (DPDK's net_af_xdp, queue 0; repeatable: port i is the i-th), "
                  "as many per round as the trace's rounds hold; the packets are whatever "
                  "arrives (e.g. morpheus-trafficgen on a veth's peer); MU_TX packets go out "
                  "of packet->port's interface")
      ->type_name("IFACE")
      ->excludes(dpdk);
  command.add_option("--exception-vdev", flags->exceptionVdev,
                     "with --dpdk or --af-xdp: the DPDK vdev MU_PASS packets go out of, the "
                     "slow path (e.g. net_tap0,iface=mu_pass0 hands them to the host stack); "
                     "without it they are freed")
      ->type_name("VDEV");
  command.add_option("--explore", flags->explore,
                     "then explore (specialized or not, burst size, the other LPM "
                     "implementations, routes as code or as a derived table or neither, the "
                     "handler's specialization points) by measuring "
                     "each configuration: exhaustive or greedy search")
      ->check(CLI::IsMember({"exhaustive", "greedy"}))
      ->type_name("exhaustive|greedy");
  command.add_option("--explore-windows", flags->exploreWindows,
                     "measurements per explored configuration, the median kept (default 3)")
      ->type_name("N");
  command.add_option("--handler", flags->handler, "another build of the function's handler")
      ->type_name("FILE");
  command
      .add_option("--generator", flags->generator,
                  "register a custom generator for the LPM tables: nested-if-lpm (the LPM "
                  "library's nested ifs, a test per prefix); its version is timed beside the "
                  "others and --explore may choose it")
      ->check(CLI::IsMember({"nested-if-lpm"}))
      ->type_name("nested-if-lpm");
  command.add_option("--no-pass", flags->noPasses,
                     "leave out this table pass (by its name in docs/passes.md; repeatable), "
                     "e.g. lpm-as-array to keep the routes' own lookup")
      ->type_name("PASS")
      ->check(CLI::IsMember(core::tablePassNames()));
  addInlineLimit(command, flags->inlineLimit);
}

} // namespace morpheus::cli
