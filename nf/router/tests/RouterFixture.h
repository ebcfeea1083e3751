// What the router's tests share: interfaces to bind ports to, config files,
// the test configuration, and the packet cases (input, verdict, exact output
// bytes, counter) that both the data-plane test and the Morpheus
// equivalence test run.
#pragma once

#include "Control.h"
#include "KernelSupport.h"
#include "NfTest.h"
#include "netns/VethPair.h"
#include "support/packet/Packet.h"

#include <gtest/gtest.h>

#include <linux/bpf.h>

#include <map>
#include <string>
#include <vector>

namespace morpheus::nf::router::testing {

using morpheus::nf::testing::TempDir;
using morpheus::testing::RunResult;
using packet::Mac;

// Interfaces to bind the router's ports to: one end of a veth pair, and one
// end of further veth pairs created beside it in its namespace (this kernel
// has no dummy driver). The calling thread
// stays in that namespace while this object lives, since ifindexes, and so
// DEVMAP updates, are per network namespace.
class PortInterfaces {
public:
  static constexpr unsigned Count = 4;
  PortInterfaces();
  uint32_t ifindex(unsigned port) const { return indexes.at(port); }

private:
  morpheus::testing::VethPair veth;
  morpheus::testing::NetnsGuard inside;
  std::vector<uint32_t> indexes;
};

// The router as an operator loads it (plain libbpf), its maps pinned in a
// test directory, with interfaces for its ports; nothing configured yet.
struct LoadedRouter {
  PortInterfaces interfaces;
  TempDir files;
  morpheus::testing::PinDir pins{"nf_router"};
  morpheus::nf::testing::NfProgram program{morpheus::nf::testing::objectPath("router"),
                                           pins.path()};

  const std::string &pinDir() const { return pins.path(); }
  int statsFd() const { return program.mapFd("stats"); }
};

// The test configuration: ports 0-2 bound, port 3 left unbound.
extern const char BaseRoutes[];
extern const char BaseNeighbors[];
extern const char DefaultRoute[]; // added to BaseRoutes by the second stage
inline constexpr unsigned BoundPorts = 3;

// Binds ports 0..BoundPorts-1 and loads BaseRoutes and BaseNeighbors into
// the maps pinned in `pinDir`.
void configure(const std::string &pinDir, const PortInterfaces &interfaces, const TempDir &files);

struct Case {
  std::string name; // a gtest name: letters, digits, '_'
  Bytes packet;
  uint32_t verdict;
  Bytes output;     // the exact bytes the program must leave
  router_stat stat; // the one counter the packet moves
};

std::vector<Case> baseCases();         // under BaseRoutes
std::vector<Case> defaultRouteCases(); // once DefaultRoute is added

// The MACs the test neighbours and ports use.
inline constexpr Mac RouterMac = {0x02, 0x0a, 0x00, 0x00, 0x00, 0xff};
inline constexpr Mac HostMac = {0x02, 0x00, 0x00, 0x00, 0xaa, 0x01};
Mac portMac(unsigned port);       // 02:0a:00:00:00:PORT
Mac neighborMac(unsigned number); // 02:00:00:00:00:NUMBER

// An IPv4/UDP packet from HostMac to RouterMac (`arriving`), and the same
// packet as the router must send it: TTL one less, a freshly computed
// checksum, the given MACs.
Bytes arriving(const packet::Ipv4Options &ip);
Bytes forwarded(packet::Ipv4Options ip, const Mac &dst, const Mac &src);
packet::Ipv4Options toAddress(const std::string &daddr, uint8_t ttl = 64);

std::vector<uint64_t> statsOf(int statsFd);

// Runs the case on `programFd` and checks verdict, bytes and counters.
void expectCase(int programFd, int statsFd, const Case &expected);
// Runs `packet` on both programs: same verdict, bytes and counter moves.
void expectSameBehaviour(int original, int specialized, int statsFd, const Bytes &packet,
                         const std::string &name);

// For gtest's messages about parameters.
inline void PrintTo(const Case &c, std::ostream *out) { *out << c.name; }

} // namespace morpheus::nf::router::testing
