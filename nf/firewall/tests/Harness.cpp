#include "Harness.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstdio>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::firewall::testing {

namespace {

const packet::Mac Router = {0x02, 0, 0, 0, 0, 0x01};
const packet::Mac Host = {0x02, 0, 0, 0, 0, 0x02};
constexpr size_t IpOffset = 14;

bool inPrefix(const Ipv4Prefix &prefix, uint32_t address) {
  return prefix.length == 0 ||
         (address >> (32 - prefix.length)) == (prefix.address >> (32 - prefix.length));
}

bool portMatches(const PortRange &range, const Tuple &tuple, uint16_t port) {
  bool wildcard = range.low == 0 && range.high == 65535;
  return wildcard || (tuple.hasPorts() && range.low <= port && port <= range.high);
}

uint32_t addressIn(const Ipv4Prefix &prefix, std::mt19937 &random) {
  uint32_t host = prefix.length ? ~(~uint32_t(0) << (32 - prefix.length)) : ~uint32_t(0);
  return prefix.address | (random() & host);
}

// Mostly inside the range, with its edges and their outer neighbours often.
uint16_t portNear(const PortRange &range, std::mt19937 &random) {
  unsigned pick = random() % 100;
  if (pick < 10)
    return range.low;
  if (pick < 20)
    return range.high;
  if (pick < 25 && range.low > 0)
    return range.low - 1;
  if (pick < 30 && range.high < 65535)
    return range.high + 1;
  if (pick < 40)
    return random();
  return range.low + random() % (uint32_t(range.high) - range.low + 1);
}

uint8_t anyProtocol(std::mt19937 &random) {
  const uint8_t choices[] = {Tcp, Tcp, Udp, Udp, Icmp, Gre, Esp};
  return choices[random() % sizeof(choices)];
}

} // namespace

Bytes packetFor(const Tuple &tuple, uint8_t optionWords) {
  packet::Ipv4Options ip;
  ip.saddr = tuple.saddr;
  ip.daddr = tuple.daddr;
  ip.fragment = tuple.fragment;
  ip.optionWords = optionWords;
  packet::PacketBuilder builder;
  builder.ethernet(Router, Host).ipv4(ip);
  if (tuple.protocol == Tcp)
    builder.tcp(tuple.sport, tuple.dport);
  else if (tuple.protocol == Udp)
    builder.udp(tuple.sport, tuple.dport);
  else if (tuple.protocol == Icmp)
    builder.icmpEcho(7, 1);
  else
    builder.payload(tuple.protocol == Gre ? 4 : 8); // GRE: flags, protocol
  Bytes bytes = builder.payload(16).build();
  if (bytes[IpOffset + 9] != tuple.protocol) {
    // The builder knows no GRE or ESP: name it, and mend the checksum.
    size_t header = (bytes[IpOffset] & 0xf) * 4;
    bytes[IpOffset + 9] = tuple.protocol;
    bytes[IpOffset + 10] = bytes[IpOffset + 11] = 0;
    uint16_t checksum = packet::internetChecksum(&bytes[IpOffset], header);
    bytes[IpOffset + 10] = checksum >> 8;
    bytes[IpOffset + 11] = checksum & 0xff;
  }
  return bytes;
}

size_t referenceMatch(const std::vector<Rule> &rules, const Tuple &tuple) {
  for (size_t i = 0; i < rules.size(); ++i) {
    const Rule &rule = rules[i];
    if (inPrefix(rule.src, tuple.saddr) && inPrefix(rule.dst, tuple.daddr) &&
        (!rule.protocol || *rule.protocol == tuple.protocol) &&
        portMatches(rule.sport, tuple, tuple.sport) && portMatches(rule.dport, tuple, tuple.dport))
      return i;
  }
  return rules.size();
}

std::string configPath(const std::string &name) {
  return morpheus::testing::sourcePath("nf/firewall/configs/" + name);
}

std::vector<Rule> rulesFromConfig(const std::string &name) {
  auto rules = parseRules(configPath(name));
  if (!rules) {
    ADD_FAILURE() << llvm::toString(rules.takeError());
    return {};
  }
  return *rules;
}

std::vector<Rule> RuleFile::rules() const {
  auto rules = parseRules(path());
  if (!rules) {
    ADD_FAILURE() << llvm::toString(rules.takeError());
    return {};
  }
  return *rules;
}

std::vector<Tuple> tuplesFor(const std::vector<Rule> &rules, size_t count, uint32_t seed) {
  std::mt19937 random(seed);
  std::vector<Tuple> tuples;
  for (size_t i = 0; i < count; ++i) {
    Tuple tuple;
    if (rules.empty() || random() % 100 < 15) {
      tuple.saddr = random();
      tuple.daddr = random();
      tuple.protocol = anyProtocol(random);
      tuple.sport = random();
      tuple.dport = random();
    } else {
      const Rule &rule = rules[random() % rules.size()];
      // A quarter of the time the destination side comes from another
      // rule, so packets also land where rules overlap partially.
      const Rule &other = random() % 4 ? rule : rules[random() % rules.size()];
      tuple.saddr = addressIn(rule.src, random);
      tuple.daddr = addressIn(other.dst, random);
      tuple.protocol = rule.protocol ? *rule.protocol : anyProtocol(random);
      tuple.sport = portNear(rule.sport, random);
      tuple.dport = portNear(other.dport, random);
    }
    tuples.push_back(tuple);
  }
  return tuples;
}

uint64_t perCpuValue(int mapFd, uint32_t index) {
  std::vector<uint64_t> values(libbpf_num_possible_cpus());
  EXPECT_EQ(bpf_map_lookup_elem(mapFd, &index, values.data()), 0) << strerror(errno);
  uint64_t sum = 0;
  for (uint64_t value : values)
    sum += value;
  return sum;
}

std::string describe(const Tuple &tuple) {
  char text[128];
  std::snprintf(text, sizeof(text), "%u.%u.%u.%u:%u -> %u.%u.%u.%u:%u proto %u frag 0x%x",
                tuple.saddr >> 24, tuple.saddr >> 16 & 0xff, tuple.saddr >> 8 & 0xff,
                tuple.saddr & 0xff, tuple.sport, tuple.daddr >> 24, tuple.daddr >> 16 & 0xff,
                tuple.daddr >> 8 & 0xff, tuple.daddr & 0xff, tuple.dport, tuple.protocol,
                tuple.fragment);
  return text;
}

Firewall::Firewall() : pins("firewall"), program(morpheus::nf::testing::objectPath("firewall"), pins.path()) {}

void Firewall::load(const std::vector<Rule> &rules, const LoadOptions &options) {
  Error err = loadRules(pinDir(), rules, options);
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
}

fw_config Firewall::config() const {
  fw_config config = {};
  uint32_t zero = 0;
  EXPECT_EQ(bpf_map_lookup_elem(mapFd("fw_config"), &zero, &config), 0);
  return config;
}

uint64_t Firewall::hits(uint32_t index) const {
  return perCpuValue(mapFd("rule_hits"), config().generation * FW_HIT_SLOTS + index);
}

uint64_t Firewall::stat(fw_stat which) const { return perCpuValue(mapFd("fw_stats"), which); }

void Firewall::expectReference(const std::vector<Rule> &rules, const Tuple &tuple) {
  size_t rule = referenceMatch(rules, tuple);
  bool matched = rule < rules.size();
  uint32_t slot = matched ? rule : FW_DEFAULT_SLOT;
  uint32_t action = matched ? uint32_t(rules[rule].action) : config().default_action;
  uint64_t before = hits(slot);
  Bytes packet = packetFor(tuple);
  RunResult result = run(packet);
  EXPECT_EQ(result.verdict, action == FW_ACCEPT ? XdpPass : XdpDrop)
      << describe(tuple) << ": expected "
      << (matched ? "rule " + std::to_string(rule + 1) + " (line " +
                        std::to_string(rules[rule].line) + ")"
                  : std::string("the default"));
  EXPECT_EQ(hits(slot), before + 1) << describe(tuple) << ": counted in another slot";
  EXPECT_EQ(result.output, packet);
}

} // namespace morpheus::nf::firewall::testing
