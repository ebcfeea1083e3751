#include "LbTestSupport.h"

#include "Maglev.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>

#include <cstring>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::lb::testing {

std::string baseConfig() {
  return "# the test balancer\n"
         "source 10.255.0.1\n"
         "gateway 02:00:00:00:00:fe\n"
         "vip 10.0.0.1:80/tcp\n"
         "real 10.1.0.1\n"
         "real 10.1.0.2\n"
         "real 10.1.0.3 weight=2\n"
         "vip 10.0.0.2:53/udp\n"
         "real 10.2.0.1\n"
         "real 10.2.0.2 gue\n"
         "vip 10.0.0.3:443/udp quic\n"
         "real 10.3.0.1\n"
         "real 10.3.0.2\n"
         "real 10.3.0.3\n"
         "vip 10.0.0.4:80/tcp\n"
         "real 10.4.0.1 weight=0\n";
}

std::string replaced(std::string text, const std::string &from, const std::string &to) {
  auto at = text.find(from);
  EXPECT_NE(at, std::string::npos) << "'" << from << "' not in the config";
  return at == std::string::npos ? text : text.replace(at, from.size(), to);
}

Bytes packetOf(const Flow &flow, const Shape &shape) {
  packet::PacketBuilder builder;
  builder.ethernet(OurMac, ClientMac);
  packet::Ipv4Options ip;
  ip.saddr = flow.saddr;
  ip.daddr = flow.daddr;
  ip.ttl = shape.ttl;
  ip.tos = shape.tos;
  ip.fragment = shape.fragment;
  ip.optionWords = shape.optionWords;
  builder.ipv4(ip);
  if (flow.proto == IPPROTO_TCP)
    builder.tcp(flow.sport, flow.dport, shape.tcpFlags);
  else if (flow.proto == IPPROTO_UDP)
    builder.udp(flow.sport, flow.dport);
  else
    builder.icmpEcho(1, 1);
  if (!shape.payload.empty())
    builder.payload(shape.payload);
  return builder.build();
}

lb_flow_key flowKey(const Flow &flow) {
  lb_flow_key key = {};
  key.saddr = htonl(flow.saddr);
  key.daddr = htonl(flow.daddr);
  key.sport = htons(flow.sport);
  key.dport = htons(flow.dport);
  key.proto = flow.proto;
  return key;
}

Bytes quicShort(const Bytes &cid) {
  Bytes payload = {0x40}; // fixed bit, short header
  payload.insert(payload.end(), cid.begin(), cid.end());
  payload.resize(payload.size() + 24, 0xaa); // packet number and protected payload
  return payload;
}

Bytes quicLong(uint32_t version, uint8_t type, const Bytes &dcid) {
  Bytes payload = {uint8_t(0xc0 | (type << 4)), uint8_t(version >> 24), uint8_t(version >> 16),
                   uint8_t(version >> 8),       uint8_t(version),       uint8_t(dcid.size())};
  payload.insert(payload.end(), dcid.begin(), dcid.end());
  payload.push_back(8); // source connection id
  payload.resize(payload.size() + 8 + 40, 0x55);
  return payload;
}

Bytes routableCid(uint32_t realIndex) {
  uint16_t word = LB_QUIC_CID_TAG | (realIndex & LB_QUIC_CID_REAL_MASK);
  return {uint8_t(word >> 8), uint8_t(word), 0x11, 0x22, 0x33, 0x44, 0x55, 0x66};
}

LbProgram::LbProgram() : program(nf::testing::objectPath("lb"), pins.path()) {}

void LbProgram::load(const std::string &text) {
  TempFile file(text);
  auto report = loadConfigFile(file.path(), pins.path());
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());
}

uint32_t MapView::realIndexOf(uint32_t address) const {
  int fd = fdOf("reals");
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(fd, &info, &length), 0);
  for (uint32_t index = 1; index < info.max_entries; ++index) {
    lb_real value = real(index);
    if ((value.flags & LB_REAL_ACTIVE) && ntohl(value.addr) == address)
      return index;
  }
  return 0;
}

lb_real MapView::real(uint32_t index) const {
  lb_real value = {};
  EXPECT_EQ(bpf_map_lookup_elem(fdOf("reals"), &index, &value), 0);
  return value;
}

std::optional<lb_vip> MapView::vip(uint32_t address, uint16_t port, uint8_t proto) const {
  lb_vip_key key = {htonl(address), htons(port), proto, 0};
  lb_vip value = {};
  if (bpf_map_lookup_elem(fdOf("vips"), &key, &value))
    return std::nullopt;
  return value;
}

uint32_t MapView::ringSlot(uint32_t vipIndex, uint32_t slot) const {
  uint32_t key = vipIndex * LB_RING_SIZE + slot, value = 0;
  EXPECT_EQ(bpf_map_lookup_elem(fdOf("rings"), &key, &value), 0);
  return value;
}

std::vector<uint32_t> MapView::ring(uint32_t vipIndex) const {
  std::vector<uint32_t> keys(LB_RING_SIZE), values(LB_RING_SIZE);
  uint32_t before = vipIndex * LB_RING_SIZE - 1, last = 0, done = 0;
  while (done < LB_RING_SIZE) {
    uint32_t count = LB_RING_SIZE - done;
    int err = bpf_map_lookup_batch(fdOf("rings"), done || vipIndex ? &before : nullptr, &last,
                                   keys.data() + done, values.data() + done, &count, nullptr);
    done += count;
    before = last;
    if (err || count == 0)
      break;
  }
  EXPECT_EQ(done, LB_RING_SIZE);
  return values;
}

std::map<Bytes, Bytes> MapView::entries(const std::string &map) const {
  return nf::testing::rawEntries(fdOf(map));
}

std::optional<lb_flow> MapView::flow(const Flow &flow) const {
  lb_flow_key key = flowKey(flow);
  lb_flow value = {};
  if (bpf_map_lookup_elem(fdOf("flows"), &key, &value))
    return std::nullopt;
  return value;
}

size_t MapView::flowCount() const { return entries("flows").size(); }

void MapView::forgetFlow(const Flow &flow) const {
  lb_flow_key key = flowKey(flow);
  EXPECT_EQ(bpf_map_delete_elem(fdOf("flows"), &key), 0);
}

void MapView::clearFlows() const {
  lb_flow_key key = {};
  while (bpf_map_get_next_key(fdOf("flows"), nullptr, &key) == 0)
    bpf_map_delete_elem(fdOf("flows"), &key);
}

std::vector<uint64_t> MapView::events() const {
  return morpheus::testing::perCpuCounters(fdOf("events"), LB_EV_MAX);
}

lb_vip_counters MapView::vipCounters(uint32_t vipIndex) const {
  std::vector<lb_vip_counters> perCpu(libbpf_num_possible_cpus());
  EXPECT_EQ(bpf_map_lookup_elem(fdOf("vip_stats"), &vipIndex, perCpu.data()), 0);
  lb_vip_counters sum = {};
  for (const lb_vip_counters &counters : perCpu) {
    sum.packets += counters.packets;
    sum.bytes += counters.bytes;
  }
  return sum;
}

lb_config MapView::config() const {
  uint32_t zero = 0;
  lb_config value = {};
  EXPECT_EQ(bpf_map_lookup_elem(fdOf("config"), &zero, &value), 0);
  return value;
}

uint32_t MapView::expectedReal(const LbConfig &config, const Flow &flow) const {
  for (const VipSpec &vip : config.vips) {
    if (vip.address != flow.daddr || vip.port != flow.dport || vip.protocol != flow.proto)
      continue;
    std::vector<MaglevBackend> backends;
    for (const RealSpec &real : vip.reals)
      backends.push_back({realIndexOf(real.address), real.address, real.weight});
    std::vector<uint32_t> ring = buildMaglevTable(backends, LB_RING_SIZE);
    lb_flow_key key = flowKey(flow);
    return ring[lb_flow_hash(&key) % LB_RING_SIZE];
  }
  ADD_FAILURE() << "no vip for the flow in the config";
  return 0;
}

MapView viewOf(nf::testing::NfProgram &program) {
  return MapView([&program](const std::string &name) { return program.mapFd(name); });
}

LbConfig parsed(const std::string &text) {
  TempFile file(text);
  auto config = parseLbConfig(file.path());
  EXPECT_THAT_EXPECTED(config, llvm::Succeeded());
  return config ? std::move(*config) : LbConfig{};
}

void expectEncapsulated(const RunResult &result, const Bytes &input, uint32_t realAddress, bool gue,
                        uint32_t outerSource, uint8_t ttl) {
  using packet::read16;
  size_t overhead = gue ? GueOverhead : IpipOverhead;
  ASSERT_EQ(result.verdict, uint32_t(XDP_TX)) << morpheus::hexDump(result.output);
  ASSERT_EQ(result.output.size(), input.size() + overhead);
  const Bytes &out = result.output;

  Bytes ethernet(GatewayMac.begin(), GatewayMac.end());
  ethernet.insert(ethernet.end(), input.begin(), input.begin() + 6); // our MAC as source
  ethernet.insert(ethernet.end(), {0x08, 0x00});
  EXPECT_EQ(Bytes(out.begin(), out.begin() + 14), ethernet);

  const size_t inner = 14;
  uint16_t innerLength = read16(input, inner + 2);
  uint16_t df = read16(input, inner + 6) & 0x4000;
  Bytes ip = {0x45,
              input[inner + 1], // TOS copied
              uint8_t((innerLength + overhead) >> 8),
              uint8_t(innerLength + overhead),
              0,
              0, // id
              uint8_t(df >> 8),
              0,
              ttl,
              uint8_t(gue ? IPPROTO_UDP : IPPROTO_IPIP),
              0,
              0, // checksum, checked below
              uint8_t(outerSource >> 24),
              uint8_t(outerSource >> 16),
              uint8_t(outerSource >> 8),
              uint8_t(outerSource),
              uint8_t(realAddress >> 24),
              uint8_t(realAddress >> 16),
              uint8_t(realAddress >> 8),
              uint8_t(realAddress)};
  uint16_t checksum = packet::internetChecksum(ip.data(), ip.size());
  ip[10] = checksum >> 8;
  ip[11] = checksum & 0xff;
  EXPECT_EQ(Bytes(out.begin() + 14, out.begin() + 34), ip);
  EXPECT_TRUE(packet::ipv4ChecksumValid(out, 14));

  if (gue) {
    // The source port's low bits are the flow hash, over raw header words.
    size_t l4 = inner + (input[inner] & 0xf) * 4;
    lb_flow_key key = {};
    std::memcpy(&key.saddr, &input[inner + 12], 4);
    std::memcpy(&key.daddr, &input[inner + 16], 4);
    std::memcpy(&key.sport, &input[l4], 2);
    std::memcpy(&key.dport, &input[l4 + 2], 2);
    key.proto = input[inner + 9];
    uint16_t sport = LB_GUE_SPORT_BASE | (lb_flow_hash(&key) & LB_GUE_SPORT_HASH_MASK);
    uint16_t udpLength = innerLength + 8;
    Bytes udp = {uint8_t(sport >> 8),
                 uint8_t(sport),
                 uint8_t(LB_GUE_DEFAULT_PORT >> 8),
                 uint8_t(LB_GUE_DEFAULT_PORT & 0xff),
                 uint8_t(udpLength >> 8),
                 uint8_t(udpLength),
                 0,
                 0};
    EXPECT_EQ(Bytes(out.begin() + 34, out.begin() + 42), udp);
  }
  EXPECT_EQ(Bytes(out.begin() + 14 + overhead, out.end()), Bytes(input.begin() + 14, input.end()))
      << "the inner packet must be intact";
}

uint32_t outerDestination(const RunResult &result) {
  return result.output.size() >= 34 ? packet::read32(result.output, 30) : 0;
}

} // namespace morpheus::nf::lb::testing
