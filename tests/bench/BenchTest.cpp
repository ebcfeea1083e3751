// `morpheus bench` on the real kernel, tiny runs: the pipeline produces a
// result for every variant, the equivalence check refuses a specialization
// that treats packets differently, and bad presets and traces are reported
// by file, line and packet. Timings are never asserted (docs/benchmarks.md
// holds the numbers).
#include "bench/Bench.h"
#include "bench/Calibration.h"
#include "bench/TraceDriver.h"
#include "bench/TraceTimer.h"

#include "backend/bpf/ProgramSpec.h"
#include "support/Netns.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/ADT/ScopeExit.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Testing/Support/Error.h>
#include <nlohmann/json.hpp>
#include <pcap/pcap.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

namespace morpheus::bench {
namespace {

BenchOptions tinyRun() {
  BenchOptions options;
  options.localities = {"high"};
  options.packets = 4096;
  options.flows = 64;
  options.rounds = 2;
  options.recompiles = 1;
  options.trafficCycles = 2;
  return options;
}

TEST(Bench, TinyRunMeasuresEveryVariant) {
  auto preset = readPreset("router-20routes");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  auto result = runBench(*preset, tinyRun());
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());

  ASSERT_EQ(result->traces.size(), 1u);
  const TraceResult &trace = result->traces[0];
  EXPECT_EQ(trace.packets, 4096u);
  EXPECT_EQ(trace.checked, 256u);
  std::vector<std::string> names;
  for (const VariantResult &variant : trace.variants) {
    names.push_back(variant.name);
    ASSERT_EQ(variant.net.values.size(), 2u) << variant.name;
    EXPECT_TRUE(std::isfinite(variant.net.median())) << variant.name;
    EXPECT_GT(variant.gross.median(), variant.net.median()) << variant.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"baseline", "morpheus", "morpheus-static",
                                             "morpheus-static-unguarded",
                                             "adaptive-instrumentation", "naive-instrumentation",
                                             "morpheus-explored", "oracle-hot10",
                                             "oracle-full"}));
  // The loop ran its cycles on the trace before timing.
  EXPECT_EQ(trace.followed.size(), tinyRun().trafficCycles);
  // The explored variant timed the baseline and the versions it tried, and
  // chose one of them.
  ASSERT_GE(trace.explored.size(), 3u);
  EXPECT_EQ(trace.explored.front().rfind("tried the baseline  ", 0), 0u) << trace.explored.front();
  EXPECT_EQ(trace.explored.back().rfind("chose ", 0), 0u) << trace.explored.back();
  EXPECT_NE(formatResult(*result).find("    explored tried the model's choice  "),
            std::string::npos);
  EXPECT_GT(trace.emptyAloneNs.median(), 0);
  EXPECT_GT(result->compile.first.codegenMs, 0);
  EXPECT_EQ(result->compile.codegenMs.values.size(), 1u);
  EXPECT_FALSE(result->compile.applied.empty());

  nlohmann::json json = toJson(*result);
  EXPECT_EQ(json["preset"], "router-20routes");
  EXPECT_EQ(json["traces"][0]["variants"].size(), 9u);
  EXPECT_NE(formatResult(*result).find("oracle-full"), std::string::npos);

  // The 20 routes' representation was the cost model's (default costs
  // here), printed beside the measured saving it is attributed.
  ASSERT_EQ(result->compile.predictions.size(), 1u);
  const TablePrediction &routes = result->compile.predictions[0];
  EXPECT_EQ(routes.table, "routes");
  EXPECT_EQ(routes.choice.chosen, core::Representation::PrefixSearch);
  EXPECT_FALSE(routes.choice.calibrated);
  std::string text = formatResult(*result);
  EXPECT_NE(text.find("routes site #"), std::string::npos) << text;
  EXPECT_NE(text.find("predicted map"), std::string::npos) << text;
  EXPECT_NE(text.find("attributed to this table: search"), std::string::npos) << text;
  EXPECT_EQ(json["compile"]["predictions"][0]["chosen"], "search");
}

// tc_stamp's two counters: fresh packets, packets carrying its own stamp.
// (Through MapAccess: libbpf's header and pcap's both define bpf_insn.)
std::pair<uint64_t, uint64_t> arrivals(int mapFd) {
  bpf::MapAccess map{mapFd, "arrivals"};
  uint64_t counts[2] = {};
  for (uint32_t i = 0; i < 2; ++i) {
    auto count = map.find<uint64_t>(i);
    EXPECT_THAT_EXPECTED(count, llvm::Succeeded());
    counts[i] = count && *count ? **count : ~0ull;
  }
  return {counts[0], counts[1]};
}

// Two IPv4/UDP frames (TOS 0), 48 bytes each, alternating 100 times.
Trace twoFrames() {
  Trace trace;
  trace.name = "two frames";
  trace.frameLength = 48;
  for (uint8_t last : {1, 2}) {
    std::vector<uint8_t> frame(48, 0);
    frame[12] = 0x08;                             // IPv4
    frame[14] = 0x45;                             // version 4, 20-byte header
    frame[17] = 28;                               // total length
    frame[22] = 64;                               // TTL
    frame[23] = 17;                               // UDP
    frame[29] = last;                             // source 0.0.0.last
    trace.frames.push_back(frame);
  }
  for (uint32_t i = 0; i < 100; ++i)
    trace.sequence.push_back(i % 2);
  return trace;
}

// tc_stamp loaded as compiled, stamping TOS 4.
Expected<bpf::LoadedObject> loadStamp(const Preset &preset) {
  auto spec = bpf::ProgramSpec::load(preset.program, {});
  if (!spec)
    return spec.takeError();
  auto object = bpf::LoadedObject::load((*spec)->originalElf(), (*spec)->objectName(), {});
  if (!object)
    return object.takeError();
  bpf::MapAccess stamp{object->mapFd("stamp"), "stamp"};
  if (Error err = stamp.put(uint32_t(0), uint32_t(4)))
    return std::move(err);
  return object;
}

// A TC program that rewrites its packet (tc_stamp stamps the TOS byte and
// clears the mark): the bench drives TC programs one test run per packet,
// so every run starts from the trace's frame, never from the program's own
// output, as BPF_PROG_TEST_RUN's repeat would hand it.
TEST(Bench, TcProgramsRunOnAFreshPacketEachTime) {
  auto preset = readPreset("tc_stamp");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  auto object = loadStamp(*preset);
  ASSERT_THAT_EXPECTED(object, llvm::Succeeded());
  int program = object->programFd("stamp_tos");
  auto stats = bpf::enableRunTimeStats();
  ASSERT_THAT_EXPECTED(stats, llvm::Succeeded());

  Trace trace = twoFrames();
  auto driver = TraceDriver::load(bpf::ProgramType::Tc);
  ASSERT_THAT_EXPECTED(driver, llvm::Succeeded());
  EXPECT_EQ(driver->programType(), bpf::ProgramType::Tc);
  ASSERT_THAT_ERROR(driver->setTrace(trace), llvm::Succeeded());
  ASSERT_THAT_ERROR(driver->setTarget(program), llvm::Succeeded());
  auto ns = driver->measure(0, 100, 0);
  ASSERT_THAT_EXPECTED(ns, llvm::Succeeded());
  EXPECT_GT(*ns, 0);
  EXPECT_EQ(arrivals(object->mapFd("arrivals")), std::make_pair(uint64_t(100), uint64_t(0)))
      << "every one of the 100 runs began from the trace's frame";
  auto one = driver->runOne(1, 0);
  ASSERT_THAT_EXPECTED(one, llvm::Succeeded());
  EXPECT_EQ(one->first, 0u) << "TC_ACT_OK";
  ASSERT_GT(one->second.size(), 15u);
  EXPECT_EQ(one->second[15], 4) << "the frame it left carries the stamp";
  EXPECT_EQ(one->second[29], 2) << "packet 1 of the trace is its second frame";

  // What the bench avoids: one test run repeated 100 times hands the
  // program its own output 99 times.
  bpf::TestRunInput repeated;
  repeated.packet = trace.frames[0];
  repeated.repeat = 100;
  ASSERT_THAT_EXPECTED(bpf::testRun(program, repeated), llvm::Succeeded());
  EXPECT_EQ(arrivals(object->mapFd("arrivals")), std::make_pair(uint64_t(102), uint64_t(99)));
}

// The whole bench on that TC program: every variant is checked against the
// baseline and timed, the stamp inlined by Morpheus.
TEST(Bench, TinyRunBenchesATcProgram) {
  auto preset = readPreset("tc_stamp");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  BenchOptions options = tinyRun();
  options.packets = 1024;
  options.trafficCycles = 0;
  auto result = runBench(*preset, options);
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
  EXPECT_EQ(result->programType, bpf::ProgramType::Tc);
  const TraceResult &trace = result->traces.at(0);
  EXPECT_EQ(trace.checked, 256u);
  std::vector<std::string> names;
  for (const VariantResult &variant : trace.variants) {
    names.push_back(variant.name);
    EXPECT_TRUE(std::isfinite(variant.net.median())) << variant.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"baseline", "morpheus-static",
                                             "morpheus-static-unguarded",
                                             "morpheus-explored"}));
  EXPECT_FALSE(result->compile.applied.empty());
  EXPECT_NE(formatResult(*result).find("(driver method, tc: a test run per packet"),
            std::string::npos)
      << formatResult(*result);
  EXPECT_EQ(toJson(*result)["program_type"], "tc");
}

// The live method on a TC program: frames sent over the veth pass the
// receiving end's XDP hook (`pass`) and reach the program on tcx ingress,
// each once and as sent; the whole bench times both variants that way.
TEST(Bench, LiveFramesReachATcProgramOnTcxIngress) {
  auto preset = readPreset("tc_stamp");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  auto object = loadStamp(*preset);
  ASSERT_THAT_EXPECTED(object, llvm::Succeeded());
  int program = object->programFd("stamp_tos");
  auto empty = loadEmptyControl();
  ASSERT_THAT_EXPECTED(empty, llvm::Succeeded());
  auto stats = bpf::enableRunTimeStats();
  ASSERT_THAT_EXPECTED(stats, llvm::Succeeded());
  Trace trace = twoFrames();
  Timing timing;
  Error err = inPresetNamespace(*preset, [&](const std::string &sender) -> Error {
    auto ingress = netns::interfaceIndex(preset->ingress);
    if (!ingress)
      return ingress.takeError();
    auto senderIndex = netns::interfaceIndex(sender);
    if (!senderIndex)
      return senderIndex.takeError();
    auto live = LiveTarget::attach(bpf::ProgramType::Tc, preset->ingress, program,
                                   empty->programFd("pass"), uint32_t(*senderIndex));
    if (!live)
      return live.takeError();
    auto driver = TraceDriver::load(bpf::ProgramType::Tc, /*sends=*/true);
    if (!driver)
      return driver.takeError();
    if (Error err = driver->setTrace(trace))
      return err;
    TraceTimer timer(*driver, trace, uint32_t(*ingress), &*live, {});
    auto timed = timer.time(program, 0, 100);
    if (!timed)
      return timed.takeError();
    timing = *timed;
    return Error::success();
  });
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_GT(timing.ns, 0);
  EXPECT_GT(timing.mpps, 0);
  EXPECT_EQ(arrivals(object->mapFd("arrivals")), std::make_pair(uint64_t(100), uint64_t(0)))
      << "each of the 100 frames sent ran the TC program once, unstamped";

  BenchOptions options = tinyRun();
  options.method = Method::Live;
  options.packets = 1024;
  options.trafficCycles = 0;
  auto result = runBench(*preset, options);
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
  EXPECT_EQ(result->method, "live");
  EXPECT_EQ(result->programType, bpf::ProgramType::Tc);
  const TraceResult &measured = result->traces.at(0);
  EXPECT_EQ(measured.checked, 256u);
  std::vector<std::string> names;
  for (const VariantResult &variant : measured.variants) {
    names.push_back(variant.name);
    ASSERT_EQ(variant.net.values.size(), options.rounds) << variant.name;
    EXPECT_TRUE(std::isfinite(variant.net.median())) << variant.name;
    EXPECT_TRUE(std::isfinite(variant.gross.median())) << variant.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"baseline", "morpheus-static",
                                             "morpheus-static-unguarded",
                                             "morpheus-explored"}));
  ASSERT_EQ(measured.mpps.values.size(), options.rounds);
  EXPECT_GT(measured.mpps.median(), 0);
  EXPECT_GT(measured.controlNs.median(), 0) << "the empty TC program ran on tcx too";
  EXPECT_NE(formatResult(*result).find("(live method, tc: on tcx ingress"), std::string::npos)
      << formatResult(*result);
}

// What bench cannot run is refused before anything is loaded or traced: a
// tracepoint named as the entry. TC programs are benched by both methods.
TEST(Bench, RefusesWhatItCannotBenchFirst) {
  auto preset = readPreset("tc_stamp");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  BenchOptions options = tinyRun();
  options.method = Method::Live;
  EXPECT_THAT_EXPECTED(benchedProgramType(*preset, options),
                       llvm::HasValue(bpf::ProgramType::Tc));
  Preset tracepoint = *preset;
  tracepoint.program = (llvm::sys::path::parent_path(preset->program) +
                        "/tracepoint_feeds_xdp.bpf.c")
                           .str();
  tracepoint.entry = "count_test_runs";
  EXPECT_THAT_EXPECTED(benchedProgramType(tracepoint, tinyRun()),
                       llvm::FailedWithMessage(testing::HasSubstr(
                           "program 'count_test_runs' is a tracepoint program")));
  tracepoint.entry = "";
  EXPECT_THAT_EXPECTED(benchedProgramType(tracepoint, tinyRun()),
                       llvm::HasValue(bpf::ProgramType::Xdp));
}

// The sampling-rate sweep: a variant per period, timed with the others;
// periods that are not powers of two, or a sweep without the loop, are
// refused before anything loads.
TEST(Bench, SamplingSweepTimesAVariantPerPeriod) {
  auto preset = readPreset("router-20routes");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  BenchOptions options = tinyRun();
  options.samplingPeriods = {1, 256};
  auto result = runBench(*preset, options);
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
  std::vector<std::string> sweep;
  for (const VariantResult &variant : result->traces.at(0).variants)
    if (llvm::StringRef(variant.name).starts_with("sampling-every-")) {
      sweep.push_back(variant.name);
      EXPECT_TRUE(std::isfinite(variant.net.median())) << variant.name;
    }
  EXPECT_EQ(sweep, (std::vector<std::string>{"sampling-every-1", "sampling-every-256"}));

  options.samplingPeriods = {3};
  EXPECT_THAT_EXPECTED(runBench(*preset, options),
                       llvm::FailedWithMessage(testing::HasSubstr("not a power of two")));
  options.samplingPeriods = {4};
  options.trafficCycles = 0;
  EXPECT_THAT_EXPECTED(runBench(*preset, options),
                       llvm::FailedWithMessage(testing::HasSubstr("--traffic-cycles")));
}

// Phases are cut where gen_trace.py cuts them: sized ones as given, the
// rest sharing what is left (the first ones one packet more); bad specs are
// refused naming the phase.
TEST(Bench, PhaseEdgesAreCutAsTheTraceGeneratorCutsThem) {
  EXPECT_THAT_EXPECTED(phaseEdges("uniform/100,high/50/A,high/25/B", 1000),
                       llvm::HasValue(std::vector<uint64_t>{100, 150}));
  EXPECT_THAT_EXPECTED(phaseEdges("uniform,high/400/A,high//B", 1001),
                       llvm::HasValue(std::vector<uint64_t>{301, 701}));
  EXPECT_THAT_EXPECTED(phaseEdges("high", 10), llvm::HasValue(std::vector<uint64_t>{}));
  EXPECT_THAT_EXPECTED(phaseEdges("uniform/0,high", 10),
                       llvm::FailedWithMessage(testing::HasSubstr("'uniform/0'")));
  EXPECT_THAT_EXPECTED(phaseEdges("uniform/a/b/c,high", 10),
                       llvm::FailedWithMessage(testing::HasSubstr("MODEL[/PACKETS[/SET]]")));
  EXPECT_THAT_EXPECTED(phaseEdges("uniform/20,high", 10),
                       llvm::FailedWithMessage(testing::HasSubstr("more than the trace's 10")));
}

// The adaptation experiment: the phased trace plays in order through a
// loop of its own, every slice timed against the baseline, a cycle before
// every second slice, the slices told apart by phase; on the hot phases
// the loop installs fast paths (l2switch: the FDB's hot destinations).
// --two-cpus: each phase of the phased trace plays on its own CPU, so the
// loop's samples show a hot set per CPU and it builds per-CPU chains; the
// loop with them off is timed beside it.
TEST(Bench, TwoCpusPlaysEachPhaseOnItsOwnCpu) {
  if (sysconf(_SC_NPROCESSORS_ONLN) < 2)
    GTEST_SKIP() << "needs two CPUs";
  auto preset = readPreset("l2switch");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  BenchOptions options = tinyRun();
  options.localities = {};
  options.flows = 40;
  options.phases = "zipf:0.5/2048/A,zipf:0.5/2048/B";
  options.segments = 2;
  options.twoCpus = true;
  auto result = runBench(*preset, options);
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
  ASSERT_EQ(result->traces.size(), 1u);
  const TraceResult &trace = result->traces[0];
  bool globalChain = false;
  for (const VariantResult &variant : trace.variants)
    if (variant.name == "morpheus-global-chain") {
      globalChain = true;
      EXPECT_TRUE(std::isfinite(variant.net.median()));
    }
  EXPECT_TRUE(globalChain) << formatResult(*result);
  ASSERT_FALSE(trace.followed.empty());
  EXPECT_NE(trace.followed.back().find("per-CPU chains: CPU 0:"), std::string::npos)
      << trace.followed.back();
}

TEST(Bench, AdaptationPlaysThePhasedTraceThroughItsOwnLoop) {
  auto preset = readPreset("l2switch");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  BenchOptions options = tinyRun();
  options.localities = {};
  options.phases = "uniform/1024,high/2048/A,high/*/B";
  options.segments = 8;
  options.adaptPeriod = 2;
  options.trafficCycles = 0;
  auto result = runBench(*preset, options);
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
  ASSERT_EQ(result->traces.size(), 1u);
  const TraceResult &trace = result->traces[0];
  EXPECT_EQ(trace.phaseEdges, (std::vector<uint64_t>{1024, 3072}));
  ASSERT_TRUE(trace.adaptation.has_value());
  const AdaptationResult &adaptation = *trace.adaptation;
  ASSERT_EQ(adaptation.slices.size(), 8u);
  std::vector<uint32_t> phases;
  bool installed = false;
  for (size_t i = 0; i < adaptation.slices.size(); ++i) {
    const AdaptationSlice &slice = adaptation.slices[i];
    phases.push_back(slice.phase);
    EXPECT_EQ(slice.cycle.empty(), i % 2 != 0 || i == 0) << "slice " << i + 1;
    EXPECT_EQ(slice.morpheusNet.values.size(), options.rounds);
    EXPECT_EQ(slice.baselineNet.values.size(), options.rounds);
    EXPECT_TRUE(std::isfinite(slice.speedup));
    installed |= slice.installed;
  }
  EXPECT_EQ(phases, (std::vector<uint32_t>{0, 0, 1, 1, 1, 1, 2, 2}));
  EXPECT_TRUE(installed) << formatResult(*result);
  ASSERT_EQ(adaptation.phases.size(), 3u);
  EXPECT_EQ(adaptation.phases[1].spec, "high/2048/A");
  EXPECT_EQ(adaptation.phases[1].firstSlice, 2u);
  EXPECT_EQ(adaptation.phases[1].slices, 4u);
  nlohmann::json json = toJson(*result);
  EXPECT_EQ(json["traces"][0]["adaptation"]["slices"].size(), 8u);
  EXPECT_EQ(json["traces"][0]["phase_edges"], nlohmann::json({1024, 3072}));
  EXPECT_NE(formatResult(*result).find("adaptation: a cycle every 2 slices"), std::string::npos);
}

// The calibration measures every unit cost on this kernel and fits a model
// from them; values are never asserted beyond what cannot fail but for a
// broken measurement: a hash lookup (a helper call) costs more than an
// array lookup the verifier inlines, and every figure is finite.
TEST(Bench, CalibrationMeasuresEveryOperation) {
  CalibrationOptions options;
  options.rounds = 3;
  options.runs = 2000;
  auto calibrated = calibrate(options);
  ASSERT_THAT_EXPECTED(calibrated, llvm::Succeeded());
  EXPECT_TRUE(calibrated->model.calibrated());
  EXPECT_NE(calibrated->model.source().find("calibrated on"), std::string::npos);
  const core::OperationCosts &costs = calibrated->model.operations();
  EXPECT_GT(costs.hashLookupNs, costs.arrayLookupNs);
  // Three unit costs; compares in chains of 8, 64, 512, 4,096; searches of
  // 4, 32, 256 intervals; derived loads in tables of 4 KiB, 128 KiB, 1 MiB;
  // tries of 2, 16, 256, 4,096 prefixes.
  ASSERT_EQ(calibrated->operations.size(), 17u);
  auto sizes = [](const core::SizeCurve &curve) {
    std::vector<double> out;
    for (auto [size, ns] : curve.points) {
      EXPECT_TRUE(std::isfinite(ns) && ns >= 0) << size;
      out.push_back(size);
    }
    return out;
  };
  EXPECT_EQ(sizes(costs.compareNs), (std::vector<double>{8, 64, 512, 4096}));
  EXPECT_EQ(sizes(costs.searchLevelNs), (std::vector<double>{4, 32, 256}));
  EXPECT_EQ(sizes(costs.derivedLoadNs), (std::vector<double>{4096, 131072, 1048576}));
  EXPECT_EQ(sizes(costs.lpmLookupNs), (std::vector<double>{2, 16, 256, 4096}));
  for (const MeasuredOperation &operation : calibrated->operations) {
    EXPECT_EQ(operation.ns.values.size(), 3u) << operation.name;
    EXPECT_TRUE(std::isfinite(operation.ns.median())) << operation.name;
  }
  std::string text = formatCalibration(*calibrated);
  EXPECT_NE(text.find("LPM trie lookup, 4096 prefixes"), std::string::npos) << text;
  EXPECT_NE(text.find("compare in a chain of 512"), std::string::npos) << text;
  EXPECT_NE(text.find("binary search level, 32 intervals"), std::string::npos) << text;
  EXPECT_NE(text.find("derived-table load, 131072 bytes"), std::string::npos) << text;
  auto back = core::CostModel::fromJson(calibrated->model.toJson(), "calibration");
  ASSERT_THAT_EXPECTED(back, llvm::Succeeded());
  EXPECT_EQ(back->operations(), costs);
}

// lb's and nat's hot-flow oracles are built from the maps and the trace and
// pass the bench's check: the first 256 packets of a high-locality trace,
// mostly the hot flows taking the oracles' constant paths (encapsulation
// toward the constant real, translation to the constant binding), return
// the baseline's verdicts and bytes, or the run fails.
TEST(Bench, LbAndNatHotOraclesTreatTheTraceAsTheBaseline) {
  for (auto [function, keepsTables] : {std::pair{"lb", "oracle-hot10-flows"},
                                       std::pair{"nat", "oracle-hot10-tables"}}) {
    SCOPED_TRACE(function);
    auto preset = readPreset(function);
    ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
    BenchOptions options = tinyRun();
    options.trafficCycles = 0;
    auto result = runBench(*preset, options);
    ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
    const TraceResult &trace = result->traces.at(0);
    EXPECT_EQ(trace.checked, 256u);
    std::vector<std::string> names;
    for (const VariantResult &variant : trace.variants)
      names.push_back(variant.name);
    ASSERT_GE(names.size(), 2u);
    EXPECT_EQ(std::vector<std::string>(names.end() - 2, names.end()),
              (std::vector<std::string>{keepsTables, "oracle-hot10"}));
  }
}

// A program of the corpus, configured by its preset's map writes instead of
// a `morpheus nf` control plane: the writes reach the maps (and a global),
// what they hold is specialized, and every variant is checked alike on the
// trace's first packets, then timed.
TEST(Bench, CompositePresetIsConfiguredByItsWritesCheckedAlikeAndTimed) {
  auto preset = readPreset("composite_l4lb");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  EXPECT_EQ(preset->function, "");
  EXPECT_EQ(preset->name, "composite_l4lb");
  ASSERT_FALSE(preset->writes.empty());

  auto contents = configuredContents(*preset, 64);
  ASSERT_THAT_EXPECTED(contents, llvm::Succeeded());
  EXPECT_EQ((*contents)["vips"].size(), 3u);
  EXPECT_EQ((*contents)["backends"].size(), 4u);
  EXPECT_EQ((*contents)["server_ids"].size(), 1u);

  BenchOptions options = tinyRun();
  options.localities = {"uniform"};
  auto result = runBench(*preset, options);
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
  // The backends and QUIC server ids the writes put there are inlined; the
  // loader's switch, set by the preset's 'global' line, folded with them.
  bool backends = false, serverIds = false;
  for (const std::string &applied : result->compile.applied) {
    backends |= applied.rfind("backends ", 0) == 0;
    serverIds |= applied.rfind("server_ids ", 0) == 0;
  }
  EXPECT_TRUE(backends && serverIds) << llvm::join(result->compile.applied, "\n");
  ASSERT_EQ(result->traces.size(), 1u);
  const TraceResult &trace = result->traces[0];
  EXPECT_EQ(trace.checked, 256u);
  std::vector<std::string> names;
  for (const VariantResult &variant : trace.variants) {
    names.push_back(variant.name);
    ASSERT_EQ(variant.net.values.size(), 2u) << variant.name;
    EXPECT_TRUE(std::isfinite(variant.net.median())) << variant.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"baseline", "morpheus", "morpheus-static",
                                             "morpheus-static-unguarded",
                                             "adaptive-instrumentation",
                                             "naive-instrumentation", "morpheus-explored"}));
}

// A preset's writes go in under one guard bracket, as a control plane's
// transaction: the guard moves by as much with its writes given twice
// over. One bracket per write waited for the running programs each time:
// Katran's 196,611 ring slots had not gone in after ten minutes.
TEST(Bench, PresetWritesGoInUnderOneGuardBracket) {
  auto preset = readPreset("composite_l4lb");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  Preset twice = *preset;
  twice.writes.insert(twice.writes.end(), preset->writes.begin(), preset->writes.end());
  auto guardAfterSetup = [](const Preset &configured,
                            const std::string &variant) -> llvm::Expected<uint64_t> {
    uint64_t version = 0;
    llvm::Error err = inPresetNamespace(configured, [&](const std::string &) -> llvm::Error {
      runtime::OptimizerOptions options;
      options.shadowPackets = 0;
      auto loaded = loadConfigured(configured, options, variant);
      if (!loaded)
        return loaded.takeError();
      version = (*loaded)->guard().version();
      return llvm::Error::success();
    });
    if (err)
      return std::move(err);
    return version;
  };
  auto once = guardAfterSetup(*preset, "bracketonce");
  ASSERT_THAT_EXPECTED(once, llvm::Succeeded());
  auto doubled = guardAfterSetup(twice, "brackettwice");
  ASSERT_THAT_EXPECTED(doubled, llvm::Succeeded());
  EXPECT_EQ(*doubled, *once) << preset->writes.size() << " writes more moved the guard";
}

// A bench run killed before it removed its pins (SIGINT, SIGTERM, kill
// -9) leaves its maps pinned, held by the kernel; the next run removes
// the pin directories of runs whose process is gone, and only those.
TEST(Bench, PinDirectoriesOfKilledRunsAreRemovedByTheNextRun) {
  pid_t gone = fork();
  ASSERT_GE(gone, 0);
  if (gone == 0)
    _exit(0);
  ASSERT_EQ(waitpid(gone, nullptr, 0), gone);
  std::string stale = "/sys/fs/bpf/morpheus-bench-" + std::to_string(gone) + "-killed-static";
  std::string alive = "/sys/fs/bpf/morpheus-bench-" + std::to_string(getppid()) + "-alive-static";
  auto cleanUp = llvm::make_scope_exit([&] {
    std::error_code ignored;
    std::filesystem::remove_all(stale, ignored);
    std::filesystem::remove_all(alive, ignored);
  });
  for (const std::string &directory : {stale, alive}) {
    ASSERT_THAT_ERROR(bpf::ensureBpffs(directory), llvm::Succeeded()); // a fresh machine's too
    ASSERT_EQ(mkdir(directory.c_str(), 0700), 0) << directory << ": " << strerror(errno);
    ASSERT_THAT_ERROR(netns::runTool({"bpftool", "map", "create", directory + "/table", "type",
                                      "array", "key", "4", "value", "4", "entries", "1", "name",
                                      "killed_run"}),
                      llvm::Succeeded());
  }
  auto preset = readPreset("composite_l4lb");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(configuredContents(*preset, 1), llvm::Succeeded());
  EXPECT_FALSE(std::filesystem::exists(stale)) << "the pins of a run that is gone stayed";
  EXPECT_TRUE(std::filesystem::exists(alive + "/table")) << "the pins of a live run went";
}

// The firewall's hot-flow oracle answers the trace's hottest flows with the
// action and rule_hits slot the live tables decide, without classifying
// them: the first 256 packets of a high-locality trace (mostly those flows)
// must get the baseline's verdicts and bytes, or the run fails.
TEST(Bench, FirewallHotOracleTreatsTheTraceAsTheBaseline) {
  auto preset = readPreset("firewall");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  BenchOptions options = tinyRun();
  options.trafficCycles = 0;
  auto result = runBench(*preset, options);
  ASSERT_THAT_EXPECTED(result, llvm::Succeeded());
  const TraceResult &trace = result->traces.at(0);
  EXPECT_EQ(trace.checked, 256u);
  ASSERT_FALSE(trace.variants.empty());
  EXPECT_EQ(trace.variants.back().name, "oracle-hot10");
  // Both tries changed representation: their savings are predicted
  // together against the measured whole.
  std::string text = formatResult(*result);
  EXPECT_NE(text.find("measured saving not attributed (2 tables changed)"), std::string::npos)
      << text;
  EXPECT_NE(text.find("the 2 tables together: predicted saving "), std::string::npos) << text;
}

// The test-only switch makes the inlined key compare wrong: the router's
// specialized neighbour lookup then misses, so its verdicts differ and the
// bench must refuse to time it (with Morpheus's own pre-swap validation,
// which would refuse to install it first, turned off).
TEST(Bench, RefusesToTimeAProgramThatBehavesDifferently) {
  auto preset = readPreset("router-20routes");
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  BenchOptions options = tinyRun();
  options.shadowPackets = 0;
  options.faults.breakKeyCompare = true;
  auto result = runBench(*preset, options);
  ASSERT_FALSE(bool(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_NE(message.find("morpheus returned verdict"), std::string::npos) << message;
  EXPECT_NE(message.find("behaves differently"), std::string::npos) << message;
}

class Files : public ::testing::Test {
protected:
  void SetUp() override {
    char pattern[] = "/tmp/morpheus-bench-test-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    dir = pattern;
  }
  void TearDown() override { std::system(("rm -rf " + dir).c_str()); }
  std::string write(const std::string &name, const std::string &text) {
    std::string path = dir + "/" + name;
    std::ofstream(path) << text;
    return path;
  }
  // A pcap of Ethernet frames of the given lengths; `truncateLast` records
  // the last one as captured short.
  std::string pcapOf(const std::vector<uint32_t> &lengths, bool truncateLast = false) {
    std::string path = dir + "/trace.pcap";
    pcap_t *dead = pcap_open_dead(DLT_EN10MB, 65535);
    pcap_dumper_t *dumper = pcap_dump_open(dead, path.c_str());
    for (size_t i = 0; i < lengths.size(); ++i) {
      std::vector<u_char> frame(lengths[i], u_char(i));
      pcap_pkthdr header = {};
      header.caplen = header.len = lengths[i];
      if (truncateLast && i + 1 == lengths.size())
        header.caplen = lengths[i] - 4;
      pcap_dump(reinterpret_cast<u_char *>(dumper), &header, frame.data());
    }
    pcap_dump_close(dumper);
    pcap_close(dead);
    return path;
  }
  std::string dir;
};

TEST_F(Files, PresetErrorsNameTheFileAndLine) {
  auto missing = readPreset("no-such-function");
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("no benchmark preset"), std::string::npos);

  std::string path = write("bench.conf", "program x.bpf.c\n# fine\nfrobnicate 3\n");
  auto bad = readPreset(path);
  ASSERT_FALSE(bool(bad));
  EXPECT_NE(llvm::toString(bad.takeError()).find("bench.conf:3:"), std::string::npos);

  path = write("bench.conf", "program x.bpf.c\ninterfaces eth0\ningress eth9\n");
  auto ingress = readPreset(path);
  ASSERT_FALSE(bool(ingress));
  EXPECT_NE(llvm::toString(ingress.takeError()).find("ingress 'eth9'"), std::string::npos);

  // Outside nf/: no `morpheus nf` setup, writes well formed, a flow source.
  path = write("p.conf", "program x.bpf.c\nsetup set-port 0 eth0\n");
  auto setup = readPreset(path);
  ASSERT_FALSE(bool(setup));
  EXPECT_NE(llvm::toString(setup.takeError()).find("p.conf:2: 'setup' runs"), std::string::npos);
  path = write("p.conf", "program x.bpf.c\nupdate vips key 0a value\n");
  auto update = readPreset(path);
  ASSERT_FALSE(bool(update));
  EXPECT_NE(llvm::toString(update.takeError()).find("p.conf:2: expected 'update MAP key"),
            std::string::npos);
  path = write("p.conf", "program x.bpf.c\nglobal quic 0x1\n");
  auto odd = readPreset(path);
  ASSERT_FALSE(bool(odd));
  EXPECT_NE(llvm::toString(odd.takeError()).find("odd number of hex digits"), std::string::npos);
  path = write("p.conf", "program x.bpf.c\nupdate m key 01 value 02 03\n");
  auto noFlows = readPreset(path);
  ASSERT_FALSE(bool(noFlows));
  EXPECT_NE(llvm::toString(noFlows.takeError()).find("names its flows' source"),
            std::string::npos);
}

// A program built as its project builds it: the preset's clang flags, with
// relative include paths and files taken from the preset's folder.
TEST_F(Files, PresetCflagsAreResolvedAgainstThePresetsFolder) {
  ASSERT_FALSE(llvm::sys::fs::create_directory(dir + "/include"));
  write("shim.h", "#define SHIM 1\n");
  std::string path = write("p.conf", "program x.bpf.c\ncflags -Iinclude -I/usr/include -DX=1 "
                                     "-include shim.h\ntrace --nf firewall --config f\n");
  auto preset = readPreset(path);
  ASSERT_THAT_EXPECTED(preset, llvm::Succeeded());
  EXPECT_EQ(preset->cflags, (std::vector<std::string>{"-I" + dir + "/include", "-I/usr/include",
                                                      "-DX=1", "-include", dir + "/shim.h"}));
}

TEST_F(Files, TraceFramesArePaddedAndDeduplicated) {
  auto trace = readPcapTrace(pcapOf({60, 64, 60}), "t");
  ASSERT_THAT_EXPECTED(trace, llvm::Succeeded());
  EXPECT_EQ(trace->frameLength, 64u);
  EXPECT_EQ(trace->frames.size(), 3u); // bytes differ per packet
  EXPECT_EQ(trace->sequence, (std::vector<uint32_t>{0, 1, 2}));
  EXPECT_EQ(trace->frames[0].size(), 64u);
  EXPECT_EQ(trace->frames[0][63], 0); // padding
  EXPECT_DOUBLE_EQ(topShare(*trace, 1), 1.0 / 3);
}

TEST_F(Files, BadTracesNameThePacket) {
  auto truncated = readPcapTrace(pcapOf({64, 64, 64}, true), "t");
  ASSERT_FALSE(bool(truncated));
  EXPECT_NE(llvm::toString(truncated.takeError()).find("packet 3 was captured truncated"),
            std::string::npos);
  auto tooLong = readPcapTrace(pcapOf({64, 1500}), "t");
  ASSERT_FALSE(bool(tooLong));
  EXPECT_NE(llvm::toString(tooLong.takeError()).find("packet 2 has 1500 bytes"),
            std::string::npos);
  auto notPcap = readPcapTrace(write("x.pcap", "not a capture"), "t");
  ASSERT_FALSE(bool(notPcap));
  EXPECT_NE(llvm::toString(notPcap.takeError()).find("x.pcap"), std::string::npos);
}

} // namespace
} // namespace morpheus::bench
