// The router's data plane on the real kernel (BPF_PROG_TEST_RUN), loaded
// with plain libbpf and configured through its control plane: every case's
// verdict, exact output bytes and counter, plus checksum arithmetic and
// longest-prefix matching over the full Stanford table against a linear scan.
#include "RouterFixture.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <random>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::router::testing {
namespace {

using morpheus::testing::runOnce;
using morpheus::testing::sourcePath;

constexpr size_t IpOffset = 14;

// One router per suite: the veth pair and the load are the slow part.
template <bool WithDefaultRoute> class RouterSuite : public ::testing::TestWithParam<Case> {
protected:
  static void SetUpTestSuite() {
    router = std::make_unique<LoadedRouter>();
    ASSERT_TRUE(router->program.ok());
    configure(router->pinDir(), router->interfaces, router->files);
    if (WithDefaultRoute) {
      auto loaded =
          loadRoutes(router->files.write("default.txt", DefaultRoute), {router->pinDir()});
      ASSERT_THAT_EXPECTED(loaded, llvm::Succeeded());
    }
  }
  static void TearDownTestSuite() { router.reset(); }

  void run() {
    const Case &expected = GetParam();
    expectCase(router->program.programFd(), router->statsFd(), expected);
    if (expected.verdict != XDP_REDIRECT)
      return;
    // What a forwarded packet must satisfy, whatever its exact bytes.
    const Bytes &in = expected.packet, &out = expected.output;
    EXPECT_TRUE(packet::ipv4ChecksumValid(out, IpOffset));
    EXPECT_EQ(out[IpOffset + 8], in[IpOffset + 8] - 1) << "TTL";
    EXPECT_TRUE(std::equal(in.begin() + IpOffset + 12, in.end(), out.begin() + IpOffset + 12))
        << "addresses and payload untouched";
  }

  static inline std::unique_ptr<LoadedRouter> router;
};

using BasePackets = RouterSuite<false>;
using DefaultRoutePackets = RouterSuite<true>;

TEST_P(BasePackets, VerdictBytesAndCounter) { run(); }
TEST_P(DefaultRoutePackets, VerdictBytesAndCounter) { run(); }

std::string caseName(const ::testing::TestParamInfo<Case> &info) { return info.param.name; }
INSTANTIATE_TEST_SUITE_P(Router, BasePackets, ::testing::ValuesIn(baseCases()), caseName);
INSTANTIATE_TEST_SUITE_P(Router, DefaultRoutePackets, ::testing::ValuesIn(defaultRouteCases()),
                         caseName);

class Forwarding : public ::testing::Test {
protected:
  void SetUp() override {
    ASSERT_TRUE(router.program.ok());
    configure(router.pinDir(), router.interfaces, router.files);
  }
  RunResult run(const Bytes &packet) { return runOnce(router.program.programFd(), packet); }

  LoadedRouter router;
};

// The incremental update must equal a full recomputation for every TTL and
// many header sums (the builder computes the expected checksum afresh).
TEST_F(Forwarding, ChecksumUpdateEqualsRecomputationForEveryTtl) {
  for (unsigned ttl = 2; ttl <= 255; ++ttl) {
    for (uint16_t id : {0, 1, 0x1234, 0xfffe, 0xffff}) {
      packet::Ipv4Options ip = toAddress("10.1.2.3", ttl);
      ip.id = id;
      RunResult result = run(arriving(ip));
      ASSERT_EQ(result.verdict, XDP_REDIRECT);
      ASSERT_EQ(result.output, forwarded(ip, neighborMac(4), portMac(1)))
          << "ttl " << ttl << " id " << id;
    }
  }
}

// RFC 1624's example of why HC + 0x0100 is wrong: from 0xfeff the shortcut
// gives 0xffff, a full computation (and eqn. 3) gives 0x0000.
TEST_F(Forwarding, ChecksumUpdateNeverYieldsNegativeZero) {
  packet::Ipv4Options ip = toAddress("10.1.2.3");
  ip.id = 0;
  uint16_t base = packet::read16(arriving(ip), IpOffset + 10);
  // The sum of the other words is ~base; choose id so it becomes 0x0100.
  uint32_t id = 0x0100 + uint32_t(base);
  ip.id = (id & 0xffff) + (id >> 16);
  Bytes packet = arriving(ip);
  ASSERT_EQ(packet::read16(packet, IpOffset + 10), 0xfeff);

  RunResult result = run(packet);
  ASSERT_EQ(result.verdict, XDP_REDIRECT);
  EXPECT_EQ(packet::read16(result.output, IpOffset + 10), 0x0000);
  EXPECT_EQ(result.output, forwarded(ip, neighborMac(4), portMac(1)));
}

// Prefixes in `path`, read independently of the loader.
std::vector<Ipv4Prefix> prefixesIn(const std::string &path) {
  std::vector<Ipv4Prefix> prefixes;
  std::ifstream in(path);
  for (std::string line; std::getline(in, line);) {
    unsigned a, b, c, d, length;
    if (std::sscanf(line.c_str(), "%u.%u.%u.%u/%u", &a, &b, &c, &d, &length) == 5)
      prefixes.push_back({(a << 24) | (b << 16) | (c << 8) | d, uint8_t(length)});
  }
  return prefixes;
}

uint32_t maskOf(uint8_t length) { return length ? ~uint32_t(0) << (32 - length) : 0; }

// The whole Stanford table, with its routes spread over four ports: for the
// first and last address of every prefix and for random addresses, the
// packet leaves through the port of the longest matching prefix, found here
// by a linear scan.
TEST_F(Forwarding, FullStanfordTableAgreesWithLinearScan) {
  std::string routesFile = sourcePath("nf/router/configs/stanford-yozb-routes.txt");
  Error bound = setPort(router.pinDir(), 3, router.interfaces.ifindex(3));
  ASSERT_THAT_ERROR(std::move(bound), llvm::Succeeded());
  auto routes = loadRoutes(routesFile, {router.pinDir(), /*replace=*/true});
  ASSERT_THAT_EXPECTED(routes, llvm::Succeeded());
  auto neighbors = loadNeighbors(sourcePath("nf/router/configs/stanford-neighbors.txt"),
                                 {router.pinDir(), /*replace=*/true});
  ASSERT_THAT_EXPECTED(neighbors, llvm::Succeeded());

  std::vector<Ipv4Prefix> prefixes = prefixesIn(routesFile);
  ASSERT_EQ(prefixes.size(), 2592u);
  std::vector<uint32_t> addresses;
  for (const Ipv4Prefix &prefix : prefixes) {
    addresses.push_back(prefix.address);
    addresses.push_back(prefix.address | ~maskOf(prefix.length));
  }
  std::mt19937 random(1812);
  for (int i = 0; i < 500; ++i)
    addresses.push_back(random());

  const std::vector<uint32_t> allPorts = {0, 1, 2, 3};
  for (uint32_t address : addresses) {
    packet::Ipv4Options ip = toAddress("0.0.0.0");
    ip.daddr = address;
    SCOPED_TRACE("destination " + std::to_string(address >> 24) + "." +
                 std::to_string(address >> 16 & 0xff) + "." + std::to_string(address >> 8 & 0xff) +
                 "." + std::to_string(address & 0xff));
    RunResult result = run(arriving(ip));
    if ((address >> 28) == 0xe || address == 0xffffffff) {
      EXPECT_EQ(result.verdict, XDP_PASS);
      continue;
    }
    const Ipv4Prefix *best = nullptr;
    for (const Ipv4Prefix &prefix : prefixes)
      if ((address & maskOf(prefix.length)) == prefix.address &&
          (!best || prefix.length > best->length))
        best = &prefix;
    ASSERT_NE(best, nullptr); // the table has a default route
    uint32_t port = hashedPort(*best, allPorts);
    EXPECT_EQ(result.verdict, XDP_REDIRECT);
    EXPECT_EQ(result.output, forwarded(ip, {0x02, 0, 0, 0, 0x01, uint8_t(port)}, portMac(port)));
  }
}

// Loading a route changes where the very next packet goes; removing its
// neighbour sends it to the stack untouched.
TEST_F(Forwarding, ConfigurationChangesTakeEffectAtOnce) {
  Bytes packet = arriving(toAddress("11.0.0.1"));
  EXPECT_EQ(run(packet).verdict, XDP_PASS);
  auto added = loadRoutes(router.files.write("default.txt", DefaultRoute), {router.pinDir()});
  ASSERT_THAT_EXPECTED(added, llvm::Succeeded());
  EXPECT_EQ(run(packet).verdict, XDP_REDIRECT);

  std::string fewer = BaseNeighbors;
  fewer.erase(0, fewer.find('\n') + 1); // drop 10.255.0.1, the default gateway
  auto replaced =
      loadNeighbors(router.files.write("fewer.txt", fewer), {router.pinDir(), /*replace=*/true});
  ASSERT_THAT_EXPECTED(replaced, llvm::Succeeded());
  EXPECT_EQ(replaced->removed, 1u);
  RunResult result = run(packet);
  EXPECT_EQ(result.verdict, XDP_PASS);
  EXPECT_EQ(result.output, packet);

  Error unbound = unsetPort(router.pinDir(), 1);
  ASSERT_THAT_ERROR(std::move(unbound), llvm::Succeeded());
  Bytes viaPort1 = arriving(toAddress("10.1.2.3"));
  result = run(viaPort1);
  EXPECT_EQ(result.verdict, XDP_PASS);
  EXPECT_EQ(result.output, viaPort1);
}

} // namespace
} // namespace morpheus::nf::router::testing
