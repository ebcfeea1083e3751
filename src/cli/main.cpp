// morpheus: a run-time optimizer for XDP programs.
#include "bench/Bench.h"
#include "cli/Commands.h"
#include "nf/common/Registry.h"

#include <cstdio>

int main(int argc, char **argv) {
  using namespace morpheus;
  auto app = commandline::makeApp(
      "morpheus",
      "Morpheus specializes a running XDP program to the contents of its maps,\n"
      "protected by a guard, and swaps the new code in atomically.",
      "PROG is BPF C (compiled with clang-19 -O2 -g -target bpf), LLVM IR (.ll)\n"
      "or bitcode (.bc). 'morpheus COMMAND --help' describes each command.");
  cli::addCommands(*app);
  bench::addBenchCommand(*app);
  nf::addNfCommand(*app);
  // `morpheus help`, as `morpheus --help`.
  commandline::addCommand(*app, "help", "print this help", "", [&app](const CLI::App &) {
    std::fputs(commandline::helpText(*app).c_str(), stdout);
    return 0;
  }).group("");
  return commandline::run(*app, argc, argv);
}
