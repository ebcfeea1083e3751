// The control plane on pinned maps: what a good file writes, what reloading
// rewrites, that a bad file changes nothing, and the command line.
#include "Harness.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <cstring>
#include <map>
#include <set>
#include <llvm/Testing/Support/Error.h>

void morpheus_nf_firewall_commands(morpheus::nf::Commands &);
extern const char morpheus_nf_firewall_summary[];

namespace morpheus::nf::firewall::testing {
namespace {

using Contents = std::map<Bytes, Bytes>;
using nf::testing::rawEntries;

std::set<std::pair<uint32_t, uint8_t>> prefixesIn(int fd, uint32_t generation) {
  std::set<std::pair<uint32_t, uint8_t>> prefixes;
  for (const auto &[raw, value] : rawEntries(fd)) {
    fw_prefix_key key;
    std::memcpy(&key, raw.data(), sizeof(key));
    if (key.generation == generation)
      prefixes.insert({ntohl(key.addr), key.prefixlen - FW_GENERATION_BITS});
  }
  return prefixes;
}

std::set<std::pair<uint32_t, uint8_t>> srcPrefixesOf(const std::vector<Rule> &rules) {
  std::set<std::pair<uint32_t, uint8_t>> prefixes;
  for (const Rule &rule : rules)
    prefixes.insert({rule.src.address, rule.src.length});
  return prefixes;
}

int runCli(std::vector<std::string> words) {
  return nf::testing::runCommand(
      {"firewall", morpheus_nf_firewall_summary, morpheus_nf_firewall_commands}, std::move(words));
}

TEST(Loader, GoodFileFillsTheIdleHalfThenFlipsTheGeneration) {
  std::vector<Rule> rules = rulesFromConfig("classbench-fw1-449-rules.txt");
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  firewall.load(rules);
  fw_config config = firewall.config();
  EXPECT_EQ(config.generation, 1u);
  EXPECT_EQ(config.rule_count, 449u);
  EXPECT_EQ(config.default_action, FW_DROP);
  EXPECT_EQ(config.flags, 0u);

  EXPECT_EQ(prefixesIn(firewall.mapFd("src_prefixes"), 1), srcPrefixesOf(rules));
  EXPECT_TRUE(prefixesIn(firewall.mapFd("src_prefixes"), 0).empty());

  // The set of 180.204.132.128/28 (rule 1's source): every rule whose source
  // contains it, and nothing else.
  fw_prefix_key key = {FW_GENERATION_BITS + 28, 1, htonl(packet::parseIpv4("180.204.132.128"))};
  fw_rule_set set;
  ASSERT_EQ(bpf_map_lookup_elem(firewall.mapFd("src_prefixes"), &key, &set), 0);
  for (size_t i = 0; i < rules.size(); ++i) {
    const Ipv4Prefix &src = rules[i].src;
    bool contains = src.length <= 28 && (src.length == 0 || (0xb4cc8480 >> (32 - src.length)) ==
                                                                 (src.address >> (32 - src.length)));
    EXPECT_EQ(bool(set.bits[i / 64] >> (i % 64) & 1), contains) << "rule " << i + 1;
  }
  EXPECT_EQ(set.first_word, 0);
  EXPECT_EQ(set.last_word, (rules.size() - 1) / 64); // the wildcard rules reach the end

  uint32_t action, index = FW_MAX_RULES + 0;
  ASSERT_EQ(bpf_map_lookup_elem(firewall.mapFd("rule_actions"), &index, &action), 0);
  EXPECT_EQ(action, FW_ACCEPT);
}

TEST(Loader, ReloadingRewritesOnlyTheIdleHalfAndRemovesStalePrefixes) {
  std::vector<Rule> fw1 = rulesFromConfig("classbench-fw1-449-rules.txt");
  std::vector<Rule> fw3 = rulesFromConfig("classbench-fw3-411-rules.txt");
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  int src = firewall.mapFd("src_prefixes");
  firewall.load(fw1);
  firewall.load(fw3);
  EXPECT_EQ(firewall.config().generation, 0u);
  EXPECT_EQ(prefixesIn(src, 0), srcPrefixesOf(fw3));
  EXPECT_EQ(prefixesIn(src, 1), srcPrefixesOf(fw1)); // the previous set, idle

  // Counters of a half start from zero when it goes live again.
  uint32_t rule = referenceMatch(fw3, Tuple{});
  ASSERT_LT(rule, fw3.size()); // fw3 ends with a catch-all
  firewall.run(packetFor(Tuple{}));
  EXPECT_EQ(firewall.hits(rule), 1u);
  firewall.load(fw3);
  EXPECT_EQ(firewall.config().generation, 1u);
  EXPECT_EQ(prefixesIn(src, 1), srcPrefixesOf(fw3));
  EXPECT_EQ(firewall.hits(rule), 0u);
  firewall.run(packetFor(Tuple{}));
  firewall.run(packetFor(Tuple{}));
  firewall.load(fw1);
  firewall.load(fw3); // back to generation 1, which counted 2 two loads ago
  EXPECT_EQ(firewall.hits(rule), 0u);
}

TEST(Loader, FourThousandRulesFitAndLoad) {
  std::vector<Rule> rules = rulesFromConfig("generated-4000-rules.txt");
  Firewall firewall; // the verifier accepted the program with maps for 4,096 rules
  ASSERT_TRUE(firewall.ok());
  firewall.load(rules);
  EXPECT_EQ(firewall.config().rule_count, 4000u);
  Tuple lastRule; // traffic only the last rules can match still finds them
  const Rule &last = rules.back();
  lastRule.saddr = last.src.address;
  lastRule.daddr = last.dst.address;
  lastRule.protocol = last.protocol.value_or(Tcp);
  firewall.expectReference(rules, lastRule);
}

TEST(Loader, BadLineIsReportedWithItsNumberAndNothingChanges) {
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  firewall.load(rulesFromConfig("classbench-fw1-449-rules.txt"));
  std::map<std::string, Contents> before;
  const char *maps[] = {"fw_config",   "src_prefixes", "dst_prefixes", "protocols",
                        "sport_class", "sport_sets",   "dport_class",  "dport_sets",
                        "rule_actions", "rule_hits"};
  for (const char *map : maps)
    before[map] = rawEntries(firewall.mapFd(map));

  std::string text = "src=10.0.0.0/8 l4proto=TCP dport=22 action=ACCEPT\n";
  for (int i = 0; i < 300; ++i)
    text += "dst=192.0.2." + std::to_string(i % 256) + " action=DROP\n";
  for (const char *bad : {"src=10.0.0.0/33 action=ACCEPT", "l4proto=TCP dport=90:80 action=DROP",
                          "l4proto=SCTP action=ACCEPT"}) {
    RuleFile file(text + bad + "\naction=ACCEPT\n");
    ::testing::internal::CaptureStderr();
    int status = runCli({"firewall", "load-rules", file.path(), "--pin-dir", firewall.pinDir()});
    std::string errors = ::testing::internal::GetCapturedStderr();
    EXPECT_EQ(status, 1);
    EXPECT_NE(errors.find(file.path() + ":302: "), std::string::npos) << errors;
    for (const char *map : maps)
      EXPECT_TRUE(rawEntries(firewall.mapFd(map)) == before[map]) << "map " << map << " changed";
  }
}

TEST(Loader, CommandLine) {
  Firewall firewall;
  ASSERT_TRUE(firewall.ok());
  RuleFile file("l4proto=UDP dport=53 action=ACCEPT\nl4proto=TCP action=DROP\n");
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runCli({"firewall", "load-rules", file.path(), "--default", "accept", "--conntrack",
                    "--ipv6", "accept", "--pin-dir", firewall.pinDir()}),
            0);
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "2 rules loaded\n");
  fw_config config = firewall.config();
  EXPECT_EQ(config.default_action, FW_ACCEPT);
  EXPECT_EQ(config.flags, FW_FLAG_CONNTRACK | FW_FLAG_IPV6_ACCEPT);
  EXPECT_EQ(config.rule_count, 2u);

  Tuple dns;
  dns.protocol = Udp;
  dns.dport = 53;
  firewall.run(packetFor(dns));
  firewall.run(packetFor(dns));
  firewall.run(packetFor(Tuple{}));
  auto status = readStatus(firewall.pinDir());
  ASSERT_THAT_EXPECTED(status, llvm::Succeeded());
  EXPECT_EQ(status->ruleHits, (std::vector<uint64_t>{2, 1, 0}));
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runCli({"firewall", "stats", "--pin-dir", firewall.pinDir()}), 0);
  std::string stats = ::testing::internal::GetCapturedStdout();
  EXPECT_NE(stats.find("rule 1     2\nrule 2     1\ndefault    0\n"), std::string::npos) << stats;
  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runCli({"firewall", "flows", "--pin-dir", firewall.pinDir()}), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("UDP 10.0.0.2:53 -> 10.0.0.1:40000"),
            std::string::npos);

  ::testing::internal::CaptureStdout();
  EXPECT_EQ(runCli({"firewall", "--help"}), 0);
  EXPECT_NE(::testing::internal::GetCapturedStdout().find("load-rules"), std::string::npos);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(runCli({"firewall", "load-rules", file.path(), "--default", "maybe"}), 2);
  EXPECT_EQ(runCli({"firewall", "frobnicate"}), 2);
  EXPECT_EQ(runCli({"firewall", "load-rules", "/nonexistent/rules", "--pin-dir",
                    firewall.pinDir()}),
            1);
  ::testing::internal::GetCapturedStderr();
}

} // namespace
} // namespace morpheus::nf::firewall::testing
