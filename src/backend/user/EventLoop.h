// The user-space data plane's event loop over an in-memory ring: bursts of
// packets taken from a replayed trace (the frames a trace holds, in its
// order), each burst handed to the handler the trampoline holds at the
// burst's start. Between bursts the caller may change tables or swap
// versions (the hook); a burst never mixes two versions.
#pragma once

#include "backend/user/Handler.h"

#include <array>
#include <cstdint>
#include <functional>
#include <vector>

namespace morpheus::user {

// A trace to replay: distinct frames and the order packets use them in (as
// bench::Trace holds a pcap).
struct ReplayRing {
  std::vector<Bytes> frames;
  std::vector<uint32_t> sequence; // packet i is frames[sequence[i]]
  uint32_t ingressPort = 0;
};

// What a handler did to one packet.
struct PacketResult {
  int verdict = MU_DROP;
  uint32_t port = 0; // egress port, for MU_TX
  Bytes bytes;       // the packet after the handler

  bool operator==(const PacketResult &) const = default;
};

struct LoopStats {
  uint64_t packets = 0;
  uint64_t bursts = 0;
  std::array<uint64_t, 3> verdicts{}; // by mu_verdict
  uint64_t unknownVerdicts = 0;
  // The loop thread's CPU time (CLOCK_THREAD_CPUTIME_ID): on a machine
  // shared with other work, time the thread spent preempted is not the
  // handler's. wallSeconds is the elapsed time.
  double seconds = 0;
  double wallSeconds = 0;
  double packetsPerSecond() const { return seconds > 0 ? double(packets) / seconds : 0; }

  void countVerdict(int verdict) {
    if (verdict >= 0 && verdict < int(verdicts.size()))
      ++verdicts[verdict];
    else
      ++unknownVerdicts;
  }
};

// The calling thread's CPU time in seconds (CLOCK_THREAD_CPUTIME_ID).
double threadCpuSeconds();

class EventLoop {
public:
  EventLoop(Trampoline &trampoline, uint32_t burstSize)
      : trampoline(trampoline), burstSize(burstSize ? burstSize : 1) {}

  // Sub-batches of `subBatch` packets within each burst, the next one's
  // table entries prefetched (`prefetch`, a handler's MU_PREFETCH
  // function) before the handler runs on the current one; 0 or a null
  // function: none. Prefetching changes nothing a handler sees.
  EventLoop &prefetching(PrefetchFunction prefetch, uint32_t subBatch) {
    prefetcher = subBatch ? prefetch : nullptr;
    this->subBatch = subBatch;
    return *this;
  }

  // Replays `ring` `rounds` times, burst by burst. Every packet is a fresh
  // copy of its frame (handlers rewrite packets in place). `betweenBursts`
  // runs after each burst (a table change, a specialization cycle).
  LoopStats run(const ReplayRing &ring, unsigned rounds = 1,
                const std::function<void()> &betweenBursts = {});

  // Like run, keeping what the handler did to every packet.
  std::vector<PacketResult> collect(const ReplayRing &ring,
                                    const std::function<void()> &betweenBursts = {});

private:
  template <typename PerPacket>
  LoopStats loop(const ReplayRing &ring, unsigned rounds,
                 const std::function<void()> &betweenBursts, PerPacket perPacket);

  Trampoline &trampoline;
  uint32_t burstSize;
  PrefetchFunction prefetcher = nullptr;
  uint32_t subBatch = 0;
};

// One packet through `handler`.
PacketResult runPacket(HandlerFunction handler, const Bytes &frame, uint32_t ingressPort);

} // namespace morpheus::user
