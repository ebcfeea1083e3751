// `morpheus bench`: a network function under a trace, measured as the
// statically compiled program (baseline), as Morpheus specializes it, and
// as hand-specialized oracles where the function has them, against an
// empty control, all driven by the trace driver (trace_driver.bpf.c) in one
// process, interleaved round by round on one CPU, timed by the kernel's
// bpf_stats. See docs/benchmarks.md for what the numbers mean.
#pragma once

#include "Preset.h"
#include "Trace.h"
#include "runtime/Differential.h"
#include "runtime/Optimizer.h"

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
} // namespace CLI

namespace morpheus::bench {

// How packets reach the program under test (see docs/benchmarks.md).
enum class Method {
  Driver, // BPF_PROG_TEST_RUN of the trace driver, which tail-calls it
  Live,   // live frames over a veth to it, attached on the ingress (XDP
          // natively, TC on tcx behind an XDP program passing every frame)
};

struct BenchOptions {
  Method method = Method::Driver;
  // The type of programs whose section libbpf cannot place (--prog-type).
  std::optional<bpf::ProgramType> programType;
  std::vector<std::string> localities = {"none", "low", "high"}; // generated traces
  std::vector<std::string> traceFiles; // pcap files replayed as well
  // A time-phased trace (gen_trace.py --phases, e.g.
  // "uniform/300000,high/300000/A,high/300000/B"), timed in `segments`
  // consecutive slices; "" = none.
  std::string phases;
  uint32_t segments = 30;
  // The adaptation experiment on the phased trace: a `morpheus` loop of its
  // own, freshly instrumented, runs a cycle every this many slices while
  // the trace plays in order, each slice timed against the baseline; 0 =
  // not run. Needs `phases`.
  uint32_t adaptPeriod = 0;
  // Two CPUs: the phased trace's phase k is played on CPU k (mod the CPUs),
  // in every pass of every variant (timed, warm-up, the loops' passes), so
  // each CPU sees a hot set of its own ("high/N/A,high/N/B"); adds the
  // variant `morpheus-global-chain` (the loop with per-CPU chains off).
  // Needs `phases`.
  bool twoCpus = false;
  uint32_t flows = 1000;
  uint32_t packets = 1u << 20; // per generated trace and per measurement
  uint32_t seed = 1;
  uint32_t rounds = 15;
  int cpu = -1; // measuring CPU; -1 = the last one
  uint32_t recompiles = 5; // forced recompilations timed for t1/t2
  uint32_t checkPackets = 256; // packets every variant must treat alike
  uint32_t shadowPackets = 64;  // Morpheus's own pre-swap validation; 0 = off
  uint32_t inlineLimit = 64;    // the optimizer's inline limit (its default)
  // Table passes the optimizer leaves out (Passes.def names): one
  // representation measured against another on the same program.
  std::vector<std::string> noPasses;
  // Following the traffic: the variants `morpheus` (the loop: instrumented
  // program, then this many cycles each after a pass of the trace, then
  // timing), `adaptive-instrumentation` (the same loop without fast paths:
  // what sampling costs) and `naive-instrumentation` (every lookup
  // recorded), each on an optimizer and maps of its own; 0 = none of them.
  uint32_t trafficCycles = 4;
  // The sampling-rate sweep (the papers' instrumentation cost by rate): a
  // variant `sampling-every-P` per period P (packets per sample, a power of
  // two), the adaptive-instrumentation loop with its period held at P.
  // Needs trafficCycles.
  std::vector<uint32_t> samplingPeriods;
  // The variant `morpheus-explored`: the versions `run --explore` would
  // try (core/ExplorationCandidates: the model's and those without one
  // close pass, at most this many) and the baseline, each timed on the
  // trace by the driver in interleaved rounds, the fastest median no
  // slower than the baseline kept; 0 = none.
  uint32_t exploreTrials = 3;
  // Its interleaved rounds (each version and the baseline timed once a
  // round on the whole trace; the median kept): more rounds tell closer
  // versions apart on a noisy machine.
  uint32_t exploreRounds = 3;
  core::FaultInjection faults;  // test-only: passed to the optimizer
  // Prices the table representations Morpheus chooses between (the
  // command loads this machine's calibration; default costs otherwise).
  core::CostModel costModel;
  std::string keepTraces; // directory for the generated pcaps; "" = discard
  std::function<void(const std::string &)> progress;
};

struct Series {
  std::vector<double> values;
  double median() const;
  double min() const;
  double max() const;
};

struct VariantResult {
  std::string name;
  Series net, gross; // ns/packet per round
  Series speedup;    // baseline net / this net, per round
  std::vector<double> segmentNet; // phased traces: median net ns per slice
  bool skipsLookups = false;      // an oracle skipping lookups the function must make
};

// One slice of the adaptation experiment.
struct AdaptationSlice {
  uint32_t phase = 0;          // index of the phase its first packet is in
  Series baselineNet, morpheusNet; // ns/packet per round
  double speedup = 0;          // baseline net / morpheus net, medians
  // The cycle run right before this slice ("" = none), as it describes
  // itself, and whether it installed a new version.
  std::string cycle;
  bool installed = false;
};

// How the loop fared in one phase of the adaptation experiment.
struct PhaseAdaptation {
  std::string spec;            // MODEL[/PACKETS[/SET]]
  uint32_t firstSlice = 0, slices = 0;
  double steadySpeedup = 0;    // median over the phase's second half
  // Slices from the phase's first to the first reaching 90 % of the steady
  // gain (steadySpeedup - 1); none when the phase has no gain to reach
  // (under 2 %) or never reaches it.
  std::optional<uint32_t> slicesTo90;
};

struct AdaptationResult {
  uint32_t periodSlices = 0;
  std::vector<AdaptationSlice> slices;
  std::vector<PhaseAdaptation> phases;
};

struct TraceResult {
  std::string name;
  uint64_t packets = 0;
  size_t flows = 0;       // distinct frames
  double top10Share = 0;  // packets to the 10 most frequent frames
  uint32_t segments = 1;  // slices timed separately (phased traces)
  std::string phases;     // the phase spec of a phased trace
  std::vector<uint64_t> phaseEdges; // packets where its phases change
  // The empty control as timed with the variants (driver: driver + empty;
  // live: the empty program attached): subtracted for net.
  Series controlNs;
  // An empty program's own cost (XDP driver: run alone; live and TC:
  // = controlNs): added back to net for gross.
  Series emptyAloneNs;
  Series mpps; // live: frames per second offered, by the kernel's clock
  // Driver runs that found the frame longer or shorter than the trace's
  // (the program encapsulated the previous packet) and restored it.
  uint64_t resizedFrames = 0;
  std::vector<VariantResult> variants; // baseline first
  uint64_t checked = 0;   // packets compared across variants before timing
  // The `morpheus` variant's loop on this trace: per cycle, what it did and
  // what the traffic decided per site.
  std::vector<std::string> followed;
  // The `morpheus-explored` variant's trials on this trace and its choice.
  std::vector<std::string> explored;
  std::optional<AdaptationResult> adaptation; // BenchOptions::adaptPeriod
};

// The cost model's choice for one table site of the first specialization.
struct TablePrediction {
  std::string table;
  unsigned site = 0;
  core::RepresentationChoice choice;
};

struct CompileResult {
  // Loading the program (Optimizer::startupPhases), before any map write.
  double startupMs = 0;
  std::vector<core::BuildPhase> startupPhases;
  core::CycleTimes first; // the first specialization (with its validation and injection by phase)
  Series analysisMs, codegenMs; // forced recompilations (t1, t2)
  // t2 of the forced recompilations by phase (core::BuildPhase), in the
  // order the phases ran.
  std::vector<std::pair<std::string, Series>> codegenPhaseMs;
  size_t originalInstructions = 0, specializedInstructions = 0; // xlated
  std::vector<std::string> applied; // "table site#N pass: detail"
  std::vector<TablePrediction> predictions;
};

struct BenchResult {
  std::string method; // "driver" or "live"
  std::string preset;
  std::string program;
  bpf::ProgramType programType = bpf::ProgramType::Xdp; // of the entry benched
  std::string costModel; // where its costs come from
  CompileResult compile;
  std::vector<TraceResult> traces;
};

// The type of the program `preset` benches (its entry, or the first XDP or
// TC program), from compiling its source (the build cache serves the load
// that follows). Refuses, before anything is loaded, traced or timed, a
// program that is neither XDP nor TC.
Expected<bpf::ProgramType> benchedProgramType(const Preset &preset, const BenchOptions &options);

// Refuses what benchedProgramType refuses before anything else.
Expected<BenchResult> runBench(const Preset &preset, const BenchOptions &options);

nlohmann::json toJson(const BenchResult &result);
// The human-readable tables `morpheus bench` prints.
std::string formatResult(const BenchResult &result);

// The variants every measurement has, by name: what the others are
// compared with, and the empty control subtracted from all of them.
inline constexpr char BaselineName[] = "baseline", StaticName[] = "morpheus-static",
                      UnguardedName[] = "morpheus-static-unguarded", ControlName[] = "empty",
                      ExploredName[] = "morpheus-explored";

// The name of the trace generated from BenchOptions::phases.
inline constexpr char PhasedTrace[] = "phased";

// The packet positions where a phased trace's phases change, cut as
// tools/traces/gen_trace.py cuts them: a phase's PACKETS where given, the
// rest shared equally by the phases without.
Expected<std::vector<uint64_t>> phaseEdges(const std::string &spec, uint64_t packets);

// Pins the calling thread to `cpu` (best effort: unpinned still measures).
void pinToCpu(int cpu);

// Adds `morpheus bench` to the morpheus command line.
void addBenchCommand(CLI::App &morpheus);

} // namespace morpheus::bench
