// Timing packets of one trace through a program, by the kernel's
// bpf_stats: the trace driver tail-calls it (BPF_PROG_TEST_RUN), or, live,
// it is attached to the port the sender's frames arrive on.
#pragma once

#include "Bench.h"
#include "TraceDriver.h"

#include "backend/bpf/ProgramLink.h"

#include <optional>
#include <string>
#include <vector>

namespace morpheus::bench {

// Where the live method sends packets: the program under test runs on the
// ingress interface through `link`, the sender transmits from its veth peer
// `senderIfindex`.
struct LiveTarget {
  bpf::ProgramLink link;
  // A TC program's: the XDP program `pass` (empty.bpf.c) on the ingress,
  // without which (or GRO, which may merge packets) the veth drops what
  // its peer transmits by XDP.
  std::optional<bpf::ProgramLink> passing;
  uint32_t senderIfindex = 0;

  // Attaches `programFd`, a program of `type`, to interface `ingress`: XDP
  // natively; TC on tcx ingress, behind `passFd` natively at the XDP hook,
  // so every frame reaches it as an skb as the stack builds it.
  static Expected<LiveTarget> attach(bpf::ProgramType type, const std::string &ingress,
                                     int programFd, int passFd, uint32_t senderIfindex);
};

struct Timing {
  double ns = 0;   // per packet, by the program's bpf_stats
  double mpps = 0; // live only: the rate frames were offered at
};

// Times packets of one trace through programs. With `cpuEdges`
// (BenchOptions::twoCpus), packets [0, edge 0) run on
// CPU 0, [edge 0, edge 1) on CPU 1, and so on (mod the CPUs), the thread
// pinned for each part and back where it was after.
class TraceTimer {
public:
  TraceTimer(TraceDriver &driver, const Trace &trace, uint32_t ingress, LiveTarget *live,
             std::vector<uint64_t> cpuEdges)
      : driver(driver), trace(trace), ingress(ingress), live(live),
        packets(uint32_t(trace.sequence.size())), cpuEdges(std::move(cpuEdges)) {}

  // `count` packets of the trace from `start` on through `fd`; with CPU
  // edges, each part on its CPU, the figure the parts' packet-weighted mean.
  Expected<Timing> time(int fd, uint32_t start, uint32_t count);
  // The whole trace through `fd` in `segments` consecutive slices (each
  // slice's ns/packet appended to `perSegment` when given); the whole-trace
  // figure is the slices' packet-weighted mean.
  Expected<Timing> timeTrace(int fd, uint32_t segments, std::vector<double> *perSegment);
  // An empty program's own cost (driver: run alone on the template frame;
  // live and TC: what the empty control was timed at).
  Expected<double> emptyAlone(int emptyFd, double controlNs);

private:
  Expected<Timing> timeHere(int fd, uint32_t start, uint32_t count);
  Expected<Timing> timeDriven(int fd, uint32_t start, uint32_t count);
  Expected<Timing> timeLive(int fd, uint32_t start, uint32_t count);

  TraceDriver &driver;
  const Trace &trace;
  uint32_t ingress;
  LiveTarget *live;
  uint32_t packets;
  std::vector<uint64_t> cpuEdges;
};

// Where `trace` changes CPU (TraceTimer): the phased trace's phase edges
// with --two-cpus, else none.
std::vector<uint64_t> cpuEdges(const Trace &trace, const BenchOptions &options);

} // namespace morpheus::bench
