// What the firewall tests share: the firewall loaded with plain libbpf in a
// fresh pin directory, rule files, packets built from 5-tuples, and the
// reference classifier every verdict is checked against.
#pragma once

#include "Loader.h"
#include "NfTest.h"
#include "support/packet/Packet.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

namespace morpheus::nf::firewall::testing {

using morpheus::nf::testing::NfProgram;
using morpheus::testing::Bytes;
using morpheus::testing::PinDir;
using morpheus::testing::RunResult;

constexpr uint8_t Tcp = 6, Udp = 17, Icmp = 1, Gre = 47, Esp = 50;
constexpr uint32_t XdpDrop = 1, XdpPass = 2;

// What the reference classifier looks at.
struct Tuple {
  uint32_t saddr = 0x0a000001, daddr = 0x0a000002; // host order
  uint8_t protocol = Tcp;
  uint16_t sport = 40000, dport = 80;
  uint16_t fragment = 0; // IPv4 flags | offset: a non-zero offset hides the ports

  bool hasPorts() const { return (protocol == Tcp || protocol == Udp) && !(fragment & 0x1fff); }
};

// Ethernet + IPv4 (+ `optionWords` of NOP options) + the L4 header of the
// protocol (TCP, UDP, ICMP echo; 4 bytes of GRE; else 8 payload bytes).
Bytes packetFor(const Tuple &tuple, uint8_t optionWords = 0);

// The rule that must decide `tuple` (first match, in order), or
// rules.size() when none does. Written from the format's definition,
// sharing nothing with the data plane's tables.
size_t referenceMatch(const std::vector<Rule> &rules, const Tuple &tuple);

std::string configPath(const std::string &name); // nf/firewall/configs/<name>
std::vector<Rule> rulesFromConfig(const std::string &name);

// A rule file with `text`, removed afterwards.
class RuleFile : public nf::testing::TempFile {
public:
  explicit RuleFile(const std::string &text) : TempFile("rules.txt", text) {}
  std::vector<Rule> rules() const; // parsed; fails the test on an error
};

// Packets that mostly fall inside the rules' fields (a random rule's
// prefixes, protocol and ports, sometimes combined with another rule's, port
// edges included) and sometimes nowhere near them.
std::vector<Tuple> tuplesFor(const std::vector<Rule> &rules, size_t count, uint32_t seed);

// The firewall as an operator loads it without Morpheus.
class Firewall {
public:
  Firewall();
  bool ok() const { return program.ok(); }
  const std::string &pinDir() const { return pins.path(); }
  int mapFd(const std::string &name) const { return program.mapFd(name); }
  int programFd() const { return program.programFd(); }

  void load(const std::vector<Rule> &rules, const LoadOptions &options = {});
  RunResult run(const Bytes &packet) const { return program.run(packet); }

  fw_config config() const;
  // The live generation's counter of rule `index` (FW_DEFAULT_SLOT: default).
  uint64_t hits(uint32_t index) const;
  uint64_t stat(fw_stat which) const;

  // Runs `tuple`'s packet and expects the reference's verdict, counted in
  // the reference's rule slot, and the packet untouched.
  void expectReference(const std::vector<Rule> &rules, const Tuple &tuple);

private:
  PinDir pins;
  NfProgram program;
};

// The sum over CPUs of entry `index` of a per-CPU u64 array.
uint64_t perCpuValue(int mapFd, uint32_t index);

std::string describe(const Tuple &tuple);

} // namespace morpheus::nf::firewall::testing
