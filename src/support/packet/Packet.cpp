#include "support/packet/Packet.h"

#include <cstdio>
#include <optional>
#include <stdexcept>

namespace morpheus::packet {

namespace {

void put16(Bytes &bytes, size_t at, uint16_t value) {
  bytes[at] = value >> 8;
  bytes[at + 1] = value & 0xff;
}

void put32(Bytes &bytes, size_t at, uint32_t value) {
  put16(bytes, at, value >> 16);
  put16(bytes, at + 2, value & 0xffff);
}

uint32_t partialSum(const uint8_t *data, size_t length, uint32_t sum) {
  for (size_t i = 0; i + 1 < length; i += 2)
    sum += (data[i] << 8) | data[i + 1];
  if (length % 2)
    sum += data[length - 1] << 8;
  return sum;
}

uint16_t finish(uint32_t sum) {
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return ~sum & 0xffff;
}

} // namespace

Mac parseMac(const std::string &text) {
  Mac mac{};
  unsigned parts[6];
  char extra;
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &parts[0], &parts[1], &parts[2],
                  &parts[3], &parts[4], &parts[5], &extra) != 6)
    throw std::invalid_argument("bad MAC address '" + text + "'");
  for (int i = 0; i < 6; ++i) {
    if (parts[i] > 0xff)
      throw std::invalid_argument("bad MAC address '" + text + "'");
    mac[i] = parts[i];
  }
  return mac;
}

uint32_t parseIpv4(const std::string &text) {
  unsigned a, b, c, d;
  char extra;
  if (std::sscanf(text.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &extra) != 4 || a > 255 ||
      b > 255 || c > 255 || d > 255)
    throw std::invalid_argument("bad IPv4 address '" + text + "'");
  return (a << 24) | (b << 16) | (c << 8) | d;
}

PacketBuilder &PacketBuilder::ethernet(const Mac &dst, const Mac &src, uint16_t etherType) {
  headers.push_back({Layer::Ethernet, bytes.size()});
  bytes.insert(bytes.end(), dst.begin(), dst.end());
  bytes.insert(bytes.end(), src.begin(), src.end());
  bytes.resize(bytes.size() + 2);
  put16(bytes, bytes.size() - 2, etherType);
  return *this;
}

PacketBuilder &PacketBuilder::vlan(uint16_t vid, uint8_t pcp, uint16_t tpid) {
  // The 802.1Q tag sits where the EtherType was: TPID, TCI, then the inner
  // EtherType (filled in by build()).
  size_t at = bytes.size() - 2;
  headers.push_back({Layer::Vlan, at});
  bytes.resize(bytes.size() + 4);
  put16(bytes, at, tpid);
  put16(bytes, at + 2, uint16_t(pcp << 13) | (vid & 0x0fff));
  put16(bytes, at + 4, 0);
  return *this;
}

PacketBuilder &PacketBuilder::ipv4(const Ipv4Options &options) {
  size_t at = bytes.size();
  headers.push_back({Layer::Ipv4, at});
  size_t length = 20 + options.optionWords * 4;
  bytes.resize(at + length, 0);
  bytes[at] = 0x40 | (5 + options.optionWords);
  bytes[at + 1] = options.tos;
  put16(bytes, at + 4, options.id);
  put16(bytes, at + 6, options.fragment);
  bytes[at + 8] = options.ttl;
  put32(bytes, at + 12, options.saddr);
  put32(bytes, at + 16, options.daddr);
  for (size_t i = at + 20; i < at + length; ++i)
    bytes[i] = 1; // NOP options
  return *this;
}

PacketBuilder &PacketBuilder::ipv6(const Ipv6Options &options) {
  size_t at = bytes.size();
  headers.push_back({Layer::Ipv6, at});
  bytes.resize(at + 40, 0);
  bytes[at] = 0x60;
  bytes[at + 7] = options.hopLimit;
  std::copy(options.saddr.begin(), options.saddr.end(), bytes.begin() + at + 8);
  std::copy(options.daddr.begin(), options.daddr.end(), bytes.begin() + at + 24);
  return *this;
}

PacketBuilder &PacketBuilder::udp(uint16_t sport, uint16_t dport) {
  size_t at = bytes.size();
  headers.push_back({Layer::Udp, at});
  bytes.resize(at + 8, 0);
  put16(bytes, at, sport);
  put16(bytes, at + 2, dport);
  return *this;
}

PacketBuilder &PacketBuilder::tcp(uint16_t sport, uint16_t dport, uint8_t flags,
                                  uint32_t seq, uint32_t ack) {
  size_t at = bytes.size();
  headers.push_back({Layer::Tcp, at});
  bytes.resize(at + 20, 0);
  put16(bytes, at, sport);
  put16(bytes, at + 2, dport);
  put32(bytes, at + 4, seq);
  put32(bytes, at + 8, ack);
  bytes[at + 12] = 5 << 4;
  bytes[at + 13] = flags;
  put16(bytes, at + 14, 65535);
  return *this;
}

PacketBuilder &PacketBuilder::icmpEcho(uint16_t id, uint16_t sequence, bool reply) {
  size_t at = bytes.size();
  headers.push_back({Layer::Icmp, at});
  bytes.resize(at + 8, 0);
  bytes[at] = reply ? 0 : 8;
  put16(bytes, at + 4, id);
  put16(bytes, at + 6, sequence);
  return *this;
}

PacketBuilder &PacketBuilder::payload(size_t length, uint8_t seed) {
  Bytes data(length);
  for (size_t i = 0; i < length; ++i)
    data[i] = uint8_t(seed + i * 7);
  return payload(data);
}

PacketBuilder &PacketBuilder::payload(const Bytes &data) {
  headers.push_back({Layer::Payload, bytes.size()});
  bytes.insert(bytes.end(), data.begin(), data.end());
  return *this;
}

Bytes PacketBuilder::build() const {
  Bytes out = bytes;
  auto etherTypeOf = [](Layer layer) -> uint16_t {
    return layer == Layer::Ipv4 ? 0x0800 : layer == Layer::Ipv6 ? 0x86dd
                                         : layer == Layer::Vlan ? 0x8100 : 0;
  };
  auto protocolOf = [](Layer layer) -> uint8_t {
    return layer == Layer::Udp ? 17 : layer == Layer::Tcp ? 6 : layer == Layer::Icmp ? 1 : 59;
  };
  // First every length and type field, then the checksums that cover them,
  // innermost first (the IPv4 header checksum does not cover its payload,
  // but the L4 pseudo-header covers IPv4 fields).
  for (size_t i = 0; i < headers.size(); ++i) {
    size_t at = headers[i].offset;
    std::optional<Layer> next;
    if (i + 1 < headers.size())
      next = headers[i + 1].layer;
    switch (headers[i].layer) {
    case Layer::Ethernet:
    case Layer::Vlan: {
      size_t typeAt = headers[i].layer == Layer::Ethernet ? at + 12 : at + 4;
      if (next && read16(out, typeAt) == 0)
        put16(out, typeAt, etherTypeOf(*next));
      break;
    }
    case Layer::Ipv4:
      put16(out, at + 2, out.size() - at);
      if (next && out[at + 9] == 0)
        out[at + 9] = protocolOf(*next);
      break;
    case Layer::Ipv6:
      put16(out, at + 4, out.size() - at - 40);
      if (next && out[at + 6] == 0)
        out[at + 6] = protocolOf(*next);
      break;
    case Layer::Udp:
      put16(out, at + 4, out.size() - at);
      break;
    default:
      break;
    }
  }
  for (size_t i = headers.size(); i-- > 0;) {
    size_t at = headers[i].offset;
    Layer layer = headers[i].layer;
    if (layer == Layer::Ipv4) {
      put16(out, at + 10, 0);
      put16(out, at + 10, internetChecksum(&out[at], (out[at] & 0xf) * 4));
    } else if (layer == Layer::Icmp) {
      put16(out, at + 2, 0);
      put16(out, at + 2, internetChecksum(&out[at], out.size() - at));
    } else if (layer == Layer::Udp || layer == Layer::Tcp) {
      size_t checksumAt = at + (layer == Layer::Udp ? 6 : 16);
      size_t length = out.size() - at;
      uint32_t pseudo = 0;
      if (i > 0 && headers[i - 1].layer == Layer::Ipv4) {
        size_t ip = headers[i - 1].offset;
        pseudo = partialSum(&out[ip + 12], 8, 0) + out[ip + 9] + length;
      } else if (i > 0 && headers[i - 1].layer == Layer::Ipv6) {
        size_t ip = headers[i - 1].offset;
        pseudo = partialSum(&out[ip + 8], 32, 0) + out[ip + 6] + length;
      }
      put16(out, checksumAt, 0);
      uint16_t checksum = internetChecksum(&out[at], length, pseudo);
      if (layer == Layer::Udp && checksum == 0)
        checksum = 0xffff; // 0 would mean "no checksum"
      put16(out, checksumAt, checksum);
    }
  }
  return out;
}

uint16_t internetChecksum(const uint8_t *data, size_t length, uint32_t initial) {
  return finish(partialSum(data, length, initial));
}

uint16_t read16(const Bytes &bytes, size_t offset) {
  return uint16_t(bytes.at(offset) << 8 | bytes.at(offset + 1));
}

uint32_t read32(const Bytes &bytes, size_t offset) {
  return uint32_t(read16(bytes, offset)) << 16 | read16(bytes, offset + 2);
}

bool ipv4ChecksumValid(const Bytes &bytes, size_t offset) {
  size_t length = (bytes.at(offset) & 0xf) * 4;
  if (offset + length > bytes.size())
    return false;
  return internetChecksum(&bytes[offset], length) == 0;
}

bool l4ChecksumValid(const Bytes &bytes, size_t ip) {
  size_t headerLength = (bytes.at(ip) & 0xf) * 4;
  size_t l4 = ip + headerLength;
  size_t length = read16(bytes, ip + 2) - headerLength;
  uint8_t protocol = bytes.at(ip + 9);
  if (l4 + length > bytes.size())
    return false;
  if (protocol == 17 && read16(bytes, l4 + 6) == 0)
    return true;
  if (protocol == 1) // ICMP has no pseudo-header
    return internetChecksum(&bytes[l4], length) == 0;
  uint32_t pseudo = partialSum(&bytes[ip + 12], 8, 0) + protocol + length;
  return internetChecksum(&bytes[l4], length, pseudo) == 0;
}

} // namespace morpheus::packet
