#include "RouterFixture.h"

#include <bpf/bpf.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <stdexcept>
#include <llvm/Testing/Support/Error.h>

extern char **environ;

namespace morpheus::nf::router::testing {

namespace {

void runIp(std::vector<std::string> args) {
  args.insert(args.begin(), "ip");
  std::vector<char *> argv;
  std::string command;
  for (std::string &arg : args) {
    argv.push_back(arg.data());
    command += (command.empty() ? "" : " ") + arg;
  }
  argv.push_back(nullptr);
  pid_t pid;
  int status = 0;
  if (posix_spawnp(&pid, "ip", nullptr, nullptr, argv.data(), environ) != 0 ||
      waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
    throw std::runtime_error(command + ": failed");
}

} // namespace

PortInterfaces::PortInterfaces() : veth("nf_router"), inside(veth.nsA()) {
  indexes.push_back(veth.ifindexA());
  for (unsigned port = 1; port < Count; ++port) {
    std::string name = "port" + std::to_string(port);
    runIp({"-n", veth.nsA(), "link", "add", name, "type", "veth", "peer", "name", name + "p"});
    indexes.push_back(morpheus::testing::interfaceIndex(name));
  }
}

const char BaseRoutes[] = R"(# the test table
10.0.0.0/8       10.1.0.1 1
10.1.2.0/24      10.1.0.2 2
10.1.2.3/32      10.1.0.3 1
192.0.2.0/24     direct   2
198.51.100.1/32  local
203.0.113.0/24   10.9.9.9 0   # a gateway with no neighbour entry
100.64.0.0/10    10.1.0.1 3   # port 3 is never bound
)";

const char BaseNeighbors[] = R"(10.255.0.1 02:00:00:00:00:01 02:0a:00:00:00:00 0
10.1.0.1   02:00:00:00:00:02 02:0a:00:00:00:01 1
10.1.0.2   02:00:00:00:00:03 02:0a:00:00:00:02 2
10.1.0.3   02:00:00:00:00:04 02:0a:00:00:00:01 1
192.0.2.7  02:00:00:00:00:05 02:0a:00:00:00:02 2
10.1.0.1   02:00:00:00:00:06 02:0a:00:00:00:03 3
)";

const char DefaultRoute[] = "0.0.0.0/0 10.255.0.1 0\n";

void configure(const std::string &pinDir, const PortInterfaces &interfaces,
               const TempDir &files) {
  for (unsigned port = 0; port < BoundPorts; ++port) {
    Error err = setPort(pinDir, port, interfaces.ifindex(port));
    ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  }
  auto routes = loadRoutes(files.write("routes.txt", BaseRoutes), {pinDir});
  ASSERT_THAT_EXPECTED(routes, llvm::Succeeded());
  auto neighbors = loadNeighbors(files.write("neighbors.txt", BaseNeighbors), {pinDir});
  ASSERT_THAT_EXPECTED(neighbors, llvm::Succeeded());
}

Mac portMac(unsigned port) { return {0x02, 0x0a, 0, 0, 0, uint8_t(port)}; }
Mac neighborMac(unsigned number) { return {0x02, 0, 0, 0, 0, uint8_t(number)}; }

packet::Ipv4Options toAddress(const std::string &daddr, uint8_t ttl) {
  packet::Ipv4Options ip;
  ip.saddr = packet::parseIpv4("172.16.0.9");
  ip.daddr = packet::parseIpv4(daddr);
  ip.ttl = ttl;
  return ip;
}

namespace {

Bytes udp(const Mac &dst, const Mac &src, const packet::Ipv4Options &ip) {
  return packet::PacketBuilder().ethernet(dst, src).ipv4(ip).udp(1234, 80).payload(18).build();
}

constexpr size_t IpOffset = 14;

// Sets one byte of the IPv4 header and recomputes the checksum, so the
// change is the packet's only defect.
Bytes withIpByte(Bytes packet, size_t offset, uint8_t value) {
  packet[IpOffset + offset] = value;
  packet[IpOffset + 10] = packet[IpOffset + 11] = 0;
  size_t headerLength = std::min<size_t>((packet[IpOffset] & 0x0f) * 4, packet.size() - IpOffset);
  uint16_t sum = packet::internetChecksum(&packet[IpOffset], std::max<size_t>(headerLength, 20));
  packet[IpOffset + 10] = sum >> 8;
  packet[IpOffset + 11] = sum & 0xff;
  return packet;
}

Bytes withTotalLength(const Bytes &packet, uint16_t length) {
  return withIpByte(withIpByte(packet, 2, length >> 8), 3, length & 0xff);
}

Case passed(std::string name, Bytes packet, router_stat stat) {
  Bytes output = packet;
  return {std::move(name), std::move(packet), XDP_PASS, std::move(output), stat};
}

Case dropped(std::string name, Bytes packet) {
  Bytes output = packet;
  return {std::move(name), std::move(packet), XDP_DROP, std::move(output), STAT_MALFORMED};
}

// `ip` forwarded to neighbour `number` out of `port`.
Case routed(std::string name, const packet::Ipv4Options &ip, unsigned number, unsigned port) {
  return {std::move(name), arriving(ip), XDP_REDIRECT,
          forwarded(ip, neighborMac(number), portMac(port)), STAT_FORWARDED};
}

} // namespace

Bytes arriving(const packet::Ipv4Options &ip) { return udp(RouterMac, HostMac, ip); }

Bytes forwarded(packet::Ipv4Options ip, const Mac &dst, const Mac &src) {
  ip.ttl -= 1;
  return udp(dst, src, ip);
}

std::vector<Case> baseCases() {
  using packet::PacketBuilder;
  std::vector<Case> cases = {
      routed("host_route_32", toAddress("10.1.2.3"), 4, 1),
      routed("subnet_route_24_inside_8", toAddress("10.1.2.4"), 3, 2),
      routed("covering_route_8", toAddress("10.2.0.1"), 2, 1),
      routed("direct_route_neighbor_is_destination", toAddress("192.0.2.7"), 5, 2),
      routed("ttl_2_leaves_with_1", toAddress("10.1.2.3", 2), 4, 1),
      routed("ttl_255", toAddress("10.1.2.3", 255), 4, 1),
      passed("no_route", arriving(toAddress("11.0.0.1")), STAT_NO_ROUTE),
      passed("direct_route_unknown_host", arriving(toAddress("192.0.2.8")), STAT_NO_NEIGHBOR),
      passed("gateway_without_neighbor", arriving(toAddress("203.0.113.5")), STAT_NO_NEIGHBOR),
      passed("port_without_interface", arriving(toAddress("100.64.0.1")), STAT_NO_PORT),
      passed("ttl_1", arriving(toAddress("10.1.2.3", 1)), STAT_TTL_EXCEEDED),
      passed("ttl_0", arriving(toAddress("10.1.2.3", 0)), STAT_TTL_EXCEEDED),
      passed("multicast_ttl_1", arriving(toAddress("224.0.0.5", 1)), STAT_LOCAL),
      passed("multicast_routable_ttl", arriving(toAddress("239.1.2.3")), STAT_LOCAL),
      passed("limited_broadcast", arriving(toAddress("255.255.255.255")), STAT_LOCAL),
  };

  packet::Ipv4Options local = toAddress("198.51.100.1");
  cases.push_back(passed(
      "icmp_echo_to_router",
      PacketBuilder().ethernet(RouterMac, HostMac).ipv4(local).icmpEcho(7, 1).payload(8).build(),
      STAT_LOCAL));
  auto tcp = [](const Mac &dst, const Mac &src, const packet::Ipv4Options &ip) {
    return PacketBuilder().ethernet(dst, src).ipv4(ip).tcp(40000, 443).build();
  };
  packet::Ipv4Options subnet = toAddress("10.1.2.4"), leaving = subnet;
  leaving.ttl -= 1;
  cases.push_back({"tcp_forwarded", tcp(RouterMac, HostMac, subnet), XDP_REDIRECT,
                   tcp(neighborMac(3), portMac(2), leaving), STAT_FORWARDED});

  // Fragments are forwarded like whole datagrams.
  for (auto [name, fragment] : {std::pair{"first_fragment", 0x2000},
                                {"middle_fragment", 0x2000 | 185},
                                {"last_fragment", 185},
                                {"dont_fragment", 0x4000}}) {
    packet::Ipv4Options ip = toAddress("10.1.2.3");
    ip.fragment = fragment;
    cases.push_back(routed(name, ip, 4, 1));
  }

  // Ethernet padding beyond the IPv4 total length is carried along.
  Case padded = routed("ethernet_padding_kept", toAddress("10.1.2.3"), 4, 1);
  padded.packet.resize(padded.packet.size() + 10);
  padded.output.resize(padded.output.size() + 10);
  cases.push_back(padded);

  for (uint8_t words : {1, 10}) {
    packet::Ipv4Options ip = toAddress("10.1.2.3");
    ip.optionWords = words;
    cases.push_back(passed("ip_options_ihl_" + std::to_string(5 + words),
                           PacketBuilder().ethernet(RouterMac, HostMac).ipv4(ip).udp(1, 2).build(),
                           STAT_IP_OPTIONS));
  }

  Bytes good = arriving(toAddress("10.1.2.3"));
  Bytes badChecksum = good;
  badChecksum[IpOffset + 11] ^= 0x01;
  cases.push_back(dropped("bad_checksum", badChecksum));
  for (uint8_t version : {0, 6, 15})
    cases.push_back(dropped("version_" + std::to_string(version),
                            withIpByte(good, 0, uint8_t(version << 4 | 5))));
  for (uint8_t ihl = 0; ihl < 5; ++ihl)
    cases.push_back(dropped("ihl_" + std::to_string(ihl), withIpByte(good, 0, 0x40 | ihl)));
  cases.push_back(
      dropped("total_length_beyond_frame", withTotalLength(good, good.size() - IpOffset + 1)));
  cases.push_back(dropped("total_length_below_header", withTotalLength(good, 19)));
  packet::Ipv4Options withOptions = toAddress("10.1.2.3");
  withOptions.optionWords = 1;
  cases.push_back(dropped(
      "total_length_below_options",
      withTotalLength(
          PacketBuilder().ethernet(RouterMac, HostMac).ipv4(withOptions).udp(1, 2).build(), 20)));
  // Every cut from the bare Ethernet header to one byte short (shorter
  // frames are refused by BPF_PROG_TEST_RUN itself).
  for (size_t length = IpOffset; length < good.size(); ++length)
    cases.push_back(dropped("truncated_to_" + std::to_string(length) + "_bytes",
                            Bytes(good.begin(), good.begin() + length)));

  // Not IPv4 over plain Ethernet: the stack's business, whatever it holds.
  cases.push_back(passed(
      "ipv6", PacketBuilder().ethernet(RouterMac, HostMac).ipv6().udp(1, 2).payload(8).build(),
      STAT_NOT_IPV4));
  cases.push_back(passed("arp",
                         PacketBuilder()
                             .ethernet({0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, HostMac, 0x0806)
                             .payload(28)
                             .build(),
                         STAT_NOT_IPV4));
  cases.push_back(passed("arp_truncated_to_ethernet_header",
                         PacketBuilder().ethernet(RouterMac, HostMac, 0x0806).build(),
                         STAT_NOT_IPV4));
  cases.push_back(passed("vlan_tagged_ipv4",
                         PacketBuilder()
                             .ethernet(RouterMac, HostMac)
                             .vlan(10)
                             .ipv4(toAddress("10.1.2.3"))
                             .udp(1, 2)
                             .build(),
                         STAT_NOT_IPV4));
  cases.push_back(passed("qinq_tagged_ipv4",
                         PacketBuilder()
                             .ethernet(RouterMac, HostMac)
                             .vlan(100, 0, 0x88a8)
                             .vlan(10)
                             .ipv4(toAddress("10.1.2.3"))
                             .udp(1, 2)
                             .build(),
                         STAT_NOT_IPV4));
  return cases;
}

std::vector<Case> defaultRouteCases() {
  return {
      routed("default_route", toAddress("11.0.0.1"), 1, 0),
      routed("default_route_low_end", toAddress("0.0.0.1"), 1, 0),
      routed("host_route_32_inside_24_8_0", toAddress("10.1.2.3"), 4, 1),
      routed("subnet_24_inside_8_0", toAddress("10.1.2.4"), 3, 2),
      routed("covering_8_inside_0", toAddress("10.255.255.255"), 2, 1),
      passed("local_route_still_local", arriving(toAddress("198.51.100.1")), STAT_LOCAL),
      passed("multicast_not_default_routed", arriving(toAddress("224.0.0.5")), STAT_LOCAL),
  };
}

std::vector<uint64_t> statsOf(int statsFd) {
  return morpheus::testing::perCpuCounters(statsFd, STAT_MAX);
}

void expectSameBehaviour(int original, int specialized, int statsFd, const Bytes &packet,
                         const std::string &name) {
  SCOPED_TRACE(name);
  std::vector<uint64_t> before = statsOf(statsFd);
  RunResult expected = morpheus::testing::runOnce(original, packet);
  std::vector<uint64_t> middle = statsOf(statsFd);
  RunResult actual = morpheus::testing::runOnce(specialized, packet);
  std::vector<uint64_t> after = statsOf(statsFd);
  EXPECT_EQ(actual.verdict, expected.verdict);
  EXPECT_EQ(actual.output, expected.output);
  for (unsigned stat = 0; stat < STAT_MAX; ++stat)
    EXPECT_EQ(after[stat] - middle[stat], middle[stat] - before[stat])
        << "counter " << StatNames[stat];
}

void expectCase(int programFd, int statsFd, const Case &expected) {
  SCOPED_TRACE(expected.name);
  std::vector<uint64_t> before = statsOf(statsFd);
  RunResult result = morpheus::testing::runOnce(programFd, expected.packet);
  std::vector<uint64_t> after = statsOf(statsFd);
  EXPECT_EQ(result.verdict, expected.verdict);
  EXPECT_EQ(result.output, expected.output) << "got\n"
                                            << morpheus::hexDump(result.output) << "want\n"
                                            << morpheus::hexDump(expected.output);
  for (unsigned stat = 0; stat < STAT_MAX; ++stat)
    EXPECT_EQ(after[stat] - before[stat], stat == expected.stat ? 1u : 0u)
        << "counter " << StatNames[stat];
}

} // namespace morpheus::nf::router::testing
