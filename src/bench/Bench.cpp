#include "Bench.h"

#include "FollowingTraffic.h"
#include "Oracle.h"
#include "TraceDriver.h"
#include "TraceTimer.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/ProgramLink.h"
#include "core/ExplorationCandidates.h"
#include "core/PhaseClock.h"
#include "core/Pipeline.h"
#include "runtime/Daemon.h"
#include "support/Netns.h"

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <sched.h>
#include <set>
#include <unistd.h>

namespace morpheus::bench {

double Series::median() const {
  if (values.empty())
    return NAN;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}
double Series::min() const {
  return values.empty() ? NAN : *std::min_element(values.begin(), values.end());
}
double Series::max() const {
  return values.empty() ? NAN : *std::max_element(values.begin(), values.end());
}

void pinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set); // best effort: unpinned still measures
}

namespace {

struct Variant {
  std::string name;
  int fd;
  bool skipsLookups = false; // an oracle's headroom (OracleProgram::skipsLookups)
};

Expected<Trace> generateTrace(const Preset &preset, const BenchOptions &options,
                              const std::string &locality, const std::string &dir) {
  auto python = llvm::sys::findProgramByName("python3");
  if (!python)
    return makeError("python3 is needed to generate traces (tools/traces/gen_trace.py)");
  std::string output = dir + "/" + preset.name + "-" + locality + ".pcap";
  std::vector<std::string> args = {*python,
                                   MORPHEUS_SOURCE_DIR "/tools/traces/gen_trace.py"};
  if (!preset.function.empty())
    args.insert(args.end(), {"--nf", preset.function});
  args.insert(args.end(), preset.traceArgs.begin(), preset.traceArgs.end());
  args.insert(args.end(), {"--flows", std::to_string(options.flows), "--packets",
                           std::to_string(options.packets), "--seed",
                           std::to_string(options.seed), "-q", "-o", output});
  args.insert(args.end(), {locality == PhasedTrace ? "--phases" : "--locality",
                           locality == PhasedTrace ? options.phases : locality});
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  std::string message;
  int status = llvm::sys::ExecuteAndWait(args[0], refs, std::nullopt, {}, 0, 0, &message);
  if (status != 0)
    return makeError("generating the {0} trace for {1} failed ({2}): `{3}`", locality,
                     preset.name, message.empty() ? "exit " + std::to_string(status) : message,
                     llvm::join(args, " "));
  return readPcapTrace(output, locality);
}

// Every variant must treat the first packets of the trace as the baseline
// does (verdict and output bytes), or its timings mean nothing.
Error checkVariants(TraceDriver &driver, const std::vector<Variant> &variants,
                    const Trace &trace, uint32_t count, uint32_t ingress, uint64_t &checked) {
  count = std::min<uint32_t>(count, uint32_t(trace.sequence.size()));
  for (uint32_t position = 0; position < count; ++position) {
    std::pair<uint32_t, std::vector<uint8_t>> expected;
    for (size_t v = 0; v < variants.size(); ++v) {
      if (Error err = driver.setTarget(variants[v].fd))
        return err;
      auto got = driver.runOne(position, ingress);
      if (!got)
        return got.takeError();
      if (v == 0)
        expected = std::move(*got);
      else if (*got != expected)
        return makeError("trace {0}, packet {1}: {2} returned verdict {3} ({4} bytes), the "
                         "baseline {5} ({6} bytes): not benchmarking a program that behaves "
                         "differently",
                         trace.name, position, variants[v].name, got->first, got->second.size(),
                         expected.first, expected.second.size());
    }
    ++checked;
  }
  return Error::success();
}

// One variant's timing in one round: the whole trace and, for a phased
// trace, each slice.
struct RoundTiming {
  Timing whole;
  std::vector<double> segments;
};

// One round: every variant and the control once, in an order rotated by
// the round number (so any drift within a round spreads over all
// variants), by name.
Expected<std::map<std::string, RoundTiming>> timeRound(TraceTimer &timer,
                                                       const std::vector<Variant> &rotation,
                                                       uint32_t round, uint32_t segments) {
  std::map<std::string, RoundTiming> timings;
  for (size_t k = 0; k < rotation.size(); ++k) {
    const Variant &variant = rotation[(k + round) % rotation.size()];
    RoundTiming &timing = timings[variant.name];
    auto whole = timer.timeTrace(variant.fd, segments, segments > 1 ? &timing.segments : nullptr);
    if (!whole)
      return whole.takeError();
    timing.whole = *whole;
  }
  return timings;
}

// What the trace is, before anything is timed.
TraceResult describeTrace(const Trace &trace, const BenchOptions &options) {
  TraceResult result;
  result.name = trace.name;
  result.packets = trace.sequence.size();
  result.flows = trace.frames.size();
  result.top10Share = topShare(trace, 10);
  bool phased = trace.name == PhasedTrace;
  // A phased trace is timed segment by segment, so its results show how
  // each variant fares in each phase.
  result.segments = std::clamp<uint32_t>(phased ? options.segments : 1, 1,
                                         uint32_t(trace.sequence.size()));
  if (phased) {
    result.phases = options.phases;
    // Checked when the trace was generated.
    result.phaseEdges = cantFail(phaseEdges(options.phases, result.packets));
  }
  return result;
}

// Adds one round to the result: each variant's net (minus the control),
// gross (net plus an empty program's own cost) and speed-up over the
// baseline, per slice for phased traces.
void recordRound(TraceResult &result, const std::map<std::string, RoundTiming> &timings,
                 double emptyAloneNs, std::vector<std::vector<Series>> &segmentNet) {
  const RoundTiming &control = timings.at(ControlName);
  result.controlNs.values.push_back(control.whole.ns);
  result.emptyAloneNs.values.push_back(emptyAloneNs);
  double baselineNet = timings.at(BaselineName).whole.ns - control.whole.ns;
  for (size_t v = 0; v < result.variants.size(); ++v) {
    VariantResult &variant = result.variants[v];
    const RoundTiming &timing = timings.at(variant.name);
    double net = timing.whole.ns - control.whole.ns;
    variant.net.values.push_back(net);
    variant.gross.values.push_back(net + emptyAloneNs);
    variant.speedup.values.push_back(baselineNet / std::max(net, 0.1));
    for (size_t i = 0; i < timing.segments.size(); ++i)
      segmentNet[v][i].values.push_back(timing.segments[i] - control.segments[i]);
  }
}

// Times every variant (baseline first) over `trace`, after a warm-up pass
// each and the first-packets equivalence check.
Expected<TraceResult> measureTrace(TraceDriver &driver, const std::vector<Variant> &variants,
                                   int emptyFd, const Trace &trace, const BenchOptions &options,
                                   uint32_t ingress, LiveTarget *live) {
  TraceResult result = describeTrace(trace, options);
  if (Error err = driver.setTrace(trace))
    return err;
  TraceTimer timer(driver, trace, ingress, live, cpuEdges(trace, options));
  uint32_t packets = uint32_t(trace.sequence.size());
  // One untimed pass each warms caches and brings data-plane state
  // (connection tables, learned addresses) to where the timed passes see it.
  for (const Variant &variant : variants)
    if (auto warm = timer.time(variant.fd, 0, packets); !warm)
      return warm.takeError();
  if (Error err = checkVariants(driver, variants, trace, options.checkPackets, ingress,
                                result.checked))
    return err;

  for (const Variant &variant : variants) {
    VariantResult &timed = result.variants.emplace_back();
    timed.name = variant.name;
    timed.skipsLookups = variant.skipsLookups;
  }
  std::vector<Variant> rotation = variants;
  rotation.push_back({ControlName, emptyFd});
  std::vector<std::vector<Series>> segmentNet(variants.size(),
                                              std::vector<Series>(result.segments));
  for (uint32_t round = 0; round < options.rounds; ++round) {
    auto timings = timeRound(timer, rotation, round, result.segments);
    if (!timings)
      return timings.takeError();
    double controlNs = timings->at(ControlName).whole.ns;
    auto alone = timer.emptyAlone(emptyFd, controlNs);
    if (!alone)
      return alone.takeError();
    recordRound(result, *timings, *alone, segmentNet);
    if (live)
      result.mpps.values.push_back(timings->at(BaselineName).whole.mpps);
    if (options.progress)
      options.progress(llvm::formatv("  {0}: round {1}/{2}  net baseline {3:f1} ns, "
                                     "morpheus-static {4:f1} ns",
                                     trace.name, round + 1, options.rounds,
                                     timings->at(BaselineName).whole.ns - controlNs,
                                     timings->at(StaticName).whole.ns - controlNs)
                           .str());
  }
  for (size_t v = 0; v < variants.size() && result.segments > 1; ++v)
    for (const Series &segment : segmentNet[v])
      result.variants[v].segmentNet.push_back(segment.median());
  auto st = driver.state();
  if (!st)
    return st.takeError();
  if (st->tail_call_failed)
    return makeError("trace {0}: {1} tail calls into the program under test failed",
                     trace.name, st->tail_call_failed);
  result.resizedFrames = st->resized;
  return result;
}

// The optimizer's first specialization of the preset's program (what it
// applied, the model's choices) and `options.recompiles` forced ones,
// timed, into `compile`.
Error measureCompilation(const Preset &preset, const BenchOptions &options,
                         runtime::Optimizer &optimizer, CompileResult &compile) {
  compile.startupMs = optimizer.startupMs();
  compile.startupPhases = optimizer.startupPhases();
  core::CycleReport first = optimizer.runCycle();
  if (!first.installed())
    return makeError("bench {0}: Morpheus did not specialize the program: {1}", preset.name,
                     first.describe());
  compile.first = first.times;
  compile.originalInstructions = bpf::translatedInstructions(optimizer.originalFd());
  compile.specializedInstructions = first.instructions;
  for (const core::SiteDecision &decision : first.log.decisions)
    if (decision.applied)
      compile.applied.push_back(llvm::formatv("{0} site #{1} {2}: {3}", decision.table,
                                              decision.site, decision.pass, decision.detail));
  // The model's choice per site (both LPM passes log the same one).
  for (const core::SiteDecision &decision : first.log.decisions)
    if (decision.choice && std::none_of(compile.predictions.begin(), compile.predictions.end(),
                                        [&](const TablePrediction &known) {
                                          return known.site == decision.site;
                                        }))
      compile.predictions.push_back({decision.table, decision.site, *decision.choice});
  for (uint32_t i = 0; i < options.recompiles; ++i) {
    core::CycleReport again = optimizer.runCycle(/*force=*/true);
    compile.analysisMs.values.push_back(again.times.analysisMs);
    compile.codegenMs.values.push_back(again.times.codegenMs);
    auto &phases = compile.codegenPhaseMs;
    for (const core::BuildPhase &phase : again.log.phases) {
      auto known = std::find_if(phases.begin(), phases.end(),
                                [&](const auto &p) { return p.first == phase.phase; });
      if (known == phases.end())
        known = phases.insert(phases.end(), {phase.phase, Series()});
      known->second.values.push_back(phase.ms);
    }
  }
  return Error::success();
}

// The options of a loop following the traffic as `traffic` says, its fast
// paths priced by the calibrated model.
runtime::OptimizerOptions followingOptions(const runtime::OptimizerOptions &base,
                                           const BenchOptions &options,
                                           core::TrafficProfileOptions traffic) {
  runtime::OptimizerOptions following = base;
  if (options.costModel.calibrated())
    traffic.costs = options.costModel.fastPathCosts(traffic.costs);
  following.traffic = traffic;
  return following;
}

// The preset's program under a loop of `options`, configured, with its
// instrumented version installed; `what` names it in errors.
Expected<std::unique_ptr<runtime::Optimizer>>
loadInstrumented(const Preset &preset, const runtime::OptimizerOptions &options,
                 const std::string &variant, const std::string &what) {
  auto loaded = loadConfigured(preset, options, variant);
  if (!loaded)
    return loaded.takeError();
  core::CycleReport installed = (*loaded)->runCycle();
  if (!installed.installed())
    return makeError("bench {0}: {1}: the instrumented program was not installed: {2}",
                     preset.name, what, installed.describe());
  return std::move(*loaded);
}

// The variants that follow the traffic, each on its own maps (the same
// configuration), so their samples and data-plane state are their own.
Expected<std::vector<FollowingVariant>>
loadFollowingVariants(const Preset &preset, const BenchOptions &options,
                      const runtime::OptimizerOptions &base) {
  std::vector<FollowingVariant> following;
  if (options.trafficCycles == 0)
    return following;
  core::TrafficProfileOptions adaptive, sampledOnly, naive;
  naive.mode = core::ProfileMode::Naive;
  sampledOnly.maxFastPath = 0;
  naive.maxFastPath = 0;
  std::vector<std::tuple<std::string, core::TrafficProfileOptions, bool>> loops = {
      {MorpheusName, adaptive, true},
      {AdaptiveInstrumentationName, sampledOnly, true},
      {NaiveInstrumentationName, naive, false}};
  if (options.twoCpus) {
    core::TrafficProfileOptions globalChain;
    globalChain.perCpuChains = false;
    loops.emplace_back(GlobalChainName, globalChain, true);
  }
  for (uint32_t period : options.samplingPeriods) {
    core::TrafficProfileOptions held = sampledOnly;
    held.initialPeriod = held.minPeriod = held.maxPeriod = period;
    loops.emplace_back(llvm::formatv("{0}{1}", SamplingPrefix, period).str(), held, true);
  }
  for (const auto &[name, traffic, loop] : loops) {
    auto loaded =
        loadInstrumented(preset, followingOptions(base, options, traffic), name, name);
    if (!loaded)
      return loaded.takeError();
    following.push_back({name, std::move(*loaded), loop});
  }
  return following;
}

// The traces generated as `options` asks (each locality, and the phased
// one) into `traceDir`, then the pcap files it names.
Expected<std::vector<Trace>> loadTraces(const Preset &preset, const BenchOptions &options,
                                        const std::string &traceDir) {
  std::vector<Trace> traces;
  std::vector<std::string> generated = options.localities;
  if (!options.phases.empty())
    generated.push_back(PhasedTrace);
  for (const std::string &locality : generated) {
    if (options.progress)
      options.progress(llvm::formatv("bench {0}: generating the '{1}' trace ({2} flows, {3} "
                                     "packets, seed {4})",
                                     preset.name, locality, options.flows, options.packets,
                                     options.seed)
                           .str());
    auto trace = generateTrace(preset, options, locality, traceDir);
    if (!trace)
      return trace.takeError();
    traces.push_back(std::move(*trace));
  }
  for (const std::string &file : options.traceFiles) {
    auto trace = readPcapTrace(file, std::string(llvm::sys::path::filename(file)));
    if (!trace)
      return trace.takeError();
    traces.push_back(std::move(*trace));
  }
  return traces;
}

// What every trace of one benchmark is measured with, loaded once.
struct BenchSetup {
  const Preset &preset;
  const BenchOptions &options;
  runtime::Optimizer &optimizer; // the baseline and morpheus-static
  std::vector<FollowingVariant> following;
  // morpheus-explored's (BenchOptions::exploreTrials): its optimizer and
  // maps, and the decisions and settings of its first (the model's)
  // version, which every trace's exploration starts from (the optimizer
  // keeps the settings of the previous trace's choice).
  std::unique_ptr<runtime::Optimizer> explored;
  core::SpecializationLog exploredLog;
  core::VersionSettings exploredModel;
  // The adaptation experiment's loop (BenchOptions::adaptPeriod).
  std::unique_ptr<runtime::Optimizer> adapting;
  bpf::LoadedObject unguarded; // morpheus-static without its program guard
  TraceDriver driver;
  bpf::LoadedObject empty; // the control
  uint32_t ingress = 0;
  LiveTarget *live = nullptr; // the live method's target; null: the driver's
};

// Every variant to time on `trace`, baseline first: morpheus (the loop),
// morpheus-static, its unguarded twin, the instrumentation costs, the
// oracles (`oracles` holds them).
Expected<std::vector<Variant>> variantsFor(BenchSetup &setup, const Trace &trace,
                                           std::vector<OracleProgram> &oracles) {
  runtime::Optimizer &optimizer = setup.optimizer;
  std::vector<Variant> variants = {{BaselineName, optimizer.originalFd()}};
  for (FollowingVariant &variant : setup.following)
    if (variant.name == MorpheusName)
      variants.push_back({variant.name, variant.optimizer->activeFd()});
  variants.push_back({StaticName, optimizer.activeFd()});
  variants.push_back({UnguardedName, setup.unguarded.programFd(optimizer.entryName())});
  for (FollowingVariant &variant : setup.following)
    if (variant.name != MorpheusName)
      variants.push_back({variant.name, variant.optimizer->activeFd()});
  if (setup.explored)
    variants.push_back({ExploredName, setup.explored->activeFd()});
  // The oracles are generated from what the data plane holds for this
  // trace (nat's bindings): the baseline's untimed pass through it first,
  // the state the warm-up would bring.
  if (!setup.preset.oracle.empty()) {
    if (Error err = setup.driver.setTrace(trace))
      return err;
    TraceTimer timer(setup.driver, trace, setup.ingress, setup.live,
                     cpuEdges(trace, setup.options));
    if (auto pass = timer.time(optimizer.originalFd(), 0, uint32_t(trace.sequence.size()));
        !pass)
      return pass.takeError();
  }
  auto loaded = loadOracles(setup.preset, optimizer, trace, setup.ingress);
  if (!loaded)
    return loaded.takeError();
  oracles = std::move(*loaded);
  for (const OracleProgram &oracle : oracles)
    variants.push_back({oracle.name, oracle.fd(), oracle.skipsLookups});
  return variants;
}

// morpheus-explored on `trace`: the model's version, the versions without
// one close pass (core::explorationCandidates) and the baseline, timed on
// the whole trace in interleaved rounds (core::ExplorationSchedule: a
// version slower than the baseline is dropped at once); the fastest
// median no slower than the baseline's is installed, or, when none is,
// the original serves (Optimizer::serveOriginal). One line per trial and
// the choice, as `run --explore` prints them.
Expected<std::vector<std::string>> exploreOnTrace(BenchSetup &setup, const Trace &trace) {
  runtime::Optimizer &explored = *setup.explored;
  std::vector<core::ExplorationCandidate> candidates =
      core::explorationCandidates(setup.exploredLog, setup.options.exploreTrials);
  const core::VersionSettings &model = setup.exploredModel;
  std::vector<core::ExplorationCandidate> widened =
      core::widenedCandidates(setup.exploredLog, setup.options.exploreTrials, candidates);
  auto nameOf = [&](size_t slot) {
    return slot == 0 ? std::string("the baseline") : candidates[slot - 1].description;
  };
  std::vector<std::string> lines;
  if (Error err = setup.driver.setTrace(trace))
    return err;
  TraceTimer timer(setup.driver, trace, setup.ingress, setup.live,
                   cpuEdges(trace, setup.options));
  uint32_t packets = uint32_t(trace.sequence.size());
  auto serve = [&](size_t slot) -> Expected<int> {
    if (slot == 0)
      return explored.originalFd();
    explored.setVersionSettings(core::candidateSettings(candidates[slot - 1], model));
    core::CycleReport cycle = explored.runCycle(/*force=*/true);
    if (!cycle.installed() && cycle.outcome != core::CycleOutcome::Unchanged)
      return makeError("{0}", cycle.describe());
    return explored.activeFd();
  };
  // Three rounds unless nothing is to be tried beside the model's version.
  core::ExplorationSchedule schedule(candidates.size(), candidates.size() > 1 || !widened.empty()
                                                            ? setup.options.exploreRounds
                                                            : 1);
  double predicted = core::predictedSavingNs(setup.exploredLog);
  for (;;) {
    std::optional<size_t> slot = schedule.next();
    // The model's version measured short of its predicted saving: the
    // versions it was not close on too, as `run --explore` tries them.
    if (!slot && !widened.empty() && schedule.median(0) && schedule.median(1) &&
        core::gainFallsShort(predicted, *schedule.median(0), *schedule.median(1))) {
      lines.push_back(llvm::formatv("the model's version saves {0:f1} ns/packet measured, "
                                    "{1:f1} predicted: trying {2} more",
                                    *schedule.median(0) - *schedule.median(1), predicted,
                                    widened.size())
                          .str());
      candidates.insert(candidates.end(), widened.begin(), widened.end());
      schedule.extend(widened.size());
      widened.clear();
      slot = schedule.next();
    }
    if (!slot)
      break;
    auto fd = serve(*slot);
    if (!fd) {
      lines.push_back("not tried: " + nameOf(*slot) + ": " + llvm::toString(fd.takeError()));
      schedule.skip(*slot);
      continue;
    }
    auto timing = timer.time(*fd, 0, packets);
    if (!timing)
      return timing.takeError();
    schedule.record(*slot, timing->ns);
    lines.push_back(llvm::formatv("tried {0}  {1:f1} ns/packet ({2} packets){3}", nameOf(*slot),
                                  timing->ns, packets,
                                  *slot && schedule.dropped(*slot) ? "; slower than the baseline"
                                                                   : "")
                        .str());
  }
  size_t chosen = schedule.choice();
  if (chosen == 0) {
    explored.setVersionSettings(model);
    if (Error err = explored.serveOriginal())
      return err;
  } else if (auto fd = serve(chosen); !fd) {
    return withContext(fd.takeError(), "morpheus-explored: the chosen version");
  }
  lines.push_back(llvm::formatv("chose {0} ({1:f1} ns/packet with the driver; the baseline "
                                "{2:f1})",
                                nameOf(chosen), schedule.median(chosen).value_or(0),
                                schedule.median(0).value_or(0))
                      .str());
  return lines;
}

// One trace: the loops follow it, then every variant is timed on it, then
// (the phased trace) the adaptation experiment plays it.
Expected<TraceResult> benchTrace(BenchSetup &setup, const Trace &trace) {
  const BenchOptions &options = setup.options;
  const Preset &preset = setup.preset;
  std::vector<std::string> followed;
  for (FollowingVariant &variant : setup.following)
    if (variant.loop) {
      auto log = followTrace(setup.driver, *variant.optimizer, trace, options, setup.ingress,
                             setup.live);
      if (!log)
        return log.takeError();
      if (variant.name == MorpheusName)
        followed = std::move(*log);
    }
  std::vector<std::string> explored;
  if (setup.explored) {
    auto lines = exploreOnTrace(setup, trace);
    if (!lines)
      return lines.takeError();
    explored = std::move(*lines);
  }
  std::vector<OracleProgram> oracles;
  auto variants = variantsFor(setup, trace, oracles);
  if (!variants)
    return variants.takeError();
  if (options.progress)
    options.progress(llvm::formatv("bench {0}: trace '{1}': {2} packets, {3} flows, top-10 "
                                   "share {4:f3}; {5} rounds",
                                   preset.name, trace.name, trace.sequence.size(),
                                   trace.frames.size(), topShare(trace, 10), options.rounds)
                         .str());
  int emptyFd = setup.empty.programFd(emptyControlName(setup.driver.programType()));
  auto measured =
      measureTrace(setup.driver, *variants, emptyFd, trace, options, setup.ingress, setup.live);
  if (!measured)
    return measured.takeError();
  measured->followed = std::move(followed);
  measured->explored = std::move(explored);
  if (setup.adapting && trace.name == PhasedTrace) {
    if (options.progress)
      options.progress(llvm::formatv("bench {0}: adaptation on the '{1}' trace: a cycle "
                                     "every {2} of {3} slices",
                                     preset.name, trace.name, options.adaptPeriod,
                                     measured->segments)
                           .str());
    auto adaptation =
        adaptToTrace(setup.driver, *setup.adapting, setup.optimizer.originalFd(), emptyFd,
                     trace, *measured, options, setup.ingress, setup.live);
    if (!adaptation)
      return adaptation.takeError();
    measured->adaptation = std::move(*adaptation);
  }
  return measured;
}

// The ifindexes of the preset's ingress interface and of the sender's
// interface (its veth peer); zeros when the preset has no ingress.
Expected<std::pair<uint32_t, uint32_t>> ingressAndSender(const Preset &preset,
                                                         const std::string &senderInterface) {
  if (preset.ingress.empty())
    return std::make_pair(0u, 0u);
  auto ingressIndex = netns::interfaceIndex(preset.ingress);
  if (!ingressIndex)
    return ingressIndex.takeError();
  auto senderIndex = netns::interfaceIndex(senderInterface);
  if (!senderIndex)
    return senderIndex.takeError();
  return std::make_pair(uint32_t(*ingressIndex), uint32_t(*senderIndex));
}

Expected<BenchResult> runInNamespace(const Preset &preset, const BenchOptions &options,
                                     bpf::ProgramType type, const std::string &traceDir,
                                     const std::string &senderInterface) {
  BenchResult result;
  result.method = options.method == Method::Live ? "live" : "driver";
  result.preset = preset.name;
  result.program = preset.program;
  result.programType = type;
  int cpu = options.cpu >= 0 ? options.cpu : int(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  pinToCpu(cpu);
  auto interfaces = ingressAndSender(preset, senderInterface);
  if (!interfaces)
    return interfaces.takeError();
  auto [ingress, senderIfindex] = *interfaces;

  runtime::OptimizerOptions optimizerOptions;
  optimizerOptions.frontend.programType = options.programType;
  optimizerOptions.shadowPackets = options.shadowPackets;
  optimizerOptions.inlineLimit = options.inlineLimit;
  if (!options.noPasses.empty())
    optimizerOptions.tablePasses = core::tablePassesWithout(options.noPasses);
  optimizerOptions.costModel = options.costModel;
  result.costModel = options.costModel.source();
  optimizerOptions.faults = options.faults;
  auto created = loadConfigured(preset, optimizerOptions, "static");
  if (!created)
    return created.takeError();
  runtime::Optimizer &optimizer = **created;
  if (options.progress)
    options.progress(llvm::formatv("bench {0}: loaded {1} ({2:f0} ms) and configured{3}",
                                   preset.name, preset.program, optimizer.startupMs(),
                                   options.noPasses.empty()
                                       ? std::string()
                                       : "; table passes left out: " +
                                             llvm::join(options.noPasses, ", "))
                         .str());
  if (Error err = measureCompilation(preset, options, optimizer, result.compile))
    return err;

  auto following = loadFollowingVariants(preset, options, optimizerOptions);
  if (!following)
    return following.takeError();
  // The adaptation experiment's loop: the `morpheus` variant's options, an
  // optimizer and maps of its own, instrumented and nothing learnt yet.
  std::unique_ptr<runtime::Optimizer> adapting;
  if (options.adaptPeriod > 0) {
    auto loaded = loadInstrumented(
        preset, followingOptions(optimizerOptions, options, core::TrafficProfileOptions()),
        "adapting", "adaptation");
    if (!loaded)
      return loaded.takeError();
    adapting = std::move(*loaded);
  }
  // morpheus-explored: the static variant's options, an optimizer and
  // maps of its own (each trace's exploration swaps its versions).
  std::unique_ptr<runtime::Optimizer> explored;
  core::SpecializationLog exploredLog;
  core::VersionSettings exploredModel;
  if (options.exploreTrials > 0) {
    auto loaded = loadConfigured(preset, optimizerOptions, "explored");
    if (!loaded)
      return loaded.takeError();
    core::CycleReport first = (*loaded)->runCycle();
    if (!first.installed())
      return makeError("bench {0}: morpheus-explored: the model's version was not installed: "
                       "{1}",
                       preset.name, first.describe());
    explored = std::move(*loaded);
    exploredLog = std::move(first.log);
    exploredModel = explored->versionSettings();
  }
  auto unguarded = optimizer.loadUnguardedTwin();
  if (!unguarded)
    return withContext(unguarded.takeError(), "bench " + preset.name + ": unguarded twin");
  auto driver = TraceDriver::load(type, options.method == Method::Live);
  if (!driver)
    return driver.takeError();
  auto empty = loadEmptyControl();
  if (!empty)
    return empty.takeError();
  auto traces = loadTraces(preset, options, traceDir);
  if (!traces)
    return traces.takeError();

  BenchSetup setup{preset,
                   options,
                   optimizer,
                   std::move(*following),
                   std::move(explored),
                   std::move(exploredLog),
                   std::move(exploredModel),
                   std::move(adapting),
                   std::move(*unguarded),
                   std::move(*driver),
                   std::move(*empty),
                   ingress};
  // Declared after the setup, so the links detach before any variant goes.
  std::optional<LiveTarget> live;
  if (options.method == Method::Live) {
    if (preset.ingress.empty())
      return makeError("{0}: the live method needs an 'ingress' interface", preset.file);
    auto attached = LiveTarget::attach(type, preset.ingress, optimizer.originalFd(),
                                       setup.empty.programFd("pass"), senderIfindex);
    if (!attached)
      return attached.takeError();
    live.emplace(std::move(*attached));
    setup.live = &*live;
  }
  for (const Trace &trace : *traces) {
    auto measured = benchTrace(setup, trace);
    if (!measured)
      return measured.takeError();
    result.traces.push_back(std::move(*measured));
  }
  return result;
}

} // namespace

Expected<std::vector<uint64_t>> phaseEdges(const std::string &spec, uint64_t packets) {
  std::vector<std::optional<uint64_t>> lengths;
  for (llvm::StringRef item : llvm::split(spec, ',')) {
    llvm::SmallVector<llvm::StringRef, 3> fields;
    item.trim().split(fields, '/');
    if (fields.size() > 3 || fields[0].empty())
      return makeError("bad phase '{0}' in '{1}': expected MODEL[/PACKETS[/SET]]", item, spec);
    uint64_t length = 0;
    if (fields.size() < 2 || fields[1].empty() || fields[1] == "*")
      lengths.push_back(std::nullopt);
    else if (fields[1].getAsInteger(10, length) || length == 0)
      return makeError("bad phase '{0}' in '{1}': PACKETS must be a positive integer", item,
                       spec);
    else
      lengths.push_back(length);
  }
  uint64_t sized = 0, unsized = 0;
  for (const std::optional<uint64_t> &length : lengths)
    length ? sized += *length : ++unsized;
  if (unsized && sized > packets)
    return makeError("phases '{0}' need {1} packets, more than the trace's {2}", spec, sized,
                     packets);
  uint64_t left = unsized ? packets - sized : 0, position = 0, k = 0;
  std::vector<uint64_t> edges;
  for (size_t i = 0; i + 1 < lengths.size(); ++i) {
    if (lengths[i])
      position += *lengths[i];
    else
      position += left / unsized + (k++ < left % unsized ? 1 : 0);
    edges.push_back(position);
  }
  return edges;
}

Expected<bpf::ProgramType> benchedProgramType(const Preset &preset, const BenchOptions &options) {
  bpf::FrontendOptions frontend;
  frontend.programType = options.programType;
  auto spec = bpf::ProgramSpec::load(preset.program, frontendFor(preset, frontend));
  if (!spec)
    return withContext(spec.takeError(), "bench " + preset.name);
  auto entry = (*spec)->runnableEntry(preset.entry);
  if (!entry)
    return withContext(entry.takeError(), "bench " + preset.name + ": " + preset.program);
  return (*spec)->programType(*entry);
}

Expected<BenchResult> runBench(const Preset &preset, const BenchOptions &options) {
  if (options.rounds == 0 || options.packets == 0)
    return makeError("bench: --rounds and --packets must be at least 1");
  if (!options.phases.empty())
    if (auto edges = phaseEdges(options.phases, options.packets); !edges)
      return withContext(edges.takeError(), "bench: --phases");
  for (uint32_t period : options.samplingPeriods)
    if (!llvm::isPowerOf2_32(period))
      return makeError("bench: sampling period {0} is not a power of two", period);
  if (!options.samplingPeriods.empty() && options.trafficCycles == 0)
    return makeError("bench: the sampling-rate sweep (--sampling-periods) runs the loop: "
                     "give --traffic-cycles 1 or more");
  if (options.adaptPeriod > 0 && options.phases.empty())
    return makeError("bench: the adaptation experiment (--adapt-period) runs on a phased "
                     "trace: give --phases");
  auto type = benchedProgramType(preset, options);
  if (!type)
    return type.takeError();
  std::string traceDir = options.keepTraces;
  llvm::SmallString<128> temporary;
  if (traceDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("morpheus-bench", temporary))
      return makeSystemError(ec.value(), "bench: cannot create a directory for traces");
    traceDir = std::string(temporary);
  } else if (std::error_code ec = llvm::sys::fs::create_directories(traceDir)) {
    return makeSystemError(ec.value(), "bench: cannot create {0}", traceDir);
  }
  // bpf_stats stay on only while this is open.
  auto stats = bpf::enableRunTimeStats();
  if (!stats)
    return withContext(stats.takeError(), "bench");

  BenchResult result;
  Error err = inPresetNamespace(preset, [&](const std::string &sender) -> Error {
    auto measured = runInNamespace(preset, options, *type, traceDir, sender);
    if (!measured)
      return measured.takeError();
    result = std::move(*measured);
    return Error::success();
  });
  stats->reset();
  if (!temporary.empty())
    llvm::sys::fs::remove_directories(temporary);
  if (err)
    return withContext(std::move(err), "bench");
  return result;
}

} // namespace morpheus::bench
