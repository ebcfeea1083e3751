#include "trafficgen/LiveFrames.h"

#include "netns/VethPair.h"
#include "livegen.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <stdexcept>
#include <system_error>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

extern "C" const unsigned char livegen_bpf_start[], livegen_bpf_end[];

namespace morpheus::trafficgen {
namespace {

constexpr size_t kEthernetLength = 14;
constexpr size_t kIpv4Length = 20;
constexpr size_t kUdpLength = 8;
constexpr uint32_t kMinFrameLength = 64;
constexpr uint32_t kMaxBatchSize = 256; // the kernel's TEST_XDP_MAX_BATCH

[[noreturn]] void throwErrno(int err, const std::string &what) {
  throw std::system_error(err < 0 ? -err : err, std::generic_category(), what);
}

void put16(uint8_t *at, uint16_t value) {
  at[0] = static_cast<uint8_t>(value >> 8);
  at[1] = static_cast<uint8_t>(value);
}

void put32(uint8_t *at, uint32_t value) {
  put16(at, static_cast<uint16_t>(value >> 16));
  put16(at + 2, static_cast<uint16_t>(value));
}

uint16_t internetChecksum(const uint8_t *data, size_t length) {
  uint32_t sum = 0;
  for (size_t i = 0; i + 1 < length; i += 2)
    sum += static_cast<uint32_t>(data[i] << 8 | data[i + 1]);
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  return static_cast<uint16_t>(~sum);
}

// What the kernel copies into each fresh page before the program rewrites
// it: a well-formed UDP frame for the first flow, zero-padded.
std::vector<uint8_t> initialFrame(const LiveFramesOptions &options,
                                  const MacAddress &srcMac) {
  std::vector<uint8_t> frame(options.frameLength, 0);
  const Flow &flow = options.flows.front();
  uint8_t *eth = frame.data();
  std::copy(options.dstMac.begin(), options.dstMac.end(), eth);
  std::copy(srcMac.begin(), srcMac.end(), eth + 6);
  put16(eth + 12, 0x0800); // ETH_P_IP

  uint8_t *ip = eth + kEthernetLength;
  ip[0] = 0x45; // version 4, 5-word header
  put16(ip + 2, kIpv4Length + kUdpLength);
  ip[8] = 64; // TTL
  ip[9] = IPPROTO_UDP;
  put32(ip + 12, flow.saddr);
  put32(ip + 16, flow.daddr);
  put16(ip + 10, internetChecksum(ip, kIpv4Length));

  uint8_t *udp = ip + kIpv4Length;
  put16(udp, flow.sport);
  put16(udp + 2, flow.dport);
  put16(udp + 4, kUdpLength); // checksum 0: none, which IPv4 allows
  return frame;
}

int mapFd(bpf_object *object, const char *name) {
  bpf_map *map = bpf_object__find_map_by_name(object, name);
  if (!map)
    throw std::logic_error(std::string("livegen.bpf.c has no map '") + name + "'");
  return bpf_map__fd(map);
}

void validate(const LiveFramesOptions &options) {
  auto fail = [](const std::string &why) {
    throw std::invalid_argument("live frames: " + why);
  };
  if (options.iface.empty())
    fail("no interface given");
  if (options.flows.empty())
    fail("no flows given");
  if (options.flows.size() > LIVEGEN_MAX_FLOWS)
    fail(std::to_string(options.flows.size()) + " flows, at most " +
         std::to_string(LIVEGEN_MAX_FLOWS) + " are supported");
  for (const Flow &flow : options.flows) {
    if (flow.proto != IPPROTO_UDP && flow.proto != IPPROTO_TCP)
      fail("flow protocol " + std::to_string(flow.proto) +
           " is neither UDP (17) nor TCP (6)");
  }
  if (options.frameLength < kMinFrameLength)
    fail("frame length " + std::to_string(options.frameLength) +
         " is below the minimum of " + std::to_string(kMinFrameLength));
  if (options.batchSize == 0 || options.batchSize > kMaxBatchSize)
    fail("batch size " + std::to_string(options.batchSize) +
         " is outside 1.." + std::to_string(kMaxBatchSize));
}

} // namespace

double LiveFramesResult::mpps() const {
  if (kernelDurationNs == 0)
    return 0;
  return static_cast<double>(packetsSent) * 1e3 /
         static_cast<double>(kernelDurationNs);
}

void LiveFramesGenerator::ObjectCloser::operator()(bpf_object *object) const {
  bpf_object__close(object);
}

LiveFramesGenerator::LiveFramesGenerator(LiveFramesGenerator &&) noexcept = default;
LiveFramesGenerator &
LiveFramesGenerator::operator=(LiveFramesGenerator &&) noexcept = default;
LiveFramesGenerator::~LiveFramesGenerator() = default;

std::string LiveFramesGenerator::describe() const {
  std::string text = "live frames on " + iface_;
  if (!netns_.empty())
    text += " in netns " + netns_;
  return text;
}

LiveFramesGenerator LiveFramesGenerator::create(const LiveFramesOptions &options) {
  validate(options);
  LiveFramesGenerator generator;
  generator.netns_ = options.netns;
  generator.iface_ = options.iface;
  generator.batchSize_ = options.batchSize;
  generator.defaultPackets_ = options.packets;
  const std::string where = generator.describe();

  MacAddress srcMac = options.srcMac;
  auto resolve = [&] {
    generator.ifindex_ = testing::interfaceIndex(options.iface);
    if (srcMac == MacAddress{})
      srcMac = testing::interfaceMac(options.iface);
  };
  try {
    if (options.netns.empty())
      resolve();
    else
      testing::runInNetns(options.netns, resolve);
  } catch (const std::exception &e) {
    throw std::runtime_error(where + ": " + e.what());
  }

  bpf_object_open_opts openOptions{};
  openOptions.sz = sizeof openOptions;
  openOptions.object_name = "livegen";
  bpf_object *object = bpf_object__open_mem(
      livegen_bpf_start, static_cast<size_t>(livegen_bpf_end - livegen_bpf_start),
      &openOptions);
  if (!object)
    throwErrno(errno, where + ": opening the embedded livegen object");
  generator.object_.reset(object);
  if (int err = bpf_object__load(object))
    throwErrno(err, where + ": loading livegen (libbpf logged the details above)");
  bpf_program *program = bpf_object__find_program_by_name(object, "livegen");
  if (!program)
    throw std::logic_error("livegen.bpf.c has no program 'livegen'");
  generator.progFd_ = bpf_program__fd(program);

  int flowsFd = mapFd(object, "flows");
  for (uint32_t i = 0; i < options.flows.size(); ++i) {
    const Flow &flow = options.flows[i];
    livegen_flow entry{};
    entry.saddr = htonl(flow.saddr);
    entry.daddr = htonl(flow.daddr);
    entry.sport = htons(flow.sport);
    entry.dport = htons(flow.dport);
    entry.proto = flow.proto;
    if (int err = bpf_map_update_elem(flowsFd, &i, &entry, BPF_ANY))
      throwErrno(err, where + ": writing flow " + std::to_string(i));
  }
  livegen_config config{};
  std::copy(options.dstMac.begin(), options.dstMac.end(), config.dst_mac);
  std::copy(srcMac.begin(), srcMac.end(), config.src_mac);
  config.nflows = static_cast<uint32_t>(options.flows.size());
  uint32_t zero = 0;
  if (int err = bpf_map_update_elem(mapFd(object, "config"), &zero, &config, BPF_ANY))
    throwErrno(err, where + ": writing the config map");

  generator.frame_ = initialFrame(options, srcMac);
  return generator;
}

LiveFramesResult LiveFramesGenerator::send(uint64_t packets) const {
  // The kernel resolves ingress_ifindex in the calling thread's namespace.
  std::optional<testing::NetnsGuard> inNetns;
  if (!netns_.empty())
    inNetns.emplace(netns_);

  xdp_md context{};
  context.data_end = static_cast<uint32_t>(frame_.size());
  context.ingress_ifindex = static_cast<uint32_t>(ifindex_);

  LiveFramesResult result;
  auto start = std::chrono::steady_clock::now();
  while (result.packetsSent < packets) {
    auto repeat = static_cast<uint32_t>(std::min<uint64_t>(
        packets - result.packetsSent, std::numeric_limits<uint32_t>::max()));
    bpf_test_run_opts run{};
    run.sz = sizeof run;
    run.data_in = frame_.data();
    run.data_size_in = static_cast<uint32_t>(frame_.size());
    run.ctx_in = &context;
    run.ctx_size_in = sizeof context;
    run.repeat = repeat;
    run.flags = BPF_F_TEST_XDP_LIVE_FRAMES;
    run.batch_size = batchSize_;
    if (int err = bpf_prog_test_run_opts(progFd_, &run))
      throwErrno(err, describe() + ": BPF_PROG_RUN (" +
                          std::to_string(frame_.size()) + "-byte frames, batch " +
                          std::to_string(batchSize_) + ")");
    result.packetsSent += repeat;
    // `duration` is the kernel's mean per run, not the total.
    result.kernelDurationNs += static_cast<uint64_t>(run.duration) * repeat;
  }
  result.wallDurationNs = static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(
          std::chrono::steady_clock::now() - start)
          .count());
  return result;
}

MacAddress parseMac(const std::string &text) {
  MacAddress mac{};
  size_t pos = 0;
  for (size_t i = 0; i < mac.size(); ++i) {
    if (i > 0) {
      if (pos >= text.size() || text[pos] != ':')
        throw std::invalid_argument("bad MAC address '" + text + "'");
      ++pos;
    }
    size_t digits = 0;
    unsigned value = 0;
    while (pos < text.size() && digits < 2 && std::isxdigit(static_cast<unsigned char>(text[pos]))) {
      char c = static_cast<char>(std::tolower(static_cast<unsigned char>(text[pos])));
      value = value * 16 + static_cast<unsigned>(c <= '9' ? c - '0' : c - 'a' + 10);
      ++pos;
      ++digits;
    }
    if (digits == 0)
      throw std::invalid_argument("bad MAC address '" + text + "'");
    mac[i] = static_cast<uint8_t>(value);
  }
  if (pos != text.size())
    throw std::invalid_argument("bad MAC address '" + text + "'");
  return mac;
}

uint32_t parseIpv4(const std::string &text) {
  in_addr address{};
  if (::inet_pton(AF_INET, text.c_str(), &address) != 1)
    throw std::invalid_argument("bad IPv4 address '" + text + "'");
  return ntohl(address.s_addr);
}

LiveFramesOptions acrossVeth(const testing::VethPair &veth, std::vector<Flow> flows) {
  LiveFramesOptions options;
  options.netns = veth.nsA();
  options.iface = veth.ifA();
  options.dstMac = veth.macB();
  options.flows = std::move(flows);
  return options;
}

} // namespace morpheus::trafficgen
