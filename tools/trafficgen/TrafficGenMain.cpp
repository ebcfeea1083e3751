// morpheus-trafficgen: sends generated UDP or TCP frames out of an interface
// with LiveFramesGenerator and reports the rate the kernel achieved.
#include "trafficgen/LiveFrames.h"

#include <charconv>
#include <cstdio>
#include <exception>
#include <limits>
#include <stdexcept>
#include <string>
#include <string_view>

using namespace morpheus::trafficgen;

namespace {

constexpr const char *kUsage =
    R"(usage: morpheus-trafficgen --iface IF --dst-mac MAC --packets N [options]

Sends N frames out of IF using BPF_PROG_RUN in live-frames mode: a generator
XDP program rewrites each frame into the next of K flows (round-robin) and
transmits it with XDP_TX. The receiving side (e.g. a veth peer) must have an
XDP program attached for veth to accept XDP_TX frames. Frames carry Ethernet,
IPv4 and a UDP or TCP header, no payload, and flow k goes to daddr-base + k.

required:
  --iface IF             interface the frames leave through
  --dst-mac MAC          destination MAC, e.g. aa:bb:cc:dd:ee:ff
  --packets N            number of frames to send

options:
  --netns NS             network namespace (under /run/netns) holding IF;
                         default: the current one
  --src-mac MAC          source MAC (default: IF's own address)
  --flows K              number of flows, 1..65536 (default 1)
  --saddr A              IPv4 source address of every flow (default 10.0.0.254)
  --daddr-base A         IPv4 destination of flow 0 (default 10.0.0.1)
  --sport P              source port (default 1024)
  --dport P              destination port (default 80)
  --proto udp|tcp        L4 protocol; TCP frames are SYNs (default udp)
  --frame-length L       bytes per frame without FCS, >= 64 (default 64); the
                         kernel refuses frames that do not fit a page with
                         its headroom (3408 bytes on x86-64 Linux 6.18)
  --batch-size B         frames per kernel batch, 1..256 (default 64)
  --help                 show this text

Prints the frames sent, the kernel's and the wall-clock duration and the
resulting rates in million packets per second. Needs root (CAP_BPF,
CAP_NET_ADMIN and CAP_SYS_ADMIN for --netns).
)";

struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

template <typename T>
T parseNumber(std::string_view flag, const std::string &text, T min, T max) {
  T value{};
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (ec != std::errc() || end != text.data() + text.size() || value < min ||
      value > max)
    throw UsageError(std::string(flag) + ": expected a number in " +
                     std::to_string(min) + ".." + std::to_string(max) +
                     ", got '" + text + "'");
  return value;
}

double milliseconds(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

double mppsOver(uint64_t packets, uint64_t ns) {
  return ns == 0 ? 0 : static_cast<double>(packets) * 1e3 / static_cast<double>(ns);
}

int run(int argc, char **argv) {
  LiveFramesOptions options;
  bool haveDstMac = false, havePackets = false;
  uint32_t flowCount = 1;
  uint32_t saddr = parseIpv4("10.0.0.254");
  uint32_t daddrBase = parseIpv4("10.0.0.1");
  uint16_t sport = 1024, dport = 80;
  uint8_t proto = IPPROTO_UDP;

  for (int i = 1; i < argc; ++i) {
    std::string_view flag = argv[i];
    if (flag == "--help" || flag == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    }
    if (i + 1 >= argc)
      throw UsageError(std::string(flag) + " needs a value (or is unknown)");
    std::string value = argv[++i];
    if (flag == "--netns")
      options.netns = value;
    else if (flag == "--iface")
      options.iface = value;
    else if (flag == "--dst-mac") {
      options.dstMac = parseMac(value);
      haveDstMac = true;
    } else if (flag == "--src-mac")
      options.srcMac = parseMac(value);
    else if (flag == "--packets") {
      options.packets =
          parseNumber<uint64_t>(flag, value, 1, std::numeric_limits<uint64_t>::max());
      havePackets = true;
    } else if (flag == "--flows")
      flowCount = parseNumber<uint32_t>(flag, value, 1, 65536);
    else if (flag == "--saddr")
      saddr = parseIpv4(value);
    else if (flag == "--daddr-base")
      daddrBase = parseIpv4(value);
    else if (flag == "--sport")
      sport = parseNumber<uint16_t>(flag, value, 0, 65535);
    else if (flag == "--dport")
      dport = parseNumber<uint16_t>(flag, value, 0, 65535);
    else if (flag == "--proto") {
      if (value == "udp")
        proto = IPPROTO_UDP;
      else if (value == "tcp")
        proto = IPPROTO_TCP;
      else
        throw UsageError("--proto: expected udp or tcp, got '" + value + "'");
    } else if (flag == "--frame-length")
      options.frameLength = parseNumber<uint32_t>(flag, value, 64, 65535);
    else if (flag == "--batch-size")
      options.batchSize = parseNumber<uint32_t>(flag, value, 1, 256);
    else
      throw UsageError("unknown option " + std::string(flag));
  }
  if (options.iface.empty() || !haveDstMac || !havePackets)
    throw UsageError("--iface, --dst-mac and --packets are required");

  for (uint32_t k = 0; k < flowCount; ++k)
    options.flows.push_back({saddr, daddrBase + k, sport, dport, proto});

  LiveFramesGenerator generator = LiveFramesGenerator::create(options);
  LiveFramesResult result = generator.send();
  std::printf("packets sent:    %llu\n",
              static_cast<unsigned long long>(result.packetsSent));
  std::printf("kernel duration: %.3f ms (%.2f Mpps)\n",
              milliseconds(result.kernelDurationNs), result.mpps());
  std::printf("wall duration:   %.3f ms (%.2f Mpps)\n",
              milliseconds(result.wallDurationNs),
              mppsOver(result.packetsSent, result.wallDurationNs));
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  try {
    return run(argc, argv);
  } catch (const UsageError &e) {
    std::fprintf(stderr, "morpheus-trafficgen: %s\n(see --help)\n", e.what());
    return 2;
  } catch (const std::invalid_argument &e) {
    std::fprintf(stderr, "morpheus-trafficgen: %s\n", e.what());
    return 2;
  } catch (const std::exception &e) {
    std::fprintf(stderr, "morpheus-trafficgen: %s\n", e.what());
    return 1;
  }
}
