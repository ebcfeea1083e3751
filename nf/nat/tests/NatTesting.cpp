#include "NatTesting.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <algorithm>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::nat::testing {

using packet::read16;
using packet::read32;

namespace {

void put16(Bytes &bytes, size_t at, uint16_t value) {
  bytes[at] = value >> 8;
  bytes[at + 1] = value & 0xff;
}

void fixIpChecksum(Bytes &bytes) {
  put16(bytes, IpOffset + 10, 0);
  size_t length = (bytes[IpOffset] & 0xf) * 4;
  put16(bytes, IpOffset + 10, packet::internetChecksum(&bytes[IpOffset], length));
}

void setTtl(Bytes &bytes, uint8_t ttl) {
  bytes[IpOffset + 8] = ttl;
  fixIpChecksum(bytes);
}

bool isEcho(L4 l4) { return l4 == L4::EchoRequest || l4 == L4::EchoReply; }

std::unique_ptr<morpheus::testing::VethPair> topology;

} // namespace

Bytes build(const Frame &frame) {
  packet::PacketBuilder builder;
  builder.ethernet(frame.dst, frame.src);
  packet::Ipv4Options ip;
  ip.saddr = frame.saddr;
  ip.daddr = frame.daddr;
  ip.ttl = frame.ttl;
  ip.fragment = frame.fragment;
  ip.optionWords = frame.optionWords;
  builder.ipv4(ip);
  switch (frame.l4) {
  case L4::Tcp:
    builder.tcp(frame.sport, frame.dport, frame.tcpFlags);
    break;
  case L4::Udp:
    builder.udp(frame.sport, frame.dport);
    break;
  case L4::EchoRequest:
  case L4::EchoReply:
    builder.icmpEcho(frame.sport, 1, frame.l4 == L4::EchoReply);
    break;
  case L4::Gre:
    break;
  }
  if (frame.payloadBytes.empty())
    builder.payload(frame.payload, frame.payloadSeed);
  else
    builder.payload(frame.payloadBytes);
  Bytes bytes = builder.build();
  if (frame.l4 == L4::Gre) {
    bytes[IpOffset + 9] = 47;
    fixIpChecksum(bytes);
  }
  return bytes;
}

void zeroUdpChecksum(Bytes &bytes) { put16(bytes, L4Offset + 6, 0); }

Frame leaving(Frame sent, uint16_t externalPort, const EtherAddress &outsideMac) {
  sent.src = outsideMac;
  sent.dst = NextHopMac;
  sent.saddr = External;
  sent.sport = externalPort;
  sent.ttl -= 1;
  return sent;
}

Frame answer(const Frame &left, const EtherAddress &outsideMac) {
  Frame reply = left;
  reply.src = NextHopMac;
  reply.dst = outsideMac;
  reply.saddr = left.daddr;
  reply.daddr = left.saddr;
  if (!isEcho(left.l4)) {
    reply.sport = left.dport;
    reply.dport = left.sport;
  }
  if (left.l4 == L4::EchoRequest)
    reply.l4 = L4::EchoReply;
  reply.tcpFlags = left.tcpFlags & 0x02 ? 0x12 : 0x10;
  reply.ttl = 57;
  reply.payloadSeed = 9;
  return reply;
}

Frame delivered(Frame reply, const Frame &sent) {
  reply.src = sent.dst;
  reply.dst = sent.src;
  reply.daddr = sent.saddr;
  (isEcho(reply.l4) ? reply.sport : reply.dport) = sent.sport;
  reply.ttl -= 1;
  return reply;
}

Bytes answerTo(const Bytes &left) {
  Frame frame;
  std::copy(left.begin(), left.begin() + 6, frame.dst.begin());
  std::copy(left.begin() + 6, left.begin() + 12, frame.src.begin());
  frame.saddr = read32(left, IpOffset + 12);
  frame.daddr = read32(left, IpOffset + 16);
  size_t headers = 20;
  switch (left.at(IpOffset + 9)) {
  case 6:
    frame.l4 = L4::Tcp;
    frame.tcpFlags = left.at(L4Offset + 13);
    headers += 20;
    break;
  case 17:
    frame.l4 = L4::Udp;
    headers += 8;
    break;
  default:
    frame.l4 = left.at(L4Offset) == 8 ? L4::EchoRequest : L4::EchoReply;
    headers += 8;
    break;
  }
  if (isEcho(frame.l4)) {
    frame.sport = read16(left, L4Offset + 4);
  } else {
    frame.sport = read16(left, L4Offset);
    frame.dport = read16(left, L4Offset + 2);
  }
  frame.payload = read16(left, IpOffset + 2) - headers;
  return build(answer(frame, frame.src));
}

namespace {

class TopologyEnvironment : public ::testing::Environment {
  void SetUp() override {
    morpheus::testing::VethPair::sweepStale("nat");
    topology = std::make_unique<morpheus::testing::VethPair>("nat");
  }
  void TearDown() override { topology.reset(); }
};

const auto *const environment = ::testing::AddGlobalTestEnvironment(new TopologyEnvironment);

} // namespace

const std::string &Topology::netns() { return topology->nsA(); }
uint32_t Topology::outsideIfindex() { return topology->ifindexA(); }
const std::string &Topology::outsideName() { return topology->ifA(); }
EtherAddress Topology::outsideMac() { return topology->macA(); }

std::string standardConfig(const std::string &ports) {
  return "# the test topology: lo is the inside port, the veth end the outside one\n"
         "inside 192.168.0.0/16\n"
         "inside 10.0.0.0/8\n"
         "external 203.0.113.7\n"
         "ports " +
         ports +
         "\n"
         "inside-port 1\n"
         "outside-port " +
         Topology::outsideName() + " next-hop=02:00:00:00:0f:fe\n";
}

namespace {

// In key byte order (rawEntries' order).
template <typename Key, typename Value> std::vector<std::pair<Key, Value>> entries(int fd) {
  std::vector<std::pair<Key, Value>> out;
  for (const auto &[key, value] : nf::testing::rawEntries(fd))
    out.emplace_back(fromBytes<Key>(key), fromBytes<Value>(value));
  return out;
}

void clear(int fd) {
  nat_flow_key key;
  while (bpf_map_get_next_key(fd, nullptr, &key) == 0)
    ASSERT_EQ(bpf_map_delete_elem(fd, &key), 0);
}

} // namespace

std::vector<std::pair<nat_flow_key, nat_binding>> outEntries(int fd) {
  return entries<nat_flow_key, nat_binding>(fd);
}

std::vector<std::pair<nat_flow_key, nat_origin>> inEntries(int fd) {
  return entries<nat_flow_key, nat_origin>(fd);
}

std::vector<uint64_t> stats(int fd) { return morpheus::testing::perCpuCounters(fd, NAT_STAT_MAX); }

void resetState(int outFd, int inFd, int statsFd) {
  clear(outFd);
  clear(inFd);
  std::vector<uint64_t> zeroes(libbpf_num_possible_cpus(), 0);
  for (uint32_t index = 0; index < NAT_STAT_MAX; ++index)
    ASSERT_EQ(bpf_map_update_elem(statsFd, &index, zeroes.data(), BPF_ANY), 0);
}

nat_flow_key flowKey(uint32_t addr, uint32_t remoteAddr, uint16_t port, uint16_t remotePort,
                     uint8_t proto) {
  nat_flow_key key = {};
  key.addr = htonl(addr);
  key.remote_addr = htonl(remoteAddr);
  key.port = htons(port);
  key.remote_port = htons(remotePort);
  key.proto = proto;
  return key;
}

std::vector<Case> malformedCases() {
  std::vector<Case> cases;
  auto add = [&](std::string name, Bytes packet) {
    cases.push_back({std::move(name), InsideIfindex, std::move(packet), NAT_STAT_MALFORMED});
  };
  Frame syn;
  Bytes badChecksum = build(syn);
  badChecksum[IpOffset + 10] ^= 0x01;
  add("bad ipv4 checksum", badChecksum);
  Bytes version = build(syn);
  version[IpOffset] = 0x65;
  add("ip version 6 in an ipv4 ethertype", version);
  Bytes shortIhl = build(syn);
  shortIhl[IpOffset] = 0x44;
  add("ihl 4", shortIhl);
  Bytes longTotal = build(syn);
  put16(longTotal, IpOffset + 2, longTotal.size() - IpOffset + 1);
  fixIpChecksum(longTotal);
  add("total length beyond the frame", longTotal);
  Bytes shortTotal = build(syn);
  put16(shortTotal, IpOffset + 2, 19);
  fixIpChecksum(shortTotal);
  add("total length below the header", shortTotal);
  Bytes badOffset = build(syn);
  badOffset[L4Offset + 12] = 0x40;
  add("tcp data offset 4", badOffset);

  // Cut at every length: with the IPv4 length as built (it then claims more
  // than the frame holds), and with it shrunk to fit (then the L4 header
  // itself is short).
  for (L4 l4 : {L4::Tcp, L4::Udp, L4::EchoRequest}) {
    Frame whole = syn;
    whole.l4 = l4;
    whole.payload = 0;
    Bytes full = build(whole);
    std::string protocol = l4 == L4::Tcp ? "tcp" : l4 == L4::Udp ? "udp" : "icmp";
    for (size_t length = 14; length < full.size(); ++length) {
      Bytes cut(full.begin(), full.begin() + length);
      add(protocol + " cut at " + std::to_string(length), cut);
      if (length >= L4Offset) {
        put16(cut, IpOffset + 2, length - IpOffset);
        fixIpChecksum(cut);
        add(protocol + " cut at " + std::to_string(length) + ", ip length fits", cut);
      }
    }
  }
  return cases;
}

std::vector<Case> untouchedCases(const EtherAddress &outsideMac) {
  uint32_t inside = InsideIfindex, outside = Topology::outsideIfindex();
  std::vector<Case> cases;
  auto add = [&](std::string name, uint32_t ifindex, Bytes packet, nat_stat counter) {
    cases.push_back({std::move(name), ifindex, std::move(packet), counter});
  };
  Frame syn, udp;
  udp.l4 = L4::Udp;

  Frame unmapped = answer(leaving(syn, 33333, outsideMac), outsideMac);
  add("tcp in without mapping", outside, build(unmapped), NAT_STAT_NO_MAPPING);
  Frame pingExternal = unmapped;
  pingExternal.l4 = L4::EchoRequest;
  add("icmp echo request in (to us)", outside, build(pingExternal), NAT_STAT_NO_MAPPING);
  Frame notExternal = unmapped;
  notExternal.daddr = 0xc6336463;
  add("tcp in to another address", outside, build(notExternal), NAT_STAT_NOT_NAT);
  add("tcp reply on the inside port", inside, build(unmapped), NAT_STAT_NOT_NAT);
  add("inside source on the outside port", outside, build(syn), NAT_STAT_NOT_NAT);
  Frame echoReplyOut = syn;
  echoReplyOut.l4 = L4::EchoReply;
  add("icmp echo reply from inside", inside, build(echoReplyOut), NAT_STAT_NOT_NAT);

  Frame internal = syn;
  internal.daddr = InsideServer;
  add("inside to inside", inside, build(internal), NAT_STAT_NOT_NAT);
  Frame hairpin = syn;
  hairpin.daddr = External;
  add("inside to our external address", inside, build(hairpin), NAT_STAT_NOT_NAT);
  Frame multicast = udp;
  multicast.dst = {0x01, 0x00, 0x5e, 0x00, 0x00, 0xfb};
  multicast.daddr = 0xe00000fb;
  add("multicast from inside", inside, build(multicast), NAT_STAT_NOT_NAT);
  Frame stranger = syn;
  stranger.saddr = 0xac100001; // 172.16.0.1: not an inside prefix
  add("non-inside source from inside", inside, build(stranger), NAT_STAT_NOT_NAT);
  Frame gre = syn;
  gre.l4 = L4::Gre;
  add("gre from inside", inside, build(gre), NAT_STAT_NOT_NAT);
  add("ipv6", inside,
      packet::PacketBuilder()
          .ethernet(NatInsideMac, InsideHostMac)
          .ipv6()
          .tcp(40000, 80)
          .payload(16)
          .build(),
      NAT_STAT_NOT_NAT);
  add("vlan", inside,
      packet::PacketBuilder()
          .ethernet(NatInsideMac, InsideHostMac)
          .vlan(10)
          .ipv4({InsideHost, Remote})
          .tcp(40000, 80)
          .payload(16)
          .build(),
      NAT_STAT_NOT_NAT);
  add("arp", inside,
      packet::PacketBuilder()
          .ethernet({0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, InsideHostMac, 0x0806)
          .payload(28)
          .build(),
      NAT_STAT_NOT_NAT);

  for (uint16_t fragment : {0x2000, 0x0010, 0x2010}) {
    Frame piece = udp;
    piece.fragment = fragment;
    add("fragment " + std::to_string(fragment), inside, build(piece), NAT_STAT_FRAGMENT);
  }
  Frame options = syn;
  options.optionWords = 1;
  add("ip options", inside, build(options), NAT_STAT_IP_OPTIONS);
  for (uint8_t ttl : {1, 0}) {
    Frame expiring = syn;
    expiring.ttl = ttl;
    add("ttl " + std::to_string(ttl) + " out", inside, build(expiring), NAT_STAT_TTL_EXPIRED);
  }
  return cases;
}

std::vector<Step> corpus(const EtherAddress &outsideMac) {
  uint32_t inside = InsideIfindex, outside = Topology::outsideIfindex();
  std::vector<Step> steps;
  auto add = [&](std::string name, uint32_t ifindex, Bytes packet) {
    steps.push_back({std::move(name), ifindex, std::move(packet)});
    return int(steps.size() - 1);
  };
  auto reply = [&](std::string name, int to, void (*edit)(Bytes &) = nullptr) {
    steps.push_back({std::move(name), outside, {}, to, edit});
  };

  Frame syn;
  int synStep = add("tcp syn out", inside, build(syn));
  reply("tcp syn-ack in", synStep);
  Frame ack = syn;
  ack.tcpFlags = 0x10;
  ack.payload = 100;
  reply("tcp data in", add("tcp ack out (same flow)", inside, build(ack)));
  Frame second = syn;
  second.sport = 40001;
  reply("tcp second flow reply", add("tcp second flow out", inside, build(second)));
  Frame otherHost = syn;
  otherHost.saddr = OtherInsideHost;
  otherHost.src = {0x02, 0, 0, 0, 0x00, 0x0b};
  reply("tcp other host reply", add("tcp other inside host out", inside, build(otherHost)));
  Frame toOtherRemote = syn;
  toOtherRemote.daddr = OtherRemote;
  reply("tcp other remote reply", add("tcp other remote out", inside, build(toOtherRemote)));

  Frame udp;
  udp.l4 = L4::Udp;
  udp.sport = 5353;
  udp.dport = 53;
  int udpStep = add("udp out", inside, build(udp));
  reply("udp in", udpStep);
  Bytes zeroed = build(udp);
  zeroUdpChecksum(zeroed);
  add("udp zero checksum out", inside, zeroed);
  reply("udp zero checksum in", udpStep, zeroUdpChecksum);

  Frame echo;
  echo.l4 = L4::EchoRequest;
  echo.sport = 0x1234;
  int echoStep = add("icmp echo request out", inside, build(echo));
  reply("icmp echo reply in", echoStep);

  for (Case &c : untouchedCases(outsideMac))
    add(c.name, c.ifindex, std::move(c.packet));
  Frame dontFragment = udp;
  dontFragment.fragment = 0x4000;
  add("don't-fragment flag only", inside, build(dontFragment));
  reply("ttl 1 in", synStep, [](Bytes &bytes) { setTtl(bytes, 1); });
  Frame expiring = syn;
  expiring.ttl = 2;
  add("ttl 2 out", inside, build(expiring));
  for (Case &c : malformedCases())
    add(c.name, c.ifindex, std::move(c.packet));
  return steps;
}

Bytes packetOf(const Step &step, const std::vector<RunResult> &earlier) {
  if (step.answers < 0)
    return step.packet;
  Bytes packet = answerTo(earlier.at(step.answers).output);
  if (step.edit)
    step.edit(packet);
  return packet;
}

void NatTest::SetUp() {
  inNamespace.emplace(Topology::netns());
  pins = std::make_unique<morpheus::testing::PinDir>("nat");
  program = std::make_unique<nf::testing::NfProgram>(nf::testing::objectPath("nat"),
                                                     pins->path());
  ASSERT_TRUE(program->ok());
}

void NatTest::configure(const std::string &text) {
  TempFile file(text);
  Error err = loadConfig(file.path(), pins->path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
}

uint16_t NatTest::open(const Frame &sent) {
  RunResult result = runOut(build(sent));
  EXPECT_EQ(result.verdict, XDP_REDIRECT) << morpheus::hexDump(result.output);
  if (result.output.size() < L4Offset + 8)
    return 0;
  return read16(result.output, L4Offset + (isEcho(sent.l4) ? 4 : 0));
}

} // namespace morpheus::nf::nat::testing
