// nat's control plane: configuration files into maps (all or nothing, bad
// lines reported by number), translations listed back, and the commands.
#include "NatTesting.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <llvm/Testing/Support/Error.h>

void morpheus_nf_nat_commands(morpheus::nf::Commands &);
extern const char morpheus_nf_nat_summary[];

namespace morpheus::nf::nat::testing {
namespace {

using packet::read16;

// Everything the control plane writes, plus the flow tables it may prune.
struct Snapshot {
  Bytes config;
  std::vector<nat_prefix_key> inside;
  uint32_t ports[NAT_SIDES] = {};
  std::vector<std::pair<nat_flow_key, nat_binding>> out;
  std::vector<std::pair<nat_flow_key, nat_origin>> in;

  bool operator==(const Snapshot &other) const {
    return config == other.config && out == other.out && in == other.in &&
           std::equal(std::begin(ports), std::end(ports), std::begin(other.ports)) &&
           inside.size() == other.inside.size() &&
           !std::memcmp(inside.data(), other.inside.data(), inside.size() * sizeof(inside[0]));
  }
};

class Config : public NatTest {
protected:
  Snapshot snapshot() {
    Snapshot taken;
    taken.config.resize(sizeof(nat_config));
    uint32_t zero = 0;
    EXPECT_EQ(bpf_map_lookup_elem(fd("nat_config"), &zero, taken.config.data()), 0);
    for (const auto &[key, value] : nf::testing::rawEntries(fd("nat_inside")))
      taken.inside.push_back(fromBytes<nat_prefix_key>(key));
    for (uint32_t side = 0; side < NAT_SIDES; ++side)
      bpf_map_lookup_elem(fd("nat_ports"), &side, &taken.ports[side]);
    taken.out = out();
    taken.in = in();
    return taken;
  }

  // Opens a TCP flow from `host` and returns its external port.
  uint16_t openFrom(uint32_t host, uint16_t sport = 40000) {
    Frame syn;
    syn.saddr = host;
    syn.sport = sport;
    return open(syn);
  }
};

TEST_F(Config, AGoodFileFillsEveryMap) {
  TempFile file("inside 192.168.0.0/16   # the office\n"
                "\n"
                "inside 10.0.0.0/8\n"
                "external 203.0.113.7\n"
                "external 203.0.113.8\n"
                "ports 1024:65535\n"
                "inside-port 1\n"
                "outside-port " +
                Topology::outsideName() + " next-hop=02:00:00:00:0f:fe\n");
  Error err = loadConfig(file.path(), pins->path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());

  Snapshot loaded = snapshot();
  nat_config expected = {};
  expected.inside_ifindex = InsideIfindex;
  expected.outside_ifindex = Topology::outsideIfindex();
  expected.port_min = 1024;
  expected.port_max = 65535;
  expected.external_count = 2;
  expected.external[0] = htonl(0xcb007107);
  expected.external[1] = htonl(0xcb007108);
  EtherAddress outsideMac = Topology::outsideMac(); // read from the interface
  std::copy(outsideMac.begin(), outsideMac.end(), expected.outside_mac);
  std::copy(NextHopMac.begin(), NextHopMac.end(), expected.next_hop_mac);
  const auto *raw = reinterpret_cast<const uint8_t *>(&expected);
  EXPECT_EQ(loaded.config, Bytes(raw, raw + sizeof(expected)));

  ASSERT_EQ(loaded.inside.size(), 2u);
  for (const nat_prefix_key &prefix : loaded.inside) {
    bool known = (prefix.prefixlen == 16 && prefix.addr == htonl(0xc0a80000)) ||
                 (prefix.prefixlen == 8 && prefix.addr == htonl(0x0a000000));
    EXPECT_TRUE(known) << prefix.prefixlen;
    uint32_t value = 0;
    EXPECT_EQ(bpf_map_lookup_elem(fd("nat_inside"), &prefix, &value), 0);
    EXPECT_EQ(value, 1u);
  }
  EXPECT_EQ(loaded.ports[NAT_SIDE_INSIDE], InsideIfindex);
  EXPECT_EQ(loaded.ports[NAT_SIDE_OUTSIDE], Topology::outsideIfindex());
}

TEST_F(Config, AnExplicitOutsideMacAndInterfaceIndexes) {
  TempFile file("inside 192.168.0.0/16\nexternal 203.0.113.7\nports 20000-20099\n"
                "inside-port lo\noutside-port " +
                std::to_string(Topology::outsideIfindex()) +
                " mac=02:aa:bb:cc:dd:ee next-hop=02:00:00:00:0f:fe\n");
  auto settings = parseConfig(file.path());
  ASSERT_THAT_EXPECTED(settings, llvm::Succeeded());
  EXPECT_EQ(settings->insideIfindex, InsideIfindex);
  EXPECT_EQ(settings->outsideIfindex, Topology::outsideIfindex());
  EXPECT_EQ(settings->outsideMac, (EtherAddress{0x02, 0xaa, 0xbb, 0xcc, 0xdd, 0xee}));
  EXPECT_EQ(settings->portMin, 20000);
  EXPECT_EQ(settings->portMax, 20099);
}

struct BadFile {
  const char *name;
  std::string text; // "@OUT" stands for the outside interface's name
  unsigned line;    // 0: an error about the whole file
  const char *message;
};

class BadConfig : public Config, public ::testing::WithParamInterface<BadFile> {};

TEST_P(BadConfig, IsReportedWithItsLineAndNothingIsApplied) {
  configure(standardConfig());
  openFrom(InsideHost);
  openFrom(OtherInsideHost);
  Snapshot before = snapshot();

  std::string text = GetParam().text;
  for (size_t at; (at = text.find("@OUT")) != std::string::npos;)
    text.replace(at, 4, Topology::outsideName());
  TempFile file(text);
  Error err = loadConfig(file.path(), pins->path());
  ASSERT_TRUE(bool(err));
  std::string message = llvm::toString(std::move(err));
  std::string where = file.path() + ":" +
                      (GetParam().line ? std::to_string(GetParam().line) + ":" : "");
  EXPECT_EQ(message.rfind(where, 0), 0u) << message;
  EXPECT_NE(message.find(GetParam().message), std::string::npos) << message;
  EXPECT_EQ(snapshot(), before);
}

const std::string GoodTail = "ports 20000-59999\ninside-port 1\n"
                             "outside-port @OUT next-hop=02:00:00:00:0f:fe\n";

INSTANTIATE_TEST_SUITE_P(
    Nat, BadConfig,
    ::testing::Values(
        BadFile{"UnknownKeyword",
                "inside 10.0.0.0/8\nexternal 203.0.113.9\nmasquerade yes\n" + GoodTail, 3,
                "unknown keyword 'masquerade'"},
        BadFile{"BadPrefix", "inside 10.0.0.0/33\nexternal 203.0.113.9\n" + GoodTail, 1,
                "larger than 32"},
        BadFile{"HostBits", "external 203.0.113.9\n" + GoodTail + "inside 10.0.0.1/8\n", 5,
                "host bits"},
        BadFile{"PrefixTwice", "inside 10.0.0.0/8\ninside 10.0.0.0/8\nexternal 203.0.113.9\n" +
                                   GoodTail,
                2, "given twice (first on line 1)"},
        BadFile{"ExternalInside",
                "inside 10.0.0.0/8\ninside 203.0.113.0/24\nexternal 203.0.113.9\n" + GoodTail, 3,
                "lies in the inside prefix 203.0.113.0/24 (line 2)"},
        BadFile{"BadAddress", "inside 10.0.0.0/8\nexternal 203.0.113\n" + GoodTail, 2,
                "not an IPv4 address"},
        BadFile{"TooManyExternal",
                "inside 10.0.0.0/8\n" + [] {
                  std::string lines;
                  for (int i = 1; i <= 9; ++i)
                    lines += "external 203.0.113." + std::to_string(i) + "\n";
                  return lines;
                }() + GoodTail,
                10, "more than 8 addresses"},
        BadFile{"PortZero", "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 0-100\n"
                            "inside-port 1\noutside-port @OUT next-hop=02:00:00:00:0f:fe\n",
                3, "port 0"},
        BadFile{"PortsReversed", "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 600-500\n"
                                 "inside-port 1\noutside-port @OUT next-hop=02:00:00:00:0f:fe\n",
                3, "is empty"},
        BadFile{"PortsTwice", "inside 10.0.0.0/8\nexternal 203.0.113.9\n" + GoodTail +
                                  "ports 1000-2000\n",
                6, "'ports' given twice (first on line 3)"},
        BadFile{"NoSuchInterface", "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 2000-3000\n"
                                   "inside-port nat-nowhere0\n",
                4, "no interface named 'nat-nowhere0'"},
        BadFile{"NoSuchIfindex", "inside 10.0.0.0/8\nexternal 203.0.113.9\ninside-port 99999\n",
                3, "no interface with index 99999"},
        BadFile{"NoNextHop", "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 2000-3000\n"
                             "inside-port 1\noutside-port @OUT mac=02:00:00:00:00:01\n",
                5, "next-hop=MAC is missing"},
        BadFile{"BadMac", "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 2000-3000\n"
                          "inside-port 1\noutside-port @OUT next-hop=02:00:00:00:0f\n",
                5, "not a MAC address"},
        BadFile{"LoopbackHasNoMac",
                "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 2000-3000\n"
                "inside-port @OUT\noutside-port lo next-hop=02:00:00:00:0f:fe\n",
                5, "has no Ethernet address; give mac=MAC"},
        BadFile{"UnknownOption", "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 2000-3000\n"
                                 "inside-port 1\noutside-port @OUT next-hop=02:00:00:00:0f:fe "
                                 "vlan=3\n",
                5, "unknown option 'vlan'"},
        BadFile{"MissingArgument", "inside\n", 1, "usage: inside PREFIX"},
        BadFile{"NoExternal", "inside 10.0.0.0/8\n" + GoodTail, 0, "no 'external ADDRESS' line"},
        BadFile{"NoOutsidePort", "inside 10.0.0.0/8\nexternal 203.0.113.9\nports 2000-3000\n"
                                 "inside-port 1\n",
                0, "no 'outside-port' line"}),
    [](const ::testing::TestParamInfo<BadFile> &info) { return info.param.name; });

TEST_F(Config, AMissingFileIsReported) {
  configure(standardConfig());
  Snapshot before = snapshot();
  Error err = loadConfig("/nonexistent/nat.conf", pins->path());
  ASSERT_TRUE(bool(err));
  EXPECT_NE(llvm::toString(std::move(err)).find("/nonexistent/nat.conf"), std::string::npos);
  EXPECT_EQ(snapshot(), before);
}

TEST_F(Config, ReloadingDropsOnlyTheTranslationsItNoLongerAllows) {
  configure(standardConfig());
  uint16_t kept = openFrom(InsideHost);
  openFrom(OtherInsideHost); // 10.0.0.5: its prefix goes away
  ASSERT_EQ(out().size(), 2u);

  TempFile narrower("inside 192.168.0.0/16\nexternal 203.0.113.7\n" +
                    std::string("ports 20000-59999\ninside-port 1\noutside-port ") +
                    Topology::outsideName() + " next-hop=02:00:00:00:0f:fe\n");
  Error err = loadConfig(narrower.path(), pins->path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  Snapshot after = snapshot();
  ASSERT_EQ(after.inside.size(), 1u);
  EXPECT_EQ(after.inside[0].prefixlen, 16u);
  ASSERT_EQ(after.out.size(), 1u);
  EXPECT_EQ(after.out[0].first.addr, htonl(InsideHost));
  EXPECT_EQ(ntohs(after.out[0].second.external_port), kept);
  ASSERT_EQ(after.in.size(), 1u);
  EXPECT_EQ(after.in[0].second.inside_addr, htonl(InsideHost));

  // A port range that excludes the remaining flow's port removes it too.
  uint16_t low = kept == 20000 ? 20001 : 20000;
  TempFile otherPorts("inside 192.168.0.0/16\nexternal 203.0.113.7\nports " +
                      std::to_string(low) + "-" + std::to_string(low) +
                      "\ninside-port 1\noutside-port " + Topology::outsideName() +
                      " next-hop=02:00:00:00:0f:fe\n");
  err = loadConfig(otherPorts.path(), pins->path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_TRUE(out().empty());
  EXPECT_TRUE(in().empty());
}

std::string endpoint(const std::string &address, uint16_t port) {
  return address + ":" + std::to_string(port);
}

std::string row(const std::string &protocol, const std::string &inside,
                const std::string &external, const std::string &remote,
                const std::string &halves) {
  auto column = [](std::string text, size_t width) {
    text.resize(std::max(width, text.size() + 1), ' ');
    return text;
  };
  return column(protocol, 7) + column(inside, 23) + column(external, 23) + column(remote, 23) +
         halves + "\n";
}

TEST_F(Config, FlowsListsTheTranslationsAndTheirHalves) {
  configure(standardConfig());
  uint16_t tcp = openFrom(InsideHost);
  Frame ping;
  ping.l4 = L4::EchoRequest;
  ping.sport = 7;
  uint16_t id = open(ping);

  auto listed = readTranslations(pins->path());
  ASSERT_THAT_EXPECTED(listed, llvm::Succeeded());
  std::string header = row("proto", "inside", "external", "remote", "halves");
  EXPECT_EQ(formatTranslations(*listed),
            header +
                row("icmp", "192.168.1.10:7", endpoint("203.0.113.7", id), "198.51.100.20:0",
                    "both") +
                row("tcp", "192.168.1.10:40000", endpoint("203.0.113.7", tcp),
                    "198.51.100.20:80", "both"));

  nat_flow_key reverse = flowKey(External, Remote, tcp, 80, IPPROTO_TCP);
  ASSERT_EQ(bpf_map_delete_elem(fd("nat_in"), &reverse), 0);
  nat_flow_key forward = flowKey(InsideHost, Remote, 7, 0, IPPROTO_ICMP);
  ASSERT_EQ(bpf_map_delete_elem(fd("nat_out"), &forward), 0);
  listed = readTranslations(pins->path());
  ASSERT_TRUE(bool(listed));
  EXPECT_EQ(formatTranslations(*listed),
            header +
                row("icmp", "192.168.1.10:7", endpoint("203.0.113.7", id), "198.51.100.20:0",
                    "inbound-only") +
                row("tcp", "192.168.1.10:40000", endpoint("203.0.113.7", tcp),
                    "198.51.100.20:80", "outbound-only"));
}

TEST_F(Config, StatsAreSummedOverCpus) {
  configure(standardConfig());
  openFrom(InsideHost);
  auto stats = readStats(pins->path());
  ASSERT_THAT_EXPECTED(stats, llvm::Succeeded());
  ASSERT_EQ(stats->size(), size_t(NAT_STAT_MAX));
  EXPECT_EQ((*stats)[NAT_STAT_OUTBOUND], (std::pair<std::string, uint64_t>("outbound", 1)));
  EXPECT_EQ((*stats)[NAT_STAT_NEW_FLOW], (std::pair<std::string, uint64_t>("new-flow", 1)));
  EXPECT_EQ((*stats)[NAT_STAT_MALFORMED], (std::pair<std::string, uint64_t>("malformed", 0)));
}

int command(std::vector<std::string> words) {
  return nf::testing::runCommand({"nat", morpheus_nf_nat_summary, morpheus_nf_nat_commands},
                                 std::move(words));
}

TEST_F(Config, CommandsAndTheirExitCodes) {
  TempFile good(standardConfig()), bad("inside 10.0.0.0/8\nbogus\n");
  const std::string &dir = pins->path();
  ::testing::internal::CaptureStdout();
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(command({"nat", "--help"}), 0);
  EXPECT_EQ(command({"nat"}), 2);
  EXPECT_EQ(command({"nat", "frobnicate"}), 2);
  EXPECT_EQ(command({"nat", "load-config", "--help"}), 0);
  EXPECT_EQ(command({"nat", "load-config"}), 2);
  EXPECT_EQ(command({"nat", "load-config", good.path(), "--bogus"}), 2);
  EXPECT_EQ(command({"nat", "load-config", bad.path(), "--pin-dir", dir}), 1);
  EXPECT_EQ(command({"nat", "load-config", good.path(), "--pin-dir", dir}), 0);
  EXPECT_EQ(command({"nat", "flows", "--pin-dir", dir}), 0);
  EXPECT_EQ(command({"nat", "stats", "--pin-dir=" + dir}), 0);
  EXPECT_EQ(command({"nat", "flows", "--pin-dir", dir + "/missing"}), 1);
  std::string out = ::testing::internal::GetCapturedStdout();
  std::string err = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(out.find("usage: morpheus nf nat load-config [OPTIONS] FILE"), std::string::npos)
      << out;
  EXPECT_NE(out.find("proto  inside"), std::string::npos) << out;
  EXPECT_NE(out.find("malformed"), std::string::npos) << out;
  EXPECT_NE(err.find(bad.path() + ":2: unknown keyword 'bogus'"), std::string::npos) << err;
  EXPECT_NE(err.find("morpheus: nf nat: unknown command 'frobnicate'"), std::string::npos) << err;
  EXPECT_NE(err.find("morpheus: nf nat load-config: FILE is required"), std::string::npos) << err;
  EXPECT_NE(err.find("morpheus: nf nat load-config: unknown option '--bogus'"), std::string::npos)
      << err;
}

} // namespace
} // namespace morpheus::nf::nat::testing
