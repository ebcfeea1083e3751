#include "backend/user/EventLoop.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <ctime>

namespace morpheus::user {

double threadCpuSeconds() {
  timespec now;
  clock_gettime(CLOCK_THREAD_CPUTIME_ID, &now);
  return double(now.tv_sec) + double(now.tv_nsec) * 1e-9;
}

template <typename PerPacket>
LoopStats EventLoop::loop(const ReplayRing &ring, unsigned rounds,
                          const std::function<void()> &betweenBursts, PerPacket perPacket) {
  LoopStats stats;
  size_t longest = 0;
  for (const Bytes &frame : ring.frames)
    longest = std::max(longest, frame.size());
  // One buffer per burst slot, rewritten from the frame before each use.
  std::vector<Bytes> buffers(burstSize, Bytes(longest));
  std::vector<mu_packet> packets(burstSize);
  auto start = std::chrono::steady_clock::now();
  double cpuStart = threadCpuSeconds();
  for (unsigned round = 0; round < rounds; ++round) {
    for (size_t first = 0; first < ring.sequence.size(); first += burstSize) {
      size_t count = std::min<size_t>(burstSize, ring.sequence.size() - first);
      for (size_t i = 0; i < count; ++i) {
        const Bytes &frame = ring.frames[ring.sequence[first + i]];
        std::memcpy(buffers[i].data(), frame.data(), frame.size());
        packets[i] = {buffers[i].data(), uint32_t(frame.size()), ring.ingressPort};
      }
      {
        Trampoline::Burst burst = trampoline.enter(); // one version per burst
        HandlerFunction handler = burst.handler();
        if (prefetcher)
          for (size_t i = 0; i < std::min<size_t>(subBatch, count); ++i)
            prefetcher(&packets[i]);
        for (size_t i = 0; i < count; ++i) {
          // At each sub-batch's start, the next sub-batch's entries.
          if (prefetcher && i % subBatch == 0)
            for (size_t next = i + subBatch; next < std::min<size_t>(i + 2 * subBatch, count);
                 ++next)
              prefetcher(&packets[next]);
          int verdict = handler(&packets[i]);
          stats.countVerdict(verdict);
          perPacket(packets[i], verdict);
        }
      } // the burst has left its version: the quiescent point
      stats.packets += count;
      ++stats.bursts;
      if (betweenBursts)
        betweenBursts();
    }
  }
  stats.seconds = threadCpuSeconds() - cpuStart;
  stats.wallSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return stats;
}

LoopStats EventLoop::run(const ReplayRing &ring, unsigned rounds,
                         const std::function<void()> &betweenBursts) {
  return loop(ring, rounds, betweenBursts, [](const mu_packet &, int) {});
}

std::vector<PacketResult> EventLoop::collect(const ReplayRing &ring,
                                             const std::function<void()> &betweenBursts) {
  std::vector<PacketResult> results;
  loop(ring, 1, betweenBursts, [&](const mu_packet &packet, int verdict) {
    results.push_back({verdict, packet.port, Bytes(packet.data, packet.data + packet.len)});
  });
  return results;
}

PacketResult runPacket(HandlerFunction handler, const Bytes &frame, uint32_t ingressPort) {
  Bytes buffer = frame;
  mu_packet packet{buffer.data(), uint32_t(buffer.size()), ingressPort};
  int verdict = handler(&packet);
  return {verdict, packet.port, std::move(buffer)};
}

} // namespace morpheus::user
