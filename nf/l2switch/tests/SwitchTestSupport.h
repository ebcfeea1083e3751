// What the l2switch tests share: one network namespace with five veth
// interfaces as switch ports (real ifindexes for the XDP context and the
// devmaps), the test switch's configuration, frames, and a fixture that
// loads the function with plain libbpf and configures it.
#pragma once

#include "L2Switch.h"
#include "NfTest.h"
#include "netns/VethPair.h"
#include "support/packet/Packet.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::nf::l2switch::testing {

using morpheus::nf::testing::NfProgram;
using morpheus::nf::testing::objectPath;
using morpheus::nf::testing::TempFile;
using morpheus::packet::Mac;
using morpheus::packet::PacketBuilder;
using morpheus::testing::Bytes;
using morpheus::testing::NetnsGuard;
using morpheus::testing::PinDir;
using morpheus::testing::RunResult;

// The namespace holding ports a1 a2 a3 t1 t2 (veths, their peers a1p...
// beside them), created
// once per test binary and deleted at its end.
class SwitchNetns : public ::testing::Environment {
public:
  static SwitchNetns &get();
  void SetUp() override;
  void TearDown() override;
  const std::string &name() const;
  uint32_t ifindex(const std::string &port) const { return indexes.at(port); }

private:
  std::unique_ptr<morpheus::testing::VethPair> pair;
  std::map<std::string, uint32_t> indexes;
};

// The test switch:
//   VLAN 10: a1 a2 untagged, t1 tagged
//   VLAN 20: a3 untagged, t1 t2 tagged
//   VLAN 30: t2 untagged (native), t1 tagged
//   VLAN 40: t2 tagged, no other member
extern const char PortsConfig[];

Mac host(uint8_t n); // 02:00:00:00:00:<n>
extern const Mac Broadcast;

// Ethernet (+ 802.1Q when `vlan`) + IPv4 + UDP.
Bytes frame(const Mac &dst, const Mac &src, std::optional<uint16_t> vlan = {},
            uint8_t pcp = 0);

using nf::testing::entriesOf;
std::map<l2sw_fdb_key, l2sw_fdb_entry> readFdbMap(int fdbFd);
l2sw_fdb_key fdbKey(const Mac &mac, uint16_t vlan);
uint64_t coarseNowNs(); // the data plane's clock

// One frame entering the switch.
struct Ingress {
  std::string description;
  std::string port;
  Bytes frame;
};

// FDB entries the semantic tests start from (host 1..6 on various ports),
// and frames that exercise every outcome from that state.
std::map<l2sw_fdb_key, l2sw_fdb_entry> baselineFdb(uint64_t lastSeenNs);
std::vector<Ingress> semanticCorpus();

// The switch loaded with plain libbpf in the test namespace, maps pinned in
// a fresh directory, configured with PortsConfig.
class SwitchTest : public ::testing::Test {
protected:
  void SetUp() override;

  uint32_t port(const std::string &name) const { return SwitchNetns::get().ifindex(name); }
  RunResult run(const Bytes &packet, const std::string &ingress);
  std::vector<uint64_t> stats();
  std::optional<l2sw_fdb_entry> fdbEntry(const Mac &mac, uint16_t vlan);
  void putFdb(const Mac &mac, uint16_t vlan, const std::string &port, uint64_t lastSeenNs,
              uint32_t flags = 0);
  // Runs `packet` and expects `verdict` and that the only outcome counted
  // is `outcome`.
  RunResult expectOutcome(const Bytes &packet, const std::string &ingress, uint32_t verdict,
                          l2sw_stat outcome);

  NetnsGuard netns{SwitchNetns::get().name()};
  PinDir pins{"l2switch"};
  NfProgram program{objectPath("l2switch"), pins.path()};
};

} // namespace morpheus::nf::l2switch::testing
