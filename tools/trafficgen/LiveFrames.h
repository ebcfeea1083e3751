// A packet generator built on BPF_PROG_RUN's live-frames mode: a small XDP
// program (livegen.bpf.c) is run `packets` times in the kernel, rewrites
// each frame into the next flow of a round-robin and transmits it with
// XDP_TX out of a chosen interface. No AF_XDP or pktgen setup is needed, and
// one core feeds a veth peer's XDP program at well over 10 Mpps.
//
// Test and demo tooling: errors throw std::runtime_error (std::system_error
// for failed system calls) whose message names the netns and interface.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include <netinet/in.h>

struct bpf_object;

namespace morpheus::testing {
class VethPair;
}

namespace morpheus::trafficgen {

using MacAddress = std::array<uint8_t, 6>;

// One generated flow. Fields are in host byte order.
struct Flow {
  uint32_t saddr = 0;
  uint32_t daddr = 0;
  uint16_t sport = 0;
  uint16_t dport = 0;
  uint8_t proto = IPPROTO_UDP; // or IPPROTO_TCP
};

struct LiveFramesOptions {
  std::string netns;      // namespace holding `iface`; empty: the caller's own
  std::string iface;      // frames leave through this interface
  MacAddress dstMac{};
  MacAddress srcMac{};    // all zero: the MAC address of `iface`
  std::vector<Flow> flows; // cycled through round-robin, one flow per frame
  uint64_t packets = 0;   // what send() without an argument sends
  uint32_t batchSize = 64; // frames per kernel batch, at most 256
  // Bytes per frame without FCS. Frames carry Ethernet + IPv4 + a UDP or TCP
  // header and no payload; the rest is Ethernet padding. At least 64.
  uint32_t frameLength = 64;
};

// Options for sending from end A of `veth` to end B (all other fields at
// their defaults).
LiveFramesOptions acrossVeth(const testing::VethPair &veth, std::vector<Flow> flows);

struct LiveFramesResult {
  uint64_t packetsSent = 0;
  // The kernel's own measure: its mean time per frame times the frames sent.
  uint64_t kernelDurationNs = 0;
  // Measured around the syscalls, so it includes their setup and teardown.
  uint64_t wallDurationNs = 0;

  // Million packets per second by the kernel's measure; 0 if nothing was sent.
  double mpps() const;
};

class LiveFramesGenerator {
public:
  // Loads the generator program and fills its flow table; nothing is sent.
  static LiveFramesGenerator create(const LiveFramesOptions &options);

  LiveFramesGenerator(LiveFramesGenerator &&) noexcept;
  LiveFramesGenerator &operator=(LiveFramesGenerator &&) noexcept;
  ~LiveFramesGenerator();

  // Sends `packets` frames and returns once the kernel has handed them all to
  // the interface. Each call costs ~15-20 ms of kernel setup and teardown,
  // so a background load loop should send a million or more per call. The flow round-robin continues across calls. Safe to call
  // from any thread (the thread briefly enters the generator's namespace);
  // concurrent calls work but interleave the flows less evenly.
  LiveFramesResult send(uint64_t packets) const;
  LiveFramesResult send() const { return send(defaultPackets_); }

private:
  struct ObjectCloser {
    void operator()(bpf_object *object) const;
  };

  LiveFramesGenerator() = default;
  std::string describe() const;

  std::unique_ptr<bpf_object, ObjectCloser> object_;
  int progFd_ = -1;
  std::string netns_;
  std::string iface_;
  int ifindex_ = 0;
  uint32_t batchSize_ = 0;
  uint64_t defaultPackets_ = 0;
  std::vector<uint8_t> frame_;
};

// Parses "aa:bb:cc:dd:ee:ff"; throws std::invalid_argument otherwise.
MacAddress parseMac(const std::string &text);
// Parses a dotted quad into a host-byte-order address; throws likewise.
uint32_t parseIpv4(const std::string &text);

} // namespace morpheus::trafficgen
