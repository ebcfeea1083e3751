// The router's config loaders and commands against real pinned maps: good
// files land exactly (map contents checked), a bad line is reported with
// its file and line and changes nothing, ports need real interfaces.
#include "RouterFixture.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <fstream>
#include <llvm/Testing/Support/Error.h>

void morpheus_nf_router_commands(morpheus::nf::Commands &);
extern const char morpheus_nf_router_summary[];

namespace morpheus::nf::router::testing {
namespace {

using morpheus::testing::sourcePath;

std::string config(const std::string &name) { return sourcePath("nf/router/configs/" + name); }

class Loader : public ::testing::Test {
protected:
  void SetUp() override { ASSERT_TRUE(router.program.ok()); }

  void bindPorts(unsigned count) {
    for (unsigned port = 0; port < count; ++port) {
      Error err = setPort(router.pinDir(), port, router.interfaces.ifindex(port));
      ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
    }
  }

  // Counted the way the brief asks: walking the trie's keys.
  size_t routeCount() { return routes().size(); }

  std::map<Bytes, Bytes> routes() {
    return nf::testing::rawEntries(router.program.mapFd("routes"));
  }
  std::map<Bytes, Bytes> neighbors() {
    return nf::testing::rawEntries(router.program.mapFd("neighbors"));
  }

  LoadSummary load(const std::string &path, bool replace = false) {
    auto summary = loadRoutes(path, {router.pinDir(), replace});
    EXPECT_THAT_EXPECTED(summary, llvm::Succeeded());
    return summary ? *summary : LoadSummary{};
  }

  LoadedRouter router;
};

Bytes routeKeyBytes(const std::string &prefix, uint8_t length) {
  return bytesOf(routeKey({packet::parseIpv4(prefix), length}));
}

TEST_F(Loader, FullStanfordTableLoadsSpreadOverTheBoundPorts) {
  bindPorts(4);
  LoadSummary summary = load(config("stanford-yozb-routes.txt"));
  EXPECT_EQ(summary.written, 2592u);
  EXPECT_EQ(summary.removed, 0u);
  EXPECT_EQ(routeCount(), 2592u);

  const std::vector<uint32_t> ports = {0, 1, 2, 3};
  std::map<uint32_t, size_t> perPort;
  for (const auto &[keyBytes, valueBytes] : routes()) {
    route_key key;
    route value;
    std::memcpy(&key, keyBytes.data(), sizeof(key));
    std::memcpy(&value, valueBytes.data(), sizeof(value));
    EXPECT_EQ(value.gateway, htonl(packet::parseIpv4("192.168.1.1")));
    EXPECT_EQ(value.kind, uint32_t(ROUTE_FORWARD));
    EXPECT_EQ(value.port, hashedPort({ntohl(key.addr), uint8_t(key.prefixlen)}, ports));
    ++perPort[value.port];
  }
  for (uint32_t port : ports) // 648 each if perfectly even
    EXPECT_NEAR(double(perPort[port]), 648.0, 65.0) << "port " << port;

  // The spreading is a documented contract: these must never move.
  EXPECT_EQ(hashedPort({0, 0}, ports), 3u);
  EXPECT_EQ(hashedPort({packet::parseIpv4("10.0.0.0"), 8}, ports), 1u);
  EXPECT_EQ(hashedPort({packet::parseIpv4("171.64.15.175"), 32}, ports), 0u);

  // Loading the same file again changes nothing.
  std::map<Bytes, Bytes> before = routes();
  load(config("stanford-yozb-routes.txt"));
  EXPECT_EQ(routes(), before);
}

// The subsets are line floor(i * 2592 / N) + 1 of the full file, i = 0..N-1
// (README): regenerate them and compare, then load each.
TEST_F(Loader, SubsetsAreEvenSpreadsOfTheFullTable) {
  bindPorts(4);
  std::vector<std::string> full;
  std::ifstream in(config("stanford-yozb-routes.txt"));
  for (std::string line; std::getline(in, line);)
    full.push_back(line);
  ASSERT_EQ(full.size(), 2592u);
  for (size_t size : {20, 500}) {
    SCOPED_TRACE(size);
    std::string name = "stanford-yozb-routes-" + std::to_string(size) + ".txt";
    std::ifstream subset(config(name));
    std::vector<std::string> lines;
    for (std::string line; std::getline(subset, line);)
      lines.push_back(line);
    ASSERT_EQ(lines.size(), size);
    for (size_t i = 0; i < size; ++i)
      EXPECT_EQ(lines[i], full[i * full.size() / size]) << "line " << i + 1;
    load(config(name), /*replace=*/true);
    EXPECT_EQ(routeCount(), size);
  }
}

TEST_F(Loader, ReplaceRemovesWhatTheFileDoesNotList) {
  bindPorts(3);
  std::string first = router.files.write("first.txt", BaseRoutes);
  std::string second = router.files.write("second.txt", "10.0.0.0/8 10.1.0.9 2\n"
                                                        "172.16.0.0/12 10.1.0.9 0\n");
  load(first);
  LoadSummary merged = load(second);
  EXPECT_EQ(merged.removed, 0u);
  EXPECT_EQ(routeCount(), 8u); // 7 + one new; 10.0.0.0/8 overwritten
  route overwritten;
  ASSERT_EQ(bpf_map_lookup_elem(router.program.mapFd("routes"), routeKeyBytes("10.0.0.0", 8).data(),
                                &overwritten),
            0);
  EXPECT_EQ(overwritten.port, 2u);

  LoadSummary replaced = load(second, /*replace=*/true);
  EXPECT_EQ(replaced.written, 2u);
  EXPECT_EQ(replaced.removed, 6u);
  std::map<Bytes, Bytes> left = routes();
  ASSERT_EQ(left.size(), 2u);
  EXPECT_TRUE(left.count(routeKeyBytes("10.0.0.0", 8)));
  EXPECT_TRUE(left.count(routeKeyBytes("172.16.0.0", 12)));
}

TEST_F(Loader, RouteKindsAndBarePrefixes) {
  bindPorts(3);
  load(router.files.write("kinds.txt", "192.0.2.0/24 direct 2\n"
                                       "198.51.100.1 local\n"
                                       "10.0.0.0/8 10.1.0.1\n"));
  std::map<Bytes, Bytes> loaded = routes();
  auto valueOf = [&](const std::string &prefix, uint8_t length) {
    route value{};
    const Bytes &raw = loaded.at(routeKeyBytes(prefix, length));
    std::memcpy(&value, raw.data(), sizeof(value));
    return value;
  };
  route direct = valueOf("192.0.2.0", 24);
  EXPECT_EQ(direct.gateway, 0u);
  EXPECT_EQ(direct.port, 2u);
  EXPECT_EQ(direct.kind, uint32_t(ROUTE_FORWARD));
  EXPECT_EQ(valueOf("198.51.100.1", 32).kind, uint32_t(ROUTE_LOCAL));
  EXPECT_EQ(valueOf("10.0.0.0", 8).port, hashedPort({packet::parseIpv4("10.0.0.0"), 8}, {0, 1, 2}));
}

struct BadLine {
  const char *name;
  const char *text;     // line 5 of a file whose other lines are good
  const char *expected; // part of the message after "FILE:5: "
};

void PrintTo(const BadLine &line, std::ostream *out) { *out << line.name; }

class BadRouteLine : public Loader, public ::testing::WithParamInterface<BadLine> {};

TEST_P(BadRouteLine, IsReportedWithItsLineAndNothingIsApplied) {
  bindPorts(3);
  load(router.files.write("base.txt", BaseRoutes));
  std::map<Bytes, Bytes> before = routes();

  std::string path = router.files.write("bad.txt", std::string("172.16.0.0/12 10.1.0.9 0\n"
                                                               "10.0.0.0/8 10.1.0.9 2\n"
                                                               "10.9.0.0/16 10.1.0.9\n"
                                                               "# a comment\n") +
                                                       GetParam().text +
                                                       "\n"
                                                       "172.17.0.0/16 10.1.0.9 1\n");
  auto result = loadRoutes(path, {router.pinDir(), /*replace=*/true});
  ASSERT_FALSE(bool(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_EQ(message.rfind(path + ":5: ", 0), 0u) << message;
  EXPECT_NE(message.find(GetParam().expected), std::string::npos) << message;
  EXPECT_EQ(routes(), before);
}

INSTANTIATE_TEST_SUITE_P(
    Router, BadRouteLine,
    ::testing::Values(
        BadLine{"host_bits", "10.1.2.3/24 10.1.0.9 0", "host bits set beyond /24"},
        BadLine{"prefix_too_long", "10.0.0.0/33 10.1.0.9 0", "33 is larger than 32"},
        BadLine{"bad_prefix", "10.0.0/8 10.1.0.9 0", "not an IPv4 address"},
        BadLine{"bad_gateway", "10.2.0.0/16 10.1.0.256 0", "not an IPv4 address"},
        BadLine{"word_gateway", "10.2.0.0/16 router1 0", "not an IPv4 address"},
        BadLine{"zero_gateway", "10.2.0.0/16 0.0.0.0 0", "write 'direct'"},
        BadLine{"port_too_large", "10.2.0.0/16 10.1.0.9 64", "64 is larger than 63"},
        BadLine{"port_not_a_number", "10.2.0.0/16 10.1.0.9 eth0", "not a number"},
        BadLine{"local_with_port", "10.2.0.1/32 local 1", "a local route takes no port"},
        BadLine{"missing_next_hop", "10.2.0.0/16", "expected 'PREFIX NEXTHOP [PORT]'"},
        BadLine{"extra_word", "10.2.0.0/16 10.1.0.9 1 metric", "got 4 words"},
        BadLine{"duplicate_prefix", "10.0.0.0/8 10.1.0.7 1", "already given on line 2"}),
    [](const ::testing::TestParamInfo<BadLine> &info) { return info.param.name; });

TEST_F(Loader, RouteWithoutPortNeedsBoundPorts) {
  std::string path = router.files.write("routes.txt", "10.0.0.0/8 10.1.0.1 1\n"
                                                      "11.0.0.0/8 10.1.0.1\n");
  auto result = loadRoutes(path, {router.pinDir()});
  ASSERT_FALSE(bool(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_EQ(message.rfind(path + ":2: no PORT given", 0), 0u) << message;
  EXPECT_EQ(routeCount(), 0u);
}

TEST_F(Loader, MissingFileIsAnError) {
  auto result = loadRoutes(router.files.write("x", "") + ".missing", {router.pinDir()});
  ASSERT_FALSE(bool(result));
  EXPECT_NE(llvm::toString(result.takeError()).find("cannot open"), std::string::npos);
}

// What is not a routes file is refused before anything is read whole, the
// file named: /dev/zero would otherwise be read until memory runs out.
TEST_F(Loader, WhatIsNotATextFileIsRefused) {
  std::string binary = router.files.write(
      "binary.txt", "10.0.0.0/8 direct 0\n" + std::string("\x7f" "ELF\x02\x01\x01\0", 8));
  std::string dir = binary.substr(0, binary.rfind('/'));
  struct Case {
    std::string path, said;
  } cases[] = {
      {"/dev/zero", "/dev/zero: not a regular file (a character device)"},
      {dir, dir + ": is a directory"},
      {binary, binary + ":2: not text (byte 0x7f at column 1)"},
  };
  for (const Case &refused : cases) {
    auto result = loadRoutes(refused.path, {router.pinDir()});
    ASSERT_FALSE(bool(result)) << refused.path;
    std::string message = llvm::toString(result.takeError());
    EXPECT_EQ(message.rfind(refused.said, 0), 0u) << message;
  }
  EXPECT_EQ(routeCount(), 0u);
}

TEST_F(Loader, NeighborsLoadExactly) {
  auto summary = loadNeighbors(router.files.write("n.txt", BaseNeighbors), {router.pinDir()});
  ASSERT_THAT_EXPECTED(summary, llvm::Succeeded());
  EXPECT_EQ(summary->written, 6u);
  std::map<Bytes, Bytes> loaded = neighbors();
  EXPECT_EQ(loaded.size(), 6u);
  // 10.1.0.1 is a neighbour on ports 1 and 3, with different MACs.
  for (auto [port, number] : {std::pair{1u, 2u}, {3u, 6u}}) {
    neighbor_key key{htonl(packet::parseIpv4("10.1.0.1")), port};
    neighbor expected{};
    Mac dst = neighborMac(number), src = portMac(port);
    std::copy(dst.begin(), dst.end(), expected.dst_mac);
    std::copy(src.begin(), src.end(), expected.src_mac);
    ASSERT_TRUE(loaded.count(bytesOf(key))) << "port " << port;
    EXPECT_EQ(loaded.at(bytesOf(key)), bytesOf(expected)) << "port " << port;
  }
}

class BadNeighborLine : public Loader, public ::testing::WithParamInterface<BadLine> {};

TEST_P(BadNeighborLine, IsReportedWithItsLineAndNothingIsApplied) {
  std::string path = router.files.write(
      "bad.txt", std::string("10.1.0.1 02:00:00:00:00:01 02:0a:00:00:00:01 1\n"
                             "10.1.0.2 02:00:00:00:00:02 02:0a:00:00:00:01 1\n"
                             "\n"
                             "# a comment\n") +
                     GetParam().text + "\n10.1.0.3 02:00:00:00:00:03 02:0a:00:00:00:01 1\n");
  auto result = loadNeighbors(path, {router.pinDir()});
  ASSERT_FALSE(bool(result));
  std::string message = llvm::toString(result.takeError());
  EXPECT_EQ(message.rfind(path + ":5: ", 0), 0u) << message;
  EXPECT_NE(message.find(GetParam().expected), std::string::npos) << message;
  EXPECT_TRUE(neighbors().empty());
}

INSTANTIATE_TEST_SUITE_P(
    Router, BadNeighborLine,
    ::testing::Values(BadLine{"bad_address", "10.1.0 02:00:00:00:00:09 02:0a:00:00:00:01 1",
                              "neighbor: '10.1.0' is not an IPv4 address"},
                      BadLine{"bad_dst_mac", "10.1.0.9 02:00:00:00:09 02:0a:00:00:00:01 1",
                              "destination MAC: '02:00:00:00:09'"},
                      BadLine{"bad_src_mac", "10.1.0.9 02:00:00:00:00:09 02:0a:00:00:00:1ff 1",
                              "source MAC"},
                      BadLine{"port_too_large", "10.1.0.9 02:00:00:00:00:09 02:0a:00:00:00:01 99",
                              "port: 99 is larger than 63"},
                      BadLine{"missing_port", "10.1.0.9 02:00:00:00:00:09 02:0a:00:00:00:01",
                              "expected 'ADDRESS DST-MAC SRC-MAC PORT', got 3 words"},
                      BadLine{"duplicate", "10.1.0.2 02:00:00:00:00:09 02:0a:00:00:00:01 1",
                              "neighbor 10.1.0.2 on port 1 already given on line 2"}),
    [](const ::testing::TestParamInfo<BadLine> &info) { return info.param.name; });

TEST_F(Loader, PortsNeedRealInterfaces) {
  int fd = router.program.mapFd("ports");
  uint32_t ifindex = router.interfaces.ifindex(2);
  Error err = setPort(router.pinDir(), 5, ifindex);
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  uint32_t port = 5, stored = 0;
  ASSERT_EQ(bpf_map_lookup_elem(fd, &port, &stored), 0);
  EXPECT_EQ(stored, ifindex);
  auto bound = configuredPorts(router.pinDir());
  ASSERT_TRUE(bool(bound));
  EXPECT_EQ(*bound, std::vector<uint32_t>{5});

  err = setPort(router.pinDir(), 6, 99999);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)),
            "port 6: no interface with index 99999 in this network namespace");
  err = setPort(router.pinDir(), ROUTER_MAX_PORTS, ifindex);
  ASSERT_TRUE(bool(err));
  EXPECT_EQ(llvm::toString(std::move(err)), "port 64: ports are 0 to 63");

  err = unsetPort(router.pinDir(), 5);
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  bound = configuredPorts(router.pinDir());
  ASSERT_TRUE(bool(bound));
  EXPECT_TRUE(bound->empty());
}

TEST_F(Loader, ExampleConfigsLoad) {
  bindPorts(3);
  load(config("example-routes.txt"));
  EXPECT_EQ(routeCount(), 6u);
  auto loaded = loadNeighbors(config("example-neighbors.txt"), {router.pinDir()});
  ASSERT_THAT_EXPECTED(loaded, llvm::Succeeded());
  EXPECT_EQ(neighbors().size(), 7u);
  loaded = loadNeighbors(config("stanford-neighbors.txt"), {router.pinDir(), true});
  ASSERT_THAT_EXPECTED(loaded, llvm::Succeeded());
  EXPECT_EQ(neighbors().size(), 4u);
}

int command(std::vector<std::string> words) {
  words.insert(words.begin(), "router");
  return nf::testing::runCommand(
      {"router", morpheus_nf_router_summary, morpheus_nf_router_commands}, std::move(words));
}

TEST_F(Loader, CommandLine) {
  const std::string &pins = router.pinDir();
  EXPECT_EQ(command({"--help"}), 0);
  EXPECT_EQ(command({}), 2);
  EXPECT_EQ(command({"frobnicate"}), 2);
  EXPECT_EQ(command({"load-routes", "--help"}), 0);
  EXPECT_EQ(command({"load-routes"}), 2);
  EXPECT_EQ(command({"load-routes", "a", "b"}), 2);
  EXPECT_EQ(command({"load-routes", "a", "--bogus"}), 2);

  EXPECT_EQ(command({"set-port", "0", "port1", "--pin-dir", pins}), 0);
  uint32_t port = 0, stored = 0;
  ASSERT_EQ(bpf_map_lookup_elem(router.program.mapFd("ports"), &port, &stored), 0);
  EXPECT_EQ(stored, router.interfaces.ifindex(1));
  EXPECT_EQ(command({"set-port", "1", "no-such-interface", "--pin-dir", pins}), 1);
  EXPECT_EQ(command({"set-port", "64", "port1", "--pin-dir", pins}), 1);

  std::string bad = router.files.write("bad.txt", "10.0.0.0/8 10.1.0.1\n10.0.0.0/33 x\n");
  EXPECT_EQ(command({"load-routes", bad, "--pin-dir", pins}), 1);
  EXPECT_EQ(routeCount(), 0u);
  std::string good = router.files.write("good.txt", "10.0.0.0/8 10.1.0.1\n");
  EXPECT_EQ(command({"load-routes", good, "--pin-dir", pins, "--replace"}), 0);
  EXPECT_EQ(routeCount(), 1u);
  EXPECT_EQ(
      command({"load-neighbors", router.files.write("n.txt", BaseNeighbors), "--pin-dir", pins}),
      0);
  EXPECT_EQ(command({"unset-port", "0", "--pin-dir", pins}), 0);
  EXPECT_EQ(command({"stats", "--pin-dir", pins}), 0);
  EXPECT_EQ(command({"stats", "--pin-dir", pins + "/nowhere"}), 1);
}

} // namespace
} // namespace morpheus::nf::router::testing
