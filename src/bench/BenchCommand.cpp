// `morpheus bench`: the command line over Bench.h.
#include "Bench.h"
#include "Calibration.h"

#include "core/Pipeline.h"
#include "runtime/CostCalibration.h"

#include "support/CommandLine.h"
#include "support/Files.h"
#include "support/Log.h"

#include <llvm/ADT/StringRef.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <memory>
#include <optional>

namespace morpheus::bench {

namespace {

struct BenchFlags {
  std::string preset;
  std::optional<std::string> localities; // "none,low,high"; "" = no generated traces
  std::optional<uint32_t> cpu;
  std::string json;
  std::string costModel; // the calibration file; "" = this machine's cache
  bool quiet = false;
  BenchOptions options;
};

// `morpheus bench calibrate`, and the first bench on a machine: measures
// the cost model's unit costs and caches them at `path`.
Expected<core::CostModel> calibrateInto(const std::string &path, const BenchFlags &flags) {
  CalibrationOptions options;
  options.rounds = flags.options.rounds;
  options.cpu = flags.cpu ? int(*flags.cpu) : -1;
  if (!flags.quiet)
    options.progress = [](const std::string &line) { processLog().info(line); };
  auto calibrated = calibrate(options);
  if (!calibrated)
    return calibrated.takeError();
  std::fputs(formatCalibration(*calibrated).c_str(), stdout);
  if (Error err = runtime::writeCalibration(path, calibrated->model))
    return err;
  std::printf("  cached in %s\n", path.c_str());
  return calibrated->model;
}

int bench(const CLI::App &command, BenchFlags &flags) {
  BenchOptions &options = flags.options;
  std::string calibration =
      flags.costModel.empty() ? runtime::calibrationPath() : flags.costModel;
  if (flags.preset == "calibrate") {
    auto model = calibrateInto(calibration, flags);
    return model ? 0 : commandline::fail(model.takeError());
  }
  if (flags.localities) {
    options.localities.clear();
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(*flags.localities).split(parts, ',', -1, false);
    for (llvm::StringRef part : parts)
      options.localities.push_back(part.str());
  }
  if (flags.cpu)
    options.cpu = int(*flags.cpu);
  if (options.twoCpus && options.phases.empty())
    return commandline::usageError(command, "--two-cpus plays the phased trace: give --phases");
  if (options.localities.empty() && options.traceFiles.empty() && options.phases.empty())
    return commandline::usageError(command, "no traces (give --locality, --phases or --trace)");
  if (!flags.quiet)
    options.progress = [](const std::string &line) { processLog().info(line); };
  auto preset = readPreset(flags.preset);
  if (!preset)
    return commandline::fail(preset.takeError());
  // This machine's calibration, measured first when there is none.
  auto cached = runtime::readCalibration(calibration);
  if (!cached)
    return commandline::fail(cached.takeError());
  if (*cached) {
    options.costModel = std::move(**cached);
  } else {
    // What bench cannot run is refused before the calibration's minute.
    if (auto type = benchedProgramType(*preset, options); !type)
      return commandline::fail(type.takeError());
    auto model = calibrateInto(calibration, flags);
    if (!model)
      return commandline::fail(model.takeError());
    options.costModel = std::move(*model);
  }

  auto result = runBench(*preset, options);
  if (!result)
    return commandline::fail(result.takeError());
  std::fputs(formatResult(*result).c_str(), stdout);
  if (!flags.json.empty())
    if (Error err = writeFile(flags.json, toJson(*result).dump(2) + "\n"))
      return commandline::fail(std::move(err));
  return 0;
}

} // namespace

void addBenchCommand(CLI::App &morpheus) {
  auto flags = std::make_shared<BenchFlags>();
  CLI::App &command = commandline::addCommand(
      morpheus, "bench",
      "measure a network function under traces: baseline, Morpheus and hand-specialized "
      "oracles",
      "Measures a network function of nf/ (or a bench*.conf preset file) under\n"
      "traces: the statically compiled program (baseline), the program Morpheus\n"
      "specializes (traffic-independent), and the function's hand-specialized\n"
      "oracles, against an empty control, through the trace driver\n"
      "(BPF_PROG_TEST_RUN, bpf_stats) or as live frames over a veth, interleaved\n"
      "round by round on one CPU. A TC program is run without the driver: one\n"
      "BPF_PROG_TEST_RUN per packet, each on a fresh skb of the trace's frame\n"
      "(repeated runs of one skb would hand it its own output), timed together\n"
      "by its bpf_stats; live, it is on the veth's tcx ingress, behind an XDP\n"
      "program that passes every frame on.\n"
      "Prints median net and gross ns/packet, min-max and the speed-up over the\n"
      "baseline per trace, Morpheus's compile and injection times, and per table\n"
      "the cost model's predicted ns against the measured saving. Every\n"
      "variant must first treat the trace's first packets exactly as the\n"
      "baseline does. NF: router, router-20routes, l2switch, firewall, nat, lb,\n"
      "or a corpus program configured by map writes: composite_l4lb,\n"
      "composite_filter, composite_zones (tests/programs/bench/).\n"
      "`morpheus bench calibrate` measures the cost model's unit costs on this\n"
      "machine and caches them (run and bench load them); bench calibrates first\n"
      "when nothing is cached.\n"
      "Needs root. tools/bench/matrix.py runs every function and plots.",
      [flags](const CLI::App &self) { return bench(self, *flags); });
  BenchOptions &options = flags->options;
  command
      .add_option("NF", flags->preset,
                  "a network function of nf/, a program of tests/programs/bench/, a preset "
                  "file, or 'calibrate'")
      ->required()
      ->type_name("");
  command
      .add_option("--locality", flags->localities,
                  "generated traces: none, low, high (Pareto), uniform, zipf:S (default "
                  "none,low,high; '' for none)")
      ->type_name("L,L...");
  command.add_option("--trace", options.traceFiles, "also replay this capture (repeatable)")
      ->type_name("PCAP");
  command
      .add_option("--method", options.method,
                  "driver: BPF_PROG_TEST_RUN through the trace driver (default); live: live "
                  "frames over a veth to the program attached on it (XDP natively, TC on tcx "
                  "ingress)")
      ->transform(commandline::oneOf(
          std::map<std::string, Method>{{"driver", Method::Driver}, {"live", Method::Live}}))
      ->type_name("driver|live");
  command
      .add_option("--phases", options.phases,
                  "also a time-phased trace (gen_trace.py --phases, e.g. "
                  "'uniform/200000,high/200000/A,high/200000/B'), timed in --segments slices")
      ->type_name("SPEC");
  command
      .add_option("--segments", options.segments,
                  "slices a phased trace is timed in (default 30)")
      ->type_name("N");
  command.add_flag("--two-cpus", options.twoCpus,
                   "with --phases, play phase K of the phased trace on CPU K (e.g. "
                   "'high/131072/A,high/131072/B': a hot set per CPU) and add the variant "
                   "morpheus-global-chain (per-CPU fast paths off)");
  command
      .add_option("--adapt-period", options.adaptPeriod,
                  "with --phases, also the adaptation experiment: a fresh 'morpheus' loop runs "
                  "a cycle every N slices while the phased trace plays in order, each slice "
                  "timed against the baseline (default 0: not run)")
      ->type_name("N");
  command
      .add_option("--inline-limit", options.inlineLimit,
                  "inline tables with at most N entries (default 64): smaller, and tries "
                  "over it get a derived table instead of a search")
      ->type_name("N");
  command
      .add_option("--no-pass", options.noPasses,
                  "leave out this table pass (by its name in docs/passes.md; repeatable), to "
                  "measure one representation against another: e.g. lpm-as-hash")
      ->type_name("PASS")
      ->check(CLI::IsMember(core::tablePassNames()));
  command
      .add_option("--flows", options.flows, "distinct flows per generated trace (default 1000)")
      ->type_name("F");
  command
      .add_option("--packets", options.packets,
                  "packets per generated trace; each measurement replays the whole trace "
                  "(default 1048576)")
      ->type_name("P");
  command.add_option("--seed", options.seed, "trace seed (default 1)")->type_name("S");
  command
      .add_option("--rounds", options.rounds,
                  "measurement rounds, variants interleaved (default 15)")
      ->type_name("R");
  command.add_option("--cpu", flags->cpu, "CPU to measure on (default: the last)")
      ->type_name("N");
  command
      .add_option("--recompiles", options.recompiles,
                  "forced recompilations timed for t1/t2 (default 5)")
      ->type_name("N");
  command
      .add_option("--traffic-cycles", options.trafficCycles,
                  "optimizer cycles the 'morpheus' variant runs on each trace before it is "
                  "timed, each after a pass of the trace; 0 leaves out the variants that follow "
                  "the traffic (default 4)")
      ->type_name("N");
  command
      .add_option("--explore-trials", options.exploreTrials,
                  "versions the 'morpheus-explored' variant tries on each trace, as 'run "
                  "--explore' would (the model's and those without one pass where the model "
                  "was close), timed against the baseline, the fastest kept; 0 leaves it out "
                  "(default 3)")
      ->type_name("N");
  command
      .add_option("--explore-rounds", options.exploreRounds,
                  "interleaved rounds of the 'morpheus-explored' variant's trials, the "
                  "median kept (default 3)")
      ->type_name("N");
  command
      .add_option("--sampling-periods", options.samplingPeriods,
                  "the sampling-rate sweep: a variant 'sampling-every-P' per period P "
                  "(packets per sample, powers of two, e.g. 1,4,16,64,256), the "
                  "adaptive-instrumentation loop with its period held at P")
      ->delimiter(',')
      ->type_name("LIST");
  command.add_option("--json", flags->json, "also write the results as JSON")
      ->type_name("FILE");
  command
      .add_option("--keep-traces", options.keepTraces, "keep the generated pcap files in DIR")
      ->type_name("DIR");
  command
      .add_option("--cost-model", flags->costModel,
                  "the calibration file to use, or to write with 'calibrate' (default: this "
                  "machine's, in the cache directory)")
      ->type_name("FILE");
  command
      .add_option_function<bpf::ProgramType>(
          "--prog-type", [flags](const bpf::ProgramType &type) { flags->options.programType = type; },
          "type of the program's programs whose section libbpf cannot place (SEC(\"xdp_prog\"), "
          "from before libbpf 1.0), as run's --prog-type")
      ->transform(commandline::oneOf(bpf::namedProgramTypes()))
      ->type_name("xdp|tc");
  command.add_flag("--quiet", flags->quiet, "no progress output");
}

} // namespace morpheus::bench
