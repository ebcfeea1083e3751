// What the lb tests share: the function loaded with plain libbpf and its
// maps pinned in a throw-away directory, configuration files, packets of
// given flows, and the expected real of a flow computed independently of
// the data plane (from the config and our Maglev implementation).
#pragma once

#include "LbConfig.h"
#include "LbLoader.h"
#include "NfTest.h"
#include "support/packet/Packet.h"

#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <netinet/in.h>

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

extern "C" {
#include "lb.h"
}

namespace morpheus::nf::lb::testing {

using morpheus::testing::RunResult;
using nf::testing::TempFile;
using packet::Bytes;

inline const packet::Mac ClientMac = {0x02, 0, 0, 0, 0, 0x01};
inline const packet::Mac OurMac = {0x02, 0, 0, 0, 0, 0x02};
inline const packet::Mac GatewayMac = {0x02, 0, 0, 0, 0, 0xfe};
inline constexpr uint32_t LbSource = 0x0aff0001; // 10.255.0.1
inline constexpr size_t IpipOverhead = 20, GueOverhead = 28;

// VIPs of BaseConfig, host order.
inline constexpr uint32_t WebVip = 0x0a000001;  // 10.0.0.1:80/tcp, 3 reals, one weight 2
inline constexpr uint32_t DnsVip = 0x0a000002;  // 10.0.0.2:53/udp, 10.2.0.2 is GUE
inline constexpr uint32_t QuicVip = 0x0a000003; // 10.0.0.3:443/udp quic
inline constexpr uint32_t DarkVip = 0x0a000004; // 10.0.0.4:80/tcp, only a weight-0 real

std::string baseConfig();
// `text` with the first `from` replaced by `to` (a test failure if absent).
std::string replaced(std::string text, const std::string &from, const std::string &to);

struct Flow {
  uint32_t saddr = 0xc0a80001; // 192.168.0.1
  uint16_t sport = 40000;
  uint32_t daddr = WebVip;
  uint16_t dport = 80;
  uint8_t proto = IPPROTO_TCP;
};

struct Shape {
  Bytes payload;
  uint16_t fragment = 0;
  uint8_t optionWords = 0;
  uint8_t ttl = 64;
  uint8_t tos = 0;
  uint8_t tcpFlags = 0x02; // SYN
};

Bytes packetOf(const Flow &flow, const Shape &shape = {});
lb_flow_key flowKey(const Flow &flow);

// QUIC UDP payloads whose destination connection id starts with `cid`.
Bytes quicShort(const Bytes &cid);
Bytes quicLong(uint32_t version, uint8_t type, const Bytes &dcid);
// The first two bytes of a connection id naming `realIndex` (lb.h).
Bytes routableCid(uint32_t realIndex);

// The function loaded from build/nf/lb.bpf.o, maps pinned in a fresh dir.
class LbProgram {
public:
  LbProgram();
  bool ok() const { return program.ok(); }
  const std::string &pinDir() const { return pins.path(); }
  nf::testing::NfProgram &nf() { return program; }

  RunResult run(const Bytes &packet) const { return program.run(packet); }
  // Loads `text` as a config file; fails the test on error.
  void load(const std::string &text);

private:
  morpheus::testing::PinDir pins{"lb"};
  nf::testing::NfProgram program;
};

// Reading the maps by fd (those of an NfProgram or of a Morpheus Optimizer).
class MapView {
public:
  using FdOf = std::function<int(const std::string &)>;
  explicit MapView(FdOf fdOf) : fdOf(std::move(fdOf)) {}

  uint32_t realIndexOf(uint32_t address) const; // 0 if absent
  lb_real real(uint32_t index) const;
  std::optional<lb_vip> vip(uint32_t address, uint16_t port, uint8_t proto) const;
  uint32_t ringSlot(uint32_t vipIndex, uint32_t slot) const;
  std::vector<uint32_t> ring(uint32_t vipIndex) const;
  // Every entry as raw bytes, key order: what "nothing changed" compares.
  std::map<Bytes, Bytes> entries(const std::string &map) const;
  std::optional<lb_flow> flow(const Flow &flow) const;
  size_t flowCount() const;
  void forgetFlow(const Flow &flow) const;
  void clearFlows() const;
  std::vector<uint64_t> events() const;
  lb_vip_counters vipCounters(uint32_t vipIndex) const;
  lb_config config() const;

  // The real index our Maglev implementation gives `flow` under `config`'s
  // VIP, with the real indexes the loader assigned.
  uint32_t expectedReal(const LbConfig &config, const Flow &flow) const;

private:
  FdOf fdOf;
};

MapView viewOf(nf::testing::NfProgram &program);

LbConfig parsed(const std::string &text);

// Checks `result` is `input` encapsulated toward `realAddress`: verdict,
// the exact outer Ethernet/IPv4(/UDP) bytes, a valid outer checksum and the
// inner packet byte for byte.
void expectEncapsulated(const RunResult &result, const Bytes &input, uint32_t realAddress,
                        bool gue = false, uint32_t outerSource = LbSource, uint8_t ttl = 64);
// The real address an encapsulated output is sent to.
uint32_t outerDestination(const RunResult &result);

} // namespace morpheus::nf::lb::testing
