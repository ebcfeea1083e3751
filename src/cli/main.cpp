// morpheus: a run-time optimizer for XDP programs.
#include "bench/Bench.h"
#include "cli/Commands.h"
#include "nf/common/Registry.h"
#include "support/Log.h"

#include <cstdio>

int main(int argc, char **argv) {
  using namespace morpheus;
  auto app = commandline::makeApp(
      "morpheus",
      "Morpheus specializes a running XDP program to the contents of its maps,\n"
      "protected by a guard, and swaps the new code in atomically.",
      "PROG is BPF C (compiled with clang-19 -O2 -g -target bpf), LLVM IR (.ll)\n"
      "or bitcode (.bc). 'morpheus COMMAND --help' describes each command.");
  app->add_flag_function(
      "-v,--verbose",
      [](int64_t) { configureProcessLog(LogLevel::Debug, LogFormat::Text, "morpheus"); },
      "also print debugging messages (libbpf's information)");
  app->add_flag_function(
      "--quiet",
      [](int64_t) { configureProcessLog(LogLevel::Warning, LogFormat::Text, "morpheus"); },
      "print only errors and warnings (and each command's output)");
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
