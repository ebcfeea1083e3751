// morpheus-trafficgen: sends generated UDP or TCP frames out of an interface
// with LiveFramesGenerator and reports the rate the kernel achieved.
#include "support/CommandLine.h"
#include "trafficgen/LiveFrames.h"

#include <netinet/in.h>

#include <cstdio>
#include <exception>
#include <limits>
#include <map>
#include <string>

using namespace morpheus::trafficgen;

namespace {

const char Description[] =
    "Sends N frames out of IF using BPF_PROG_RUN in live-frames mode: a generator\n"
    "XDP program rewrites each frame into the next of K flows (round-robin) and\n"
    "transmits it with XDP_TX. The receiving side (e.g. a veth peer) must have an\n"
    "XDP program attached for veth to accept XDP_TX frames. Frames carry Ethernet,\n"
    "IPv4 and a UDP or TCP header, no payload, and flow k goes to daddr-base + k.\n"
    "\n"
    "Prints the frames sent, the kernel's and the wall-clock duration and the\n"
    "resulting rates in million packets per second. Needs root (CAP_BPF,\n"
    "CAP_NET_ADMIN and CAP_SYS_ADMIN for --netns).";

struct Flags {
  LiveFramesOptions options;
  uint32_t flows = 1;
  std::string saddr = "10.0.0.254", daddrBase = "10.0.0.1";
  uint16_t sport = 1024, dport = 80;
  uint32_t proto = IPPROTO_UDP; // not uint8_t: CLI11 reads a one-digit uint8_t as a character
};

double milliseconds(uint64_t ns) { return static_cast<double>(ns) / 1e6; }

double mppsOver(uint64_t packets, uint64_t ns) {
  return ns == 0 ? 0 : static_cast<double>(packets) * 1e3 / static_cast<double>(ns);
}

int send(Flags &flags) {
  LiveFramesOptions &options = flags.options;
  uint32_t saddr = parseIpv4(flags.saddr), daddrBase = parseIpv4(flags.daddrBase);
  for (uint32_t k = 0; k < flags.flows; ++k)
    options.flows.push_back({saddr, daddrBase + k, flags.sport, flags.dport, uint8_t(flags.proto)});

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

// A usage error when `parse` (a throwing parser of the tooling) refuses the
// value.
template <typename Parse> CLI::Validator parsedBy(Parse parse) {
  return CLI::Validator(
      [parse](std::string &input) -> std::string {
        try {
          parse(input);
        } catch (const std::exception &e) {
          return e.what();
        }
        return "";
      },
      "");
}

} // namespace

int main(int argc, char **argv) {
  Flags flags;
  auto app = morpheus::commandline::makeApp(
      "morpheus-trafficgen", "Sends generated UDP or TCP frames out of an interface.",
      Description, [&flags](const CLI::App &) {
        try {
          return send(flags);
        } catch (const std::exception &e) {
          std::fprintf(stderr, "morpheus-trafficgen: %s\n", e.what());
          return 1;
        }
      });
  LiveFramesOptions &options = flags.options;
  app->add_option("--iface", options.iface, "interface the frames leave through")
      ->required()
      ->type_name("IF");
  app->add_option_function<std::string>(
         "--dst-mac", [&](const std::string &text) { options.dstMac = parseMac(text); },
         "destination MAC, e.g. aa:bb:cc:dd:ee:ff")
      ->required()
      ->check(parsedBy(parseMac))
      ->type_name("MAC");
  app->add_option("--packets", options.packets, "number of frames to send")
      ->required()
      ->check(CLI::Range(uint64_t(1), std::numeric_limits<uint64_t>::max()).description(""))
      ->type_name("N");
  app->add_option("--netns", options.netns,
                  "network namespace (under /run/netns) holding IF; default: the current one")
      ->type_name("NS");
  app->add_option_function<std::string>(
         "--src-mac", [&](const std::string &text) { options.srcMac = parseMac(text); },
         "source MAC (default: IF's own address)")
      ->check(parsedBy(parseMac))
      ->type_name("MAC");
  app->add_option("--flows", flags.flows, "number of flows, 1..65536 (default 1)")
      ->check(CLI::Range(1, 65536).description(""))
      ->type_name("K");
  app->add_option("--saddr", flags.saddr,
                  "IPv4 source address of every flow (default 10.0.0.254)")
      ->check(parsedBy(parseIpv4))
      ->type_name("A");
  app->add_option("--daddr-base", flags.daddrBase,
                  "IPv4 destination of flow 0 (default 10.0.0.1)")
      ->check(parsedBy(parseIpv4))
      ->type_name("A");
  app->add_option("--sport", flags.sport, "source port (default 1024)")->type_name("P");
  app->add_option("--dport", flags.dport, "destination port (default 80)")->type_name("P");
  app->add_option("--proto", flags.proto, "L4 protocol; TCP frames are SYNs (default udp)")
      ->transform(morpheus::commandline::oneOf(
          std::map<std::string, uint32_t>{{"udp", IPPROTO_UDP}, {"tcp", IPPROTO_TCP}}))
      ->type_name("udp|tcp");
  app->add_option("--frame-length", options.frameLength,
                  "bytes per frame without FCS, >= 64 (default 64); the kernel refuses frames "
                  "that do not fit a page with its headroom (3408 bytes on x86-64 Linux 6.18)")
      ->check(CLI::Range(64, 65535).description(""))
      ->type_name("L");
  app->add_option("--batch-size", options.batchSize,
                  "frames per kernel batch, 1..256 (default 64)")
      ->check(CLI::Range(1, 256).description(""))
      ->type_name("B");
  return morpheus::commandline::run(*app, argc, argv);
}
