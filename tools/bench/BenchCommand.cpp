// `morpheus bench`: the command line over Bench.h.
#include "Bench.h"

#include "cli/Args.h"

#include <llvm/Support/raw_ostream.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <fstream>

namespace morpheus::bench {

int benchCommand(int argc, char **argv) {
  using namespace cli;
  std::vector<OptionSpec> specs = {
      {"--locality", "L,L...",
       "generated traces: none, low, high (Pareto), uniform, zipf:S (default none,low,high; "
       "'' for none)"},
      {"--trace", "PCAP", "also replay this capture (repeatable)", true},
      {"--method", "driver|live",
       "driver: BPF_PROG_TEST_RUN through the trace driver (default); live: live frames "
       "over a veth to the program attached natively"},
      {"--phases", "SPEC",
       "also a time-phased trace (gen_trace.py --phases, e.g. "
       "'uniform/200000,high/200000/A,high/200000/B'), timed in --segments slices"},
      {"--segments", "N", "slices a phased trace is timed in (default 30)"},
      {"--flows", "F", "distinct flows per generated trace (default 1000)"},
      {"--packets", "P", "packets per generated trace; each measurement replays the whole "
                         "trace (default 1048576)"},
      {"--seed", "S", "trace seed (default 1)"},
      {"--rounds", "R", "measurement rounds, variants interleaved (default 15)"},
      {"--cpu", "N", "CPU to measure on (default: the last)"},
      {"--recompiles", "N", "forced recompilations timed for t1/t2 (default 5)"},
      {"--json", "FILE", "also write the results as JSON"},
      {"--keep-traces", "DIR", "keep the generated pcap files in DIR"},
      {"--quiet", "", "no progress output"}};
  auto args = Args::parse("bench", argc, argv, 2, specs);
  if (!args)
    return usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != 1)
    return printUsage(
        *args, "morpheus bench NF [options]",
        "Measures a network function of nf/ (or a bench*.conf preset file) under\n"
        "traces: the statically compiled program (baseline), the program Morpheus\n"
        "specializes (traffic-independent), and the function's hand-specialized\n"
        "oracles, against an empty control, through the trace driver\n"
        "(BPF_PROG_TEST_RUN, bpf_stats) or as live frames over a veth, interleaved\n"
        "round by round on one CPU.\n"
        "Prints median net and gross ns/packet, min-max and the speed-up over the\n"
        "baseline per trace, and Morpheus's compile and injection times. Every\n"
        "variant must first treat the trace's first packets exactly as the\n"
        "baseline does. NF: router, router-20routes, l2switch, firewall, nat, lb.\n"
        "Needs root. tools/bench/matrix.py runs every function and plots.\n",
        specs);

  auto preset = readPreset(args->positional()[0]);
  if (!preset)
    return fail(preset.takeError());
  BenchOptions options;
  if (auto localities = args->get("--locality")) {
    options.localities.clear();
    llvm::SmallVector<llvm::StringRef> parts;
    llvm::StringRef(*localities).split(parts, ',', -1, false);
    for (llvm::StringRef part : parts)
      options.localities.push_back(part.str());
  }
  options.traceFiles = args->all("--trace");
  options.phases = args->get("--phases").value_or("");
  std::string method = args->get("--method").value_or("driver");
  if (method != "driver" && method != "live")
    return usageError("bench: --method is 'driver' or 'live', not '" + method + "'");
  options.method = method == "live" ? Method::Live : Method::Driver;
  uint32_t cpu = UINT32_MAX;
  if (Error err = llvm::joinErrors(
          llvm::joinErrors(llvm::joinErrors(args->readUnsigned("--flows", options.flows),
                                            args->readUnsigned("--packets", options.packets)),
                           llvm::joinErrors(args->readUnsigned("--seed", options.seed),
                                            args->readUnsigned("--rounds", options.rounds))),
          llvm::joinErrors(llvm::joinErrors(args->readUnsigned("--cpu", cpu),
                                            args->readUnsigned("--segments", options.segments)),
                           args->readUnsigned("--recompiles", options.recompiles))))
    return usageError(llvm::toString(std::move(err)));
  if (cpu != UINT32_MAX)
    options.cpu = int(cpu);
  if (options.localities.empty() && options.traceFiles.empty() && options.phases.empty())
    return usageError("bench: no traces (give --locality, --phases or --trace)");
  options.keepTraces = args->get("--keep-traces").value_or("");
  if (!args->has("--quiet"))
    options.progress = [](const std::string &line) {
      std::fprintf(stderr, "%s\n", line.c_str());
    };

  auto result = runBench(*preset, options);
  if (!result)
    return fail(result.takeError());
  std::fputs(formatResult(*result).c_str(), stdout);
  if (auto path = args->get("--json")) {
    std::ofstream out(*path);
    out << toJson(*result).dump(2) << "\n";
    if (!out)
      return fail(makeError("bench: cannot write {0}", *path));
  }
  return 0;
}

} // namespace morpheus::bench
