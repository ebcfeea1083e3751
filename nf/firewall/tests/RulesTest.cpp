// Reading rule files: the ClassBench sets parse to what their lines say, and
// every kind of bad line is reported with its file and line number.
#include "Harness.h"

namespace morpheus::nf::firewall::testing {
namespace {

uint32_t ip(const char *text) { return packet::parseIpv4(text); }

TEST(Rules, ClassBenchSetsParseCompletely) {
  std::vector<Rule> fw1 = rulesFromConfig("classbench-fw1-449-rules.txt");
  ASSERT_EQ(fw1.size(), 449u);
  // src=180.204.132.128/28 dst=209.181.179.176/28 l4proto=UDP sport=53:53 dport=754:754
  const Rule &first = fw1.front();
  EXPECT_EQ(first.line, 1u);
  EXPECT_EQ(first.src.address, ip("180.204.132.128"));
  EXPECT_EQ(first.src.length, 28);
  EXPECT_EQ(first.dst.address, ip("209.181.179.176"));
  EXPECT_EQ(first.protocol, Udp);
  EXPECT_EQ(first.sport.low, 53);
  EXPECT_EQ(first.sport.high, 53);
  EXPECT_EQ(first.dport.low, 754);
  EXPECT_EQ(first.action, FW_ACCEPT);

  std::vector<Rule> fw3 = rulesFromConfig("classbench-fw3-411-rules.txt");
  ASSERT_EQ(fw3.size(), 411u);
  const Rule &last = fw3.back(); // "action=ACCEPT": every field a wildcard
  EXPECT_EQ(last.src.length, 0);
  EXPECT_EQ(last.dst.length, 0);
  EXPECT_FALSE(last.protocol);
  EXPECT_TRUE(last.sport.any());
  EXPECT_TRUE(last.dport.any());

  EXPECT_EQ(rulesFromConfig("generated-1000-rules.txt").size(), 1000u);
  EXPECT_EQ(rulesFromConfig("generated-4000-rules.txt").size(), 4000u);
}

TEST(Rules, FieldsInAnyOrderWithCommentsAndBlankLines) {
  RuleFile file("# office\n\n"
                "action=DROP dport=8080 l4proto=tcp src=10.0.0.1   # one host\n"
                "l4proto=GRE action=ACCEPT\n");
  std::vector<Rule> rules = file.rules();
  ASSERT_EQ(rules.size(), 2u);
  EXPECT_EQ(rules[0].line, 3u);
  EXPECT_EQ(rules[0].action, FW_DROP);
  EXPECT_EQ(rules[0].src.length, 32);
  EXPECT_EQ(rules[0].protocol, Tcp);
  EXPECT_EQ(rules[0].dport.low, 8080);
  EXPECT_EQ(rules[0].dport.high, 8080);
  EXPECT_TRUE(rules[0].sport.any());
  EXPECT_EQ(rules[1].protocol, Gre);
}

struct BadLine {
  const char *name;
  const char *line;
  const char *message; // after "FILE:3: "
};

void PrintTo(const BadLine &bad, std::ostream *out) { *out << bad.line; }

class RulesBadLine : public ::testing::TestWithParam<BadLine> {};

TEST_P(RulesBadLine, ReportedWithFileAndLine) {
  RuleFile file(std::string("src=10.0.0.0/8 action=ACCEPT\n# fine so far\n") + GetParam().line +
                "\nl4proto=UDP action=DROP\n");
  auto rules = parseRules(file.path());
  ASSERT_FALSE(bool(rules));
  EXPECT_EQ(llvm::toString(rules.takeError()), file.path() + ":3: " + GetParam().message);
}

INSTANTIATE_TEST_SUITE_P(
    Rules, RulesBadLine,
    ::testing::Values(
        BadLine{"BadPrefix", "src=10.0.0.300/8 action=ACCEPT",
                "src: '10.0.0.300' is not an IPv4 address"},
        BadLine{"PrefixTooLong", "dst=10.0.0.0/33 action=ACCEPT", "dst: 33 is larger than 32"},
        BadLine{"HostBitsSet", "dst=10.0.0.1/8 action=ACCEPT",
                "dst: '10.0.0.1/8' has host bits set beyond /8"},
        BadLine{"InvertedPortRange", "l4proto=TCP dport=90:80 action=ACCEPT",
                "dport: range '90:80' is empty"},
        BadLine{"PortTooLarge", "l4proto=UDP sport=1:65536 action=ACCEPT",
                "sport: 65536 is larger than 65535"},
        BadLine{"UnknownProtocol", "l4proto=SCTP action=ACCEPT",
                "l4proto: unknown protocol 'SCTP' (TCP, UDP, ICMP or GRE)"},
        BadLine{"PortsWithoutPorts", "l4proto=ICMP dport=80 action=ACCEPT",
                "dport: ICMP has no ports (a port range needs TCP, UDP or no l4proto)"},
        BadLine{"UnknownAction", "action=REJECT", "action: 'REJECT' is neither ACCEPT nor DROP"},
        BadLine{"NoAction", "src=10.0.0.0/8", "no action= (ACCEPT or DROP)"},
        BadLine{"UnknownField", "tos=4 action=ACCEPT",
                "unknown field 'tos' (src, dst, l4proto, sport, dport, action)"},
        BadLine{"RepeatedField", "src=1.0.0.0/8 src=2.0.0.0/8 action=ACCEPT",
                "'src' given twice"},
        BadLine{"NotKeyValue", "ACCEPT", "expected key=value, got 'ACCEPT'"}),
    [](const ::testing::TestParamInfo<BadLine> &info) { return info.param.name; });

TEST(Rules, MoreRulesThanTheFirewallHoldsNamesTheFirstExtraLine) {
  std::string text;
  for (int i = 0; i <= FW_MAX_RULES; ++i)
    text += "l4proto=TCP dport=" + std::to_string(i) + " action=ACCEPT\n";
  RuleFile file(text);
  auto rules = parseRules(file.path());
  ASSERT_FALSE(bool(rules));
  EXPECT_EQ(llvm::toString(rules.takeError()),
            file.path() + ":" + std::to_string(FW_MAX_RULES + 1) +
                ": more than 4096 rules, the most the firewall holds");
}

} // namespace
} // namespace morpheus::nf::firewall::testing
