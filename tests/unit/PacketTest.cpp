#include "support/packet/Packet.h"

#include <gtest/gtest.h>

namespace morpheus::packet {
namespace {

const Mac Dst = parseMac("02:00:00:00:00:02"), Src = parseMac("02:00:00:00:00:01");

TEST(Packet, UdpOverIpv4HasValidLengthsAndChecksums) {
  Bytes packet = PacketBuilder().ethernet(Dst, Src).ipv4({}).udp(1234, 53).payload(11).build();
  ASSERT_EQ(packet.size(), 14u + 20 + 8 + 11);
  EXPECT_EQ(read16(packet, 12), 0x0800);
  EXPECT_EQ(packet[14 + 9], 17);
  EXPECT_EQ(read16(packet, 14 + 2), 20 + 8 + 11);
  EXPECT_EQ(read16(packet, 34 + 4), 8 + 11);
  EXPECT_TRUE(ipv4ChecksumValid(packet, 14));
  EXPECT_TRUE(l4ChecksumValid(packet, 14));
  packet[50] ^= 1; // corrupt the payload
  EXPECT_FALSE(l4ChecksumValid(packet, 14));
}

TEST(Packet, TcpWithOptionsBehindVlanTag) {
  Ipv4Options ip;
  ip.optionWords = 2;
  Bytes packet = PacketBuilder().ethernet(Dst, Src).vlan(42, 3).ipv4(ip).tcp(80, 8080).build();
  EXPECT_EQ(read16(packet, 12), 0x8100);
  EXPECT_EQ(read16(packet, 14) & 0x0fff, 42);
  EXPECT_EQ(read16(packet, 14) >> 13, 3);
  EXPECT_EQ(read16(packet, 16), 0x0800);
  EXPECT_EQ(packet[18] & 0xf, 7);
  EXPECT_TRUE(ipv4ChecksumValid(packet, 18));
  EXPECT_TRUE(l4ChecksumValid(packet, 18));
}

TEST(Packet, IcmpEchoAndIpv6) {
  Bytes echo = PacketBuilder().ethernet(Dst, Src).ipv4({}).icmpEcho(7, 1).payload(8).build();
  EXPECT_EQ(internetChecksum(&echo[34], echo.size() - 34), 0);
  Bytes v6 = PacketBuilder().ethernet(Dst, Src).ipv6({}).udp(1, 2).build();
  EXPECT_EQ(read16(v6, 12), 0x86dd);
  EXPECT_EQ(v6[14 + 6], 17);
  EXPECT_EQ(read16(v6, 14 + 4), 8);
}

TEST(Packet, ParsersRejectGarbage) {
  EXPECT_EQ(parseIpv4("10.1.2.3"), 0x0a010203u);
  EXPECT_THROW(parseIpv4("10.1.2.256"), std::invalid_argument);
  EXPECT_THROW(parseIpv4("10.1.2"), std::invalid_argument);
  EXPECT_THROW(parseMac("02:00:00:00:00"), std::invalid_argument);
}

} // namespace
} // namespace morpheus::packet
