#include "cli/AgentConfig.h"

#include "cli/RunOptions.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Support/YAMLTraits.h>

#include <set>
#include <tuple>

namespace morpheus::cli {

namespace {

// One entry of `programs:` as written; RunOptions once checked.
struct ProgramEntry {
  std::string name, source, entry, netns, adopt, period, pinDir, pinRoot, costModel;
  std::string reproducerDir, compileDb;
  std::vector<std::string> ifaces, noProfile, keepGeneric, includes, defines, cflags;
  std::optional<std::vector<std::string>> passes;
  std::optional<bpf::XdpMode> xdpMode;
  std::optional<bpf::TcDirection> tcAttach;
  std::optional<core::ProfileMode> profile;
  std::optional<OtherWriters> otherWriters;
  std::optional<bpf::ProgramType> progType;
  std::optional<uint32_t> inlineLimit, shadowPackets;
  // run's --explore and its options (explore_slice, explore_budget,
  // explore_every: durations).
  bool explore = false;
  std::optional<uint32_t> exploreTrials, exploreRounds;
  std::optional<uint64_t> exploreMinRuns;
  std::optional<double> exploreMargin, exploreShortfall;
  std::string exploreSlice, exploreBudget, exploreEvery;
  std::map<std::string, uint32_t> maxEntries; // run's --max-entries MAP=N
  bool acceptOneTailCallFewer = false, quiet = false;
};

struct ConfigFile {
  std::optional<std::string> socket;
  std::string metricsAddress;
  double cpuBudget = 0;
  std::vector<ProgramEntry> programs;
};

} // namespace
} // namespace morpheus::cli

LLVM_YAML_IS_SEQUENCE_VECTOR(morpheus::cli::ProgramEntry)

namespace llvm::yaml {

template <> struct ScalarEnumerationTraits<morpheus::bpf::XdpMode> {
  static void enumeration(IO &io, morpheus::bpf::XdpMode &mode) {
    io.enumCase(mode, "native", morpheus::bpf::XdpMode::Native);
    io.enumCase(mode, "generic", morpheus::bpf::XdpMode::Generic);
  }
};

template <> struct ScalarEnumerationTraits<morpheus::bpf::TcDirection> {
  static void enumeration(IO &io, morpheus::bpf::TcDirection &direction) {
    io.enumCase(direction, "ingress", morpheus::bpf::TcDirection::Ingress);
    io.enumCase(direction, "egress", morpheus::bpf::TcDirection::Egress);
  }
};

template <> struct ScalarEnumerationTraits<morpheus::core::ProfileMode> {
  static void enumeration(IO &io, morpheus::core::ProfileMode &mode) {
    io.enumCase(mode, "off", morpheus::core::ProfileMode::Off);
    io.enumCase(mode, "adaptive", morpheus::core::ProfileMode::Adaptive);
    io.enumCase(mode, "naive", morpheus::core::ProfileMode::Naive);
  }
};

template <> struct ScalarEnumerationTraits<morpheus::cli::OtherWriters> {
  static void enumeration(IO &io, morpheus::cli::OtherWriters &policy) {
    io.enumCase(policy, "poll", morpheus::cli::OtherWriters::Poll);
    io.enumCase(policy, "keep-generic", morpheus::cli::OtherWriters::KeepGeneric);
  }
};

template <> struct ScalarEnumerationTraits<morpheus::bpf::ProgramType> {
  static void enumeration(IO &io, morpheus::bpf::ProgramType &type) {
    io.enumCase(type, "xdp", morpheus::bpf::ProgramType::Xdp);
    io.enumCase(type, "tc", morpheus::bpf::ProgramType::Tc);
  }
};

// max_entries: {MAP: N, ...}
template <> struct CustomMappingTraits<std::map<std::string, uint32_t>> {
  static void inputOne(IO &io, StringRef map, std::map<std::string, uint32_t> &sizes) {
    io.mapRequired(map.str().c_str(), sizes[map.str()]);
  }
  static void output(IO &io, std::map<std::string, uint32_t> &sizes) {
    for (auto &[map, size] : sizes)
      io.mapRequired(map.c_str(), size);
  }
};

template <> struct MappingTraits<morpheus::cli::ProgramEntry> {
  static void mapping(IO &io, morpheus::cli::ProgramEntry &entry) {
    io.mapRequired("name", entry.name);
    io.mapRequired("source", entry.source);
    io.mapOptional("entry", entry.entry);
    io.mapOptional("ifaces", entry.ifaces);
    io.mapOptional("adopt", entry.adopt);
    io.mapOptional("accept_one_tail_call_fewer", entry.acceptOneTailCallFewer);
    io.mapOptional("other_writers", entry.otherWriters);
    io.mapOptional("keep_generic", entry.keepGeneric);
    io.mapOptional("netns", entry.netns);
    io.mapOptional("xdp_mode", entry.xdpMode);
    io.mapOptional("tc_attach", entry.tcAttach);
    io.mapOptional("period", entry.period);
    io.mapOptional("pin_dir", entry.pinDir);
    io.mapOptional("pin_root", entry.pinRoot);
    io.mapOptional("inline_limit", entry.inlineLimit);
    io.mapOptional("passes", entry.passes);
    io.mapOptional("cost_model", entry.costModel);
    io.mapOptional("shadow_packets", entry.shadowPackets);
    io.mapOptional("profile", entry.profile);
    io.mapOptional("no_profile", entry.noProfile);
    io.mapOptional("reproducer_dir", entry.reproducerDir);
    io.mapOptional("quiet", entry.quiet);
    io.mapOptional("includes", entry.includes);
    io.mapOptional("defines", entry.defines);
    io.mapOptional("cflags", entry.cflags);
    io.mapOptional("compile_db", entry.compileDb);
    io.mapOptional("prog_type", entry.progType);
    io.mapOptional("max_entries", entry.maxEntries);
    io.mapOptional("explore", entry.explore);
    io.mapOptional("explore_trials", entry.exploreTrials);
    io.mapOptional("explore_rounds", entry.exploreRounds);
    io.mapOptional("explore_slice", entry.exploreSlice);
    io.mapOptional("explore_min_runs", entry.exploreMinRuns);
    io.mapOptional("explore_budget", entry.exploreBudget);
    io.mapOptional("explore_margin", entry.exploreMargin);
    io.mapOptional("explore_shortfall", entry.exploreShortfall);
    io.mapOptional("explore_every", entry.exploreEvery);
  }
};

template <> struct MappingTraits<morpheus::cli::ConfigFile> {
  static void mapping(IO &io, morpheus::cli::ConfigFile &file) {
    io.mapOptional("socket", file.socket);
    io.mapOptional("metrics_address", file.metricsAddress);
    io.mapOptional("cpu_budget", file.cpuBudget);
    io.mapRequired("programs", file.programs);
  }
};

} // namespace llvm::yaml

namespace morpheus::cli {

namespace {

// bpffs refuses '.' in a name, and the name is a pin directory's.
bool validName(llvm::StringRef name) {
  return !name.empty() && name.size() <= 64 && llvm::all_of(name, [](char c) {
           return llvm::isAlnum(c) || c == '_' || c == '-';
         });
}

// Paths in the file are relative to the file.
std::string anchored(const std::string &path, llvm::StringRef base) {
  if (path.empty() || llvm::sys::path::is_absolute(path))
    return path;
  llvm::SmallString<256> joined(base);
  llvm::sys::path::append(joined, path);
  return std::string(joined);
}

std::string fingerprintOf(ProgramEntry entry) {
  std::string text;
  llvm::raw_string_ostream stream(text);
  llvm::yaml::Output out(stream);
  out << entry;
  return text;
}

Expected<RunOptions> runOptionsFor(const ProgramEntry &entry, llvm::StringRef base) {
  auto bad = [&entry](const llvm::Twine &why) {
    return makeError("program '{0}': {1}", entry.name, why.str());
  };
  if (entry.ifaces.empty() == entry.adopt.empty())
    return bad(entry.adopt.empty() ? "give 'ifaces' (attach it) or 'adopt' (join the program "
                                     "another loader attached)"
                                   : "'ifaces' attaches the program, 'adopt' joins one another "
                                     "loader attached: give one of them");
  RunOptions options;
  options.program = anchored(entry.source, base);
  options.ifaces = entry.ifaces;
  options.adopt = entry.adopt;
  options.acceptOneTailCallFewer = entry.acceptOneTailCallFewer;
  options.otherWriters = entry.otherWriters.value_or(options.otherWriters);
  options.keepGeneric = entry.keepGeneric;
  // Checked as the daemon options will be, but now: a file that does not
  // read changes nothing.
  if (auto kept = keptGenericFor(options); !kept)
    return bad(llvm::toString(kept.takeError()));
  options.netns = entry.netns;
  options.entry = entry.entry;
  options.mode = entry.xdpMode.value_or(options.mode);
  options.tcDirection = entry.tcAttach.value_or(options.tcDirection);
  if (!entry.period.empty()) {
    std::optional<double> period = commandline::parseDuration(entry.period);
    if (!period)
      return bad("period: '" + entry.period + "' is not a duration like 1s or 250ms");
    options.periodMs = *period;
  }
  options.explore = entry.explore;
  options.exploreTrials = entry.exploreTrials.value_or(options.exploreTrials);
  options.exploreRounds = entry.exploreRounds.value_or(options.exploreRounds);
  options.exploreMinRuns = entry.exploreMinRuns.value_or(options.exploreMinRuns);
  options.exploreMarginNs = entry.exploreMargin.value_or(options.exploreMarginNs);
  options.exploreShortfall = entry.exploreShortfall.value_or(options.exploreShortfall);
  for (auto [key, text, ms] : {std::tuple{"explore_slice", &entry.exploreSlice,
                                          &options.exploreSliceMs},
                               std::tuple{"explore_budget", &entry.exploreBudget,
                                          &options.exploreBudgetMs},
                               std::tuple{"explore_every", &entry.exploreEvery,
                                          &options.exploreEveryMs}}) {
    if (text->empty())
      continue;
    std::optional<double> duration = commandline::parseDuration(*text);
    if (!duration)
      return bad(std::string(key) + ": '" + *text + "' is not a duration like 1s or 250ms");
    *ms = *duration;
  }
  options.pinDir = entry.pinDir;
  options.pinRoot = entry.pinRoot;
  options.inlineLimit = entry.inlineLimit.value_or(options.inlineLimit);
  options.tablePasses = entry.passes;
  options.costModel = anchored(entry.costModel, base);
  options.shadowPackets = entry.shadowPackets.value_or(options.shadowPackets);
  options.profile = entry.profile.value_or(options.profile);
  options.notProfiled = entry.noProfile;
  if (!entry.reproducerDir.empty())
    options.reproducerDir = anchored(entry.reproducerDir, base);
  options.quiet = entry.quiet;
  for (const std::string &dir : entry.includes)
    options.compiler.includes.push_back(anchored(dir, base));
  options.compiler.defines = entry.defines;
  options.compiler.cflags = entry.cflags;
  if (!entry.compileDb.empty())
    options.compiler.compileDatabase = anchored(entry.compileDb, base);
  options.compiler.programType = entry.progType;
  options.compiler.maxEntries = entry.maxEntries;
  return options;
}

} // namespace

Expected<AgentConfig> parseAgentConfig(llvm::StringRef text, const std::string &path) {
  std::string diagnostics;
  llvm::raw_string_ostream diagnosticStream(diagnostics);
  auto buffer = llvm::MemoryBuffer::getMemBuffer(text, path, /*RequiresNullTerminator=*/false);
  ConfigFile file;
  {
    llvm::yaml::Input input(
        buffer->getMemBufferRef(), nullptr,
        [](const llvm::SMDiagnostic &diagnostic, void *context) {
          diagnostic.print(nullptr, *static_cast<llvm::raw_ostream *>(context), false);
        },
        &diagnosticStream);
    input >> file;
    if (input.error())
      return makeError("{0}", llvm::StringRef(diagnostics).rtrim().str());
  }
  AgentConfig config;
  if (file.socket)
    config.socketPath = *file.socket;
  config.metricsAddress = file.metricsAddress;
  if (file.cpuBudget < 0)
    return makeError("{0}: cpu_budget: {1} is negative (a share of one core; 0 = no limit)",
                     path, file.cpuBudget);
  config.cpuBudget = file.cpuBudget;
  llvm::SmallString<256> base(path);
  llvm::sys::path::remove_filename(base);
  std::set<std::string> names;
  for (const ProgramEntry &entry : file.programs) {
    if (!validName(entry.name))
      return makeError("{0}: program name '{1}': use letters, digits, '_' and '-' (up to 64; "
                       "it names the program's pin directory, and bpffs refuses '.')",
                       path, entry.name);
    if (!names.insert(entry.name).second)
      return makeError("{0}: program '{1}' is named twice", path, entry.name);
    auto options = runOptionsFor(entry, base);
    if (!options)
      return withContext(options.takeError(), path);
    config.programs.push_back({entry.name, std::move(*options), fingerprintOf(entry)});
  }
  return config;
}

Expected<std::vector<runtime::AgentProgram>> agentPrograms(const AgentConfig &config) {
  std::vector<runtime::AgentProgram> programs;
  for (const ConfiguredProgram &program : config.programs) {
    std::string costModelSaid;
    auto daemon = daemonOptionsFor(program.options, program.name, /*socket=*/false, costModelSaid);
    if (!daemon)
      return withContext(daemon.takeError(), "program '" + program.name + "'");
    programs.push_back(
        {program.name, program.options.program, std::move(*daemon), program.fingerprint});
  }
  return programs;
}

Expected<AgentConfig> readAgentConfig(const std::string &path) {
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return makeSystemError(buffer.getError().value(), "{0}: cannot read the configuration",
                           path);
  return parseAgentConfig((*buffer)->getBuffer(), path);
}

} // namespace morpheus::cli
