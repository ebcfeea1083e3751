// The agent's configuration file (cli/AgentConfig): each entry means what
// the same flags of `morpheus run` mean; whatever is wrong is named with
// the file, line and column (or the program), and nothing is touched by
// reading.
#include "cli/AgentConfig.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <set>

namespace morpheus::cli {
namespace {

std::string errorOf(llvm::StringRef text) {
  auto config = parseAgentConfig(text, "/etc/morpheus/agent.yaml");
  if (config)
    return "read";
  return llvm::toString(config.takeError());
}

TEST(AgentConfig, EntriesMeanWhatRunsFlagsMean) {
  auto config = parseAgentConfig(R"(
socket: /run/m.sock
metrics_address: 127.0.0.1:9464
cpu_budget: 0.25
programs:
  - name: edge_fw
    source: fw/fw.bpf.c
    ifaces: [eth0, eth1]
    xdp_mode: generic
    period: 250ms
    inline_limit: 16
    passes: []
    profile: adaptive
    no_profile: [stats]
    includes: [include]
    defines: [MAX=4]
    max_entries: {pool: 4096, flows: 65536}
  - name: tc-lb
    source: /opt/lb.bpf.c
    adopt: eth0:ingress
    accept_one_tail_call_fewer: true
    tc_attach: egress
    prog_type: tc
)",
                                 "/etc/morpheus/agent.yaml");
  ASSERT_THAT_EXPECTED(config, llvm::Succeeded());
  EXPECT_EQ(config->socketPath, "/run/m.sock");
  EXPECT_EQ(config->metricsAddress, "127.0.0.1:9464");
  EXPECT_DOUBLE_EQ(config->cpuBudget, 0.25);
  ASSERT_EQ(config->programs.size(), 2u);
  const RunOptions &fw = config->programs[0].options;
  EXPECT_EQ(config->programs[0].name, "edge_fw");
  EXPECT_EQ(fw.program, "/etc/morpheus/fw/fw.bpf.c") << "relative to the file";
  EXPECT_EQ(fw.ifaces, (std::vector<std::string>{"eth0", "eth1"}));
  EXPECT_EQ(fw.mode, bpf::XdpMode::Generic);
  EXPECT_DOUBLE_EQ(fw.periodMs, 250);
  EXPECT_EQ(fw.inlineLimit, 16u);
  ASSERT_TRUE(fw.tablePasses.has_value());
  EXPECT_TRUE(fw.tablePasses->empty()) << "passes: [] runs none";
  EXPECT_EQ(fw.profile, core::ProfileMode::Adaptive);
  EXPECT_EQ(fw.notProfiled, (std::vector<std::string>{"stats"}));
  EXPECT_EQ(fw.compiler.includes, (std::vector<std::string>{"/etc/morpheus/include"}));
  EXPECT_EQ(fw.compiler.defines, (std::vector<std::string>{"MAX=4"}));
  EXPECT_EQ(fw.compiler.maxEntries,
            (std::map<std::string, uint32_t>{{"pool", 4096}, {"flows", 65536}}))
      << "--max-entries pool=4096 --max-entries flows=65536";
  const RunOptions &lb = config->programs[1].options;
  EXPECT_EQ(lb.adopt, "eth0:ingress");
  EXPECT_TRUE(lb.acceptOneTailCallFewer);
  EXPECT_EQ(lb.tcDirection, bpf::TcDirection::Egress);
  EXPECT_EQ(lb.compiler.programType, bpf::ProgramType::Tc);
  EXPECT_FALSE(lb.tablePasses.has_value()) << "unset runs them all";
  EXPECT_EQ(lb.inlineLimit, RunOptions().inlineLimit) << "run's default";
}

// run --explore and its options, by the same names; durations checked.
TEST(AgentConfig, ExploreKeysMeanRunsExploreFlags) {
  auto config = parseAgentConfig(R"(
programs:
  - name: router
    source: router.bpf.c
    ifaces: [eth0]
    explore: true
    explore_trials: 4
    explore_rounds: 5
    explore_slice: 500ms
    explore_min_runs: 20000
    explore_budget: 60s
    explore_margin: 25
    explore_shortfall: 0.25
    explore_every: 600s
  - name: quiet
    source: q.bpf.c
    ifaces: [eth1]
)",
                                 "/etc/morpheus/agent.yaml");
  ASSERT_THAT_EXPECTED(config, llvm::Succeeded());
  const RunOptions &router = config->programs[0].options;
  EXPECT_TRUE(router.explore);
  EXPECT_EQ(router.exploreTrials, 4u);
  EXPECT_EQ(router.exploreRounds, 5u);
  EXPECT_DOUBLE_EQ(router.exploreSliceMs, 500);
  EXPECT_EQ(router.exploreMinRuns, 20000u);
  EXPECT_DOUBLE_EQ(router.exploreBudgetMs, 60000);
  EXPECT_DOUBLE_EQ(router.exploreMarginNs, 25);
  EXPECT_DOUBLE_EQ(router.exploreShortfall, 0.25);
  EXPECT_DOUBLE_EQ(router.exploreEveryMs, 600000);
  const RunOptions &quiet = config->programs[1].options;
  EXPECT_FALSE(quiet.explore) << "off unless asked";
  EXPECT_EQ(quiet.exploreTrials, RunOptions().exploreTrials);
  EXPECT_DOUBLE_EQ(quiet.exploreShortfall, 0.5);
  EXPECT_DOUBLE_EQ(quiet.exploreEveryMs, 0) << "no periodic exploration unless asked";
  EXPECT_NE(config->programs[0].fingerprint, config->programs[1].fingerprint);
  std::string bad = errorOf(R"(
programs:
  - name: router
    source: router.bpf.c
    ifaces: [eth0]
    explore: true
    explore_slice: soon
)");
  EXPECT_NE(bad.find("explore_slice: 'soon' is not a duration"), std::string::npos) << bad;
}

TEST(AgentConfig, AnIdleAgentAndTheDefaultSocket) {
  auto config = parseAgentConfig("programs: []\n", "/etc/morpheus/agent.yaml");
  ASSERT_THAT_EXPECTED(config, llvm::Succeeded());
  EXPECT_TRUE(config->programs.empty());
  EXPECT_EQ(config->socketPath, "/run/morpheus/agent.sock");
  EXPECT_EQ(config->metricsAddress, "");
}

TEST(AgentConfig, YamlErrorsNameFileLineAndColumn) {
  std::string misspelt = errorOf("programs:\n  - name: a\n    source: a.c\n    ifcaes: [eth0]\n");
  EXPECT_NE(misspelt.find("/etc/morpheus/agent.yaml:4:5"), std::string::npos) << misspelt;
  EXPECT_NE(misspelt.find("unknown key 'ifcaes'"), std::string::npos) << misspelt;
  std::string choice =
      errorOf("programs:\n  - name: a\n    source: a.c\n    ifaces: [e]\n    xdp_mode: fast\n");
  EXPECT_NE(choice.find(":5:15"), std::string::npos) << choice;
  EXPECT_NE(choice.find("unknown enumerated scalar"), std::string::npos) << choice;
  std::string missing = errorOf("programs:\n  - name: a\n    ifaces: [e]\n");
  EXPECT_NE(missing.find("missing required key 'source'"), std::string::npos) << missing;
  std::string notNumber = errorOf("cpu_budget: half\nprograms: []\n");
  EXPECT_NE(notNumber.find(":1:13"), std::string::npos) << notNumber;
}

TEST(AgentConfig, WhatYamlCannotSayIsNamedByProgram) {
  const std::string head = "programs:\n  - name: ";
  EXPECT_EQ(errorOf(head + "a\n    source: a.c\n"),
            "/etc/morpheus/agent.yaml: program 'a': give 'ifaces' (attach it) or 'adopt' "
            "(join the program another loader attached)");
  EXPECT_EQ(errorOf(head + "a\n    source: a.c\n    ifaces: [e]\n    adopt: e\n"),
            "/etc/morpheus/agent.yaml: program 'a': 'ifaces' attaches the program, 'adopt' "
            "joins one another loader attached: give one of them");
  EXPECT_EQ(errorOf(head + "a\n    source: a.c\n    ifaces: [e]\n    period: soon\n"),
            "/etc/morpheus/agent.yaml: program 'a': period: 'soon' is not a duration like 1s "
            "or 250ms");
  EXPECT_EQ(errorOf(head + "eth0.100\n    source: a.c\n    ifaces: [e]\n"),
            "/etc/morpheus/agent.yaml: program name 'eth0.100': use letters, digits, '_' and "
            "'-' (up to 64; it names the program's pin directory, and bpffs refuses '.')");
  EXPECT_EQ(errorOf(head + "a\n    source: a.c\n    ifaces: [e]\n  - name: a\n    source: "
                           "b.c\n    ifaces: [f]\n"),
            "/etc/morpheus/agent.yaml: program 'a' is named twice");
  EXPECT_EQ(errorOf("cpu_budget: -1\nprograms: []\n"),
            "/etc/morpheus/agent.yaml: cpu_budget: -1.00 is negative (a share of one core; 0 = no "
            "limit)");
}

// What becomes of maps other loaders write: other_writers and keep_generic
// mean what run's --other-writers and --keep-generic mean, through the one
// conversion both take (keptGenericFor, used by daemonOptionsFor).
TEST(AgentConfig, OtherWritersAndKeepGenericNameTheMapsKeptGeneric) {
  auto config = parseAgentConfig(R"(
programs:
  - name: lb
    source: lb.bpf.c
    adopt: eth0
    other_writers: keep-generic
  - name: lb_polled
    source: lb.bpf.c
    adopt: eth1
    other_writers: poll
    keep_generic: [acl]
  - name: fw
    source: fw.bpf.c
    ifaces: [eth2]
    keep_generic: [routes, acl]
)",
                                 "/etc/morpheus/agent.yaml");
  ASSERT_THAT_EXPECTED(config, llvm::Succeeded());
  ASSERT_EQ(config->programs.size(), 3u);
  const RunOptions &lb = config->programs[0].options;
  EXPECT_EQ(lb.otherWriters, OtherWriters::KeepGeneric);
  auto every = keptGenericFor(lb);
  ASSERT_THAT_EXPECTED(every, llvm::Succeeded());
  EXPECT_TRUE(every->everyMap) << "every map the adopted program shares with its owner";
  EXPECT_TRUE(every->maps.empty());

  auto polled = keptGenericFor(config->programs[1].options);
  ASSERT_THAT_EXPECTED(polled, llvm::Succeeded());
  EXPECT_FALSE(polled->everyMap);
  EXPECT_EQ(polled->maps, std::set<std::string>{"acl"});

  const RunOptions &fw = config->programs[2].options;
  EXPECT_EQ(fw.otherWriters, OtherWriters::Poll) << "run's default";
  auto named = keptGenericFor(fw);
  ASSERT_THAT_EXPECTED(named, llvm::Succeeded());
  EXPECT_FALSE(named->everyMap);
  EXPECT_EQ(named->maps, (std::set<std::string>{"acl", "routes"}));

  // The same flags on run's command line mean the same maps.
  RunOptions flags;
  flags.adopt = "eth0";
  flags.otherWriters = OtherWriters::KeepGeneric;
  auto fromFlags = keptGenericFor(flags);
  ASSERT_THAT_EXPECTED(fromFlags, llvm::Succeeded());
  EXPECT_TRUE(fromFlags->everyMap);
}

TEST(AgentConfig, KeepGenericForEveryMapIsForAnAdoptedProgramOnly) {
  const std::string head = "programs:\n  - name: a\n    source: a.c\n";
  std::string attached = errorOf(head + "    ifaces: [e]\n    other_writers: keep-generic\n");
  EXPECT_NE(attached.find("/etc/morpheus/agent.yaml: program 'a': "), std::string::npos)
      << attached;
  EXPECT_NE(attached.find("adopts none"), std::string::npos) << attached;
  EXPECT_NE(attached.find("--keep-generic MAP (keep_generic)"), std::string::npos) << attached;
  RunOptions flags;
  flags.ifaces = {"e"};
  flags.otherWriters = OtherWriters::KeepGeneric;
  EXPECT_THAT_EXPECTED(keptGenericFor(flags), llvm::Failed()) << "run's flags alike";
  std::string choice = errorOf(head + "    adopt: e\n    other_writers: sometimes\n");
  EXPECT_NE(choice.find(":5:20"), std::string::npos) << choice;
  EXPECT_NE(choice.find("unknown enumerated scalar"), std::string::npos) << choice;
}

// A reload restarts exactly the entries whose text means something else.
TEST(AgentConfig, FingerprintsChangeWithWhatAnEntrySaysNotHowItIsWritten) {
  auto fingerprint = [](llvm::StringRef entry) {
    auto config = parseAgentConfig(("programs:\n" + entry).str(), "/a.yaml");
    EXPECT_THAT_EXPECTED(config, llvm::Succeeded());
    return config ? config->programs.at(0).fingerprint : "";
  };
  std::string base = fingerprint("  - {name: a, source: a.c, ifaces: [e], period: 1s}\n");
  EXPECT_EQ(base, fingerprint("  - name: a\n    period: 1s   # same\n    ifaces:\n      - e\n"
                              "    source: a.c\n"));
  EXPECT_NE(base, fingerprint("  - {name: a, source: a.c, ifaces: [e], period: 2s}\n"));
  EXPECT_NE(base, fingerprint("  - {name: a, source: a.c, ifaces: [e, f], period: 1s}\n"));
  EXPECT_NE(base, fingerprint("  - {name: a, source: a.c, ifaces: [e], period: 1s, "
                              "keep_generic: [acl]}\n"));
  EXPECT_NE(base, fingerprint("  - {name: a, source: a.c, ifaces: [e], period: 1s, "
                              "max_entries: {pool: 8}}\n"));
  std::string adopted = fingerprint("  - {name: a, source: a.c, adopt: e}\n");
  EXPECT_NE(adopted,
            fingerprint("  - {name: a, source: a.c, adopt: e, other_writers: keep-generic}\n"));
}

} // namespace
} // namespace morpheus::cli
