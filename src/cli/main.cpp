// morpheus: a run-time optimizer for XDP programs.
#include "cli/Commands.h"
#include "bench/Bench.h"
#include "nf/common/Registry.h"

#include <cstdio>
#include <cstring>


static const char Usage[] =
    "usage: morpheus <command> [options]\n"
    "\n"
    "Morpheus specializes a running XDP program to the contents of its maps,\n"
    "protected by a guard, and swaps the new code in atomically.\n"
    "\n"
    "commands:\n"
    "  analyze PROG        list maps (read-only or written by the program) and\n"
    "                      map access sites; no kernel needed\n"
    "  specialize PROG     specialize once against a JSON map snapshot and\n"
    "                      write the BPF object; no kernel needed\n"
    "  run PROG            load, attach and keep specializing a program\n"
    "  map update|delete|dump\n"
    "                      change a managed map so the next packet sees it\n"
    "  fuzz PROG           compare the specialized program with the original on\n"
    "                      random map states and packets\n"
    "  bench NF            measure a network function under traces: baseline,\n"
    "                      Morpheus and hand-specialized oracles\n"
    "  nf NAME COMMAND     configure a network function from nf/ (routes,\n"
    "                      rules, VIPs, ...) through its pinned maps\n"
    "\n"
    "PROG is BPF C (compiled with clang-19 -O2 -g -target bpf), LLVM IR (.ll)\n"
    "or bitcode (.bc). 'morpheus <command> --help' describes each command.\n";

int main(int argc, char **argv) {
  using namespace morpheus::cli;
  if (argc < 2 || !std::strcmp(argv[1], "--help") || !std::strcmp(argv[1], "-h") ||
      !std::strcmp(argv[1], "help")) {
    std::fputs(Usage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  std::string command = argv[1];
  if (command == "analyze")
    return analyzeCommand(argc, argv);
  if (command == "specialize")
    return specializeCommand(argc, argv);
  if (command == "run")
    return runCommand(argc, argv);
  if (command == "map")
    return mapCommand(argc, argv);
  if (command == "fuzz")
    return fuzzCommand(argc, argv);
  if (command == "bench")
    return morpheus::bench::benchCommand(argc, argv);
  if (command == "nf")
    return morpheus::nf::nfCommand(argc, argv);
  return usageError("unknown command '" + command + "' (see 'morpheus --help')");
}
