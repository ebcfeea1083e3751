// Packets for shadow validation's and the fuzzer's samples (runtime/
// PacketSamples) and for tests: a builder that writes valid Ethernet /
// 802.1Q / IPv4 / IPv6 / UDP / TCP / ICMP headers (checksums included) and
// can then be corrupted on purpose, and small readers for assertions.
// Multi-byte fields are given in host byte order and written in network
// order.
#pragma once

#include "support/Bytes.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

namespace morpheus::packet {

using morpheus::Bytes;
using Mac = std::array<uint8_t, 6>;

// For tests, which write addresses as literals: both throw on bad input, so
// product code never calls them (it parses with nf/common/ConfigFile).
Mac parseMac(const std::string &text);      // "02:00:00:00:00:01"
uint32_t parseIpv4(const std::string &text); // "10.0.0.1" -> host order

struct Ipv4Options {
  uint32_t saddr = 0x0a000001, daddr = 0x0a000002;
  uint8_t ttl = 64;
  uint8_t tos = 0;
  uint16_t id = 1;
  uint16_t fragment = 0;   // flags (DF 0x4000, MF 0x2000) | offset in 8-byte units
  uint8_t optionWords = 0; // extra 32-bit words of (NOP) options: IHL = 5 + this
};

struct Ipv6Options {
  std::array<uint8_t, 16> saddr{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1};
  std::array<uint8_t, 16> daddr{0xfd, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2};
  uint8_t hopLimit = 64;
};

// Builds a packet layer by layer; lengths and checksums are completed by
// build(). Each call appends one header.
class PacketBuilder {
public:
  PacketBuilder &ethernet(const Mac &dst, const Mac &src, uint16_t etherType = 0);
  PacketBuilder &vlan(uint16_t vid, uint8_t pcp = 0, uint16_t tpid = 0x8100);
  PacketBuilder &ipv4(const Ipv4Options &options = {});
  PacketBuilder &ipv6(const Ipv6Options &options = {});
  PacketBuilder &udp(uint16_t sport, uint16_t dport);
  PacketBuilder &tcp(uint16_t sport, uint16_t dport, uint8_t flags = 0x02 /* SYN */,
                     uint32_t seq = 1, uint32_t ack = 0);
  PacketBuilder &icmpEcho(uint16_t id, uint16_t sequence, bool reply = false);
  PacketBuilder &payload(size_t bytes, uint8_t seed = 1);
  PacketBuilder &payload(const Bytes &bytes);

  // Fills in lengths, EtherTypes left 0 and checksums (IPv4 header, UDP,
  // TCP, ICMP), and returns the bytes.
  Bytes build() const;

private:
  enum class Layer { Ethernet, Vlan, Ipv4, Ipv6, Udp, Tcp, Icmp, Payload };
  struct Header {
    Layer layer;
    size_t offset;
  };
  Bytes bytes;
  std::vector<Header> headers;
};

// Internet checksum of `length` bytes at `data`, folded and inverted.
uint16_t internetChecksum(const uint8_t *data, size_t length, uint32_t initial = 0);

// Readers for assertions on output packets (network order -> host order).
uint16_t read16(const Bytes &bytes, size_t offset);
uint32_t read32(const Bytes &bytes, size_t offset);
// Whether the IPv4 header at `offset` has a valid checksum.
bool ipv4ChecksumValid(const Bytes &bytes, size_t offset);
// Whether the UDP/TCP/ICMP checksum of the IPv4 packet at `ipOffset` is
// valid (a UDP checksum of 0 counts as valid: "no checksum").
bool l4ChecksumValid(const Bytes &bytes, size_t ipOffset);

} // namespace morpheus::packet
