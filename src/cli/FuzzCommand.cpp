// `morpheus fuzz`: differential testing of the specializer on one program
// (runtime/Differential), for developers changing passes and for operators
// deciding whether to trust Morpheus with a program.
#include "bench/Bench.h"
#include "cli/Commands.h"
#include "runtime/Differential.h"

#include <cstdio>
#include <memory>

namespace morpheus::cli {

namespace {

struct FuzzFlags {
  std::string program, preset;
  uint32_t seconds = 10;
  runtime::FuzzOptions options;
  CompilerFlags compiler;
};

int fuzz(FuzzFlags &flags) {
  runtime::FuzzOptions &options = flags.options;
  options.frontend = frontendOptions(flags.compiler);
  options.seconds = flags.seconds;
  if (!flags.preset.empty()) {
    auto preset = bench::readPreset(flags.preset);
    if (!preset)
      return fail(preset.takeError());
    auto configured = bench::configuredContents(*preset, 4096);
    if (!configured)
      return fail(configured.takeError());
    options.configured = std::move(*configured);
  }

  auto report = runtime::fuzzProgram(flags.program, options);
  if (!report)
    return fail(report.takeError());
  std::printf("fuzz: program '%s' (%s)%s\n", report->program.c_str(),
              bpf::programTypeName(report->type),
              flags.options.program.empty() && report->programs > 1
                  ? ", the object's first XDP or TC program (--prog NAME for another)"
                  : "");
  if (!report->reproducer.empty())
    std::printf("%s\nreproducer written to %s\n", report->reproducer.c_str(),
                options.reproducerPath.c_str());
  std::printf("fuzz: %llu map states in %.1f s (%.0f cases/s), after %.1f s setting up "
              "(compiling, loading and verifying the copies)\n",
              (unsigned long long)report->states, report->seconds,
              report->cases / std::max(report->seconds, 1e-3), report->setUpSeconds);
  std::printf("fuzz: %llu cases nondeterministic (the original answered differently twice, "
              "or a difference did not reproduce); left uncompared in them: %llu verdicts, "
              "%llu 8-byte words, %llu key sets\n",
              (unsigned long long)report->nondeterministic,
              (unsigned long long)report->maskedVerdicts,
              (unsigned long long)report->maskedBytes,
              (unsigned long long)report->maskedKeySets);
  if (!options.configured.empty())
    std::printf("fuzz: %llu of the map states drawn from the configuration of %s\n",
                (unsigned long long)report->configuredStates,
                flags.preset.c_str());
  std::printf("fuzz: %llu cases compared, %llu differed\n",
              (unsigned long long)report->cases, (unsigned long long)report->differed);
  return report->differed ? 1 : 0;
}

} // namespace

void addFuzzCommand(CLI::App &morpheus) {
  auto flags = std::make_shared<FuzzFlags>();
  flags->options.reproducerPath = "morpheus-fuzz-repro.json";
  CLI::App &command = commandline::addCommand(
      morpheus, "fuzz",
      "compare the specialized program with the original on random map states and "
      "packets",
      "Loads PROG three times (original, a second original that must agree\n"
      "with it, and the version Morpheus specializes), writes the same random\n"
      "map states into all three and compares verdicts, output packets,\n"
      "contexts and every map after each random packet, also after a guard\n"
      "bump. The copies draw the same random numbers, read the same clocks\n"
      "and iterate hash maps in the same order. The first difference is\n"
      "shrunk, written as JSON and printed. Needs root. Exit status 1 when\n"
      "any case differed.",
      [flags](const CLI::App &) { return fuzz(*flags); });
  addProgramArgument(command, flags->program);
  command.add_option("--seconds", flags->seconds, "how long to fuzz (default 10)")
      ->type_name("N");
  command
      .add_option("--seed", flags->options.seed,
                  "random seed; the same seed replays the same cases (default 1)")
      ->type_name("S");
  command
      .add_option("--reproducer", flags->options.reproducerPath,
                  "where to write the first difference, mode 0600: it holds map contents "
                  "(default ./morpheus-fuzz-repro.json; a link there is replaced, not "
                  "followed)")
      ->type_name("FILE");
  command
      .add_option("--prog", flags->options.program,
                  "program to fuzz when the object has several (default: the first XDP or TC "
                  "program)")
      ->type_name("NAME");
  addInlineLimit(command, flags->options.inlineLimit);
  command
      .add_option("--preset", flags->preset,
                  "also draw half of the map states from the function's configuration, as "
                  "`morpheus bench NF` sets it up (router, lb, ... or a bench*.conf)")
      ->type_name("NF");
  addCompilerOptions(command, flags->compiler);
}

} // namespace morpheus::cli
