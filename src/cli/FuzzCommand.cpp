// `morpheus fuzz`: differential testing of the specializer on one program
// (runtime/Differential), for developers changing passes and for operators
// deciding whether to trust Morpheus with a program.
#include "bench/Bench.h"
#include "cli/Commands.h"
#include "runtime/Differential.h"

#include <cstdio>

namespace morpheus::cli {

int fuzzCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--seconds", "N", "how long to fuzz (default 10)"},
      {"--seed", "S", "random seed; the same seed replays the same cases (default 1)"},
      {"--reproducer", "FILE",
       "where to write the first difference (default ./morpheus-fuzz-repro.json)"},
      {"--program", "NAME", "the entry program (default: the first)"},
      {"--inline-limit", "N", "inline tables with at most N entries (default 64)"},
      {"--preset", "NF",
       "also draw half of the map states from the function's configuration, as "
       "`morpheus bench NF` sets it up (router, lb, ... or a bench*.conf)"}};
  for (const OptionSpec &spec : compilerOptions())
    specs.push_back(spec);
  auto args = Args::parse("fuzz", argc, argv, 2, specs);
  if (!args)
    return usageError(llvm::toString(args.takeError()));
  if (args->help() || args->positional().size() != 1)
    return printUsage(
        *args, "morpheus fuzz PROG [--seconds N] [--seed S] [--reproducer FILE] [options]",
        "Loads PROG three times (original, a second original that reveals\n"
        "nondeterministic bytes, and the version Morpheus specializes), writes\n"
        "the same random map states into all three and compares verdicts,\n"
        "output packets and every map after each random packet, also after a\n"
        "guard bump. The first difference is shrunk, written as JSON and\n"
        "printed. Needs root. Exit status 1 when any case differed.\n",
        specs);
  runtime::FuzzOptions options;
  options.frontend = frontendOptions(*args);
  options.reproducerPath = args->get("--reproducer").value_or("morpheus-fuzz-repro.json");
  options.program = args->get("--program").value_or("");
  uint32_t seconds = 10;
  if (Error err = llvm::joinErrors(
          llvm::joinErrors(args->readUnsigned("--seconds", seconds),
                           args->readUnsigned("--seed", options.seed)),
          args->readUnsigned("--inline-limit", options.inlineLimit)))
    return usageError(llvm::toString(std::move(err)));
  options.seconds = seconds;
  if (auto name = args->get("--preset")) {
    auto preset = bench::readPreset(*name);
    if (!preset)
      return fail(preset.takeError());
    auto configured = bench::configuredContents(*preset, 4096);
    if (!configured)
      return fail(configured.takeError());
    options.configured = std::move(*configured);
  }

  auto report = runtime::fuzzProgram(args->positional()[0], options);
  if (!report)
    return fail(report.takeError());
  if (!report->reproducer.empty())
    std::printf("%s\nreproducer written to %s\n", report->reproducer.c_str(),
                options.reproducerPath.c_str());
  std::printf("fuzz: %llu map states in %.1f s (%.0f cases/s); masked as "
              "nondeterministic: %llu bytes, %llu verdicts, %llu key sets\n",
              (unsigned long long)report->states, report->seconds,
              report->cases / std::max(report->seconds, 1e-3),
              (unsigned long long)report->maskedBytes,
              (unsigned long long)report->maskedVerdicts,
              (unsigned long long)report->maskedKeySets);
  if (!options.configured.empty())
    std::printf("fuzz: %llu of the map states drawn from the configuration of %s\n",
                (unsigned long long)report->configuredStates,
                args->get("--preset")->c_str());
  std::printf("fuzz: %llu cases compared, %llu differed\n",
              (unsigned long long)report->cases, (unsigned long long)report->differed);
  return report->differed ? 1 : 0;
}

} // namespace morpheus::cli
