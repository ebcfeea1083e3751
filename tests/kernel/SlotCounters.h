// Traffic through a dispatcher whose middle slot holds the owner's
// policy_fwd, every packet counted: by the programs of the slots before and
// after it (slot_counters.bpf.c, loaded by plain libbpf) and by the
// owner's stats, so that a test sees every packet enter the dispatcher, be
// answered by the adopted slot (whichever version serves it) and, exactly
// when passed, go on. Shared by the dispatcher and agent tests.
#pragma once

#include "AdoptionOwners.h"
#include "KernelSupport.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

extern "C" const unsigned char slot_counters_bpf_start[], slot_counters_bpf_end[];

namespace morpheus::testing {

// slot_counters.bpf.c: count_in for the slot before the adopted one,
// count_out for the slot after it.
class SlotCounters {
public:
  SlotCounters() {
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "slot_counters");
    object = bpf_object__open_mem(slot_counters_bpf_start,
                                  slot_counters_bpf_end - slot_counters_bpf_start, &opts);
    if (!object || bpf_object__load(object)) {
      ADD_FAILURE() << "slot_counters did not load";
      return;
    }
    in = bpf_program__fd(bpf_object__find_program_by_name(object, "count_in"));
    out = bpf_program__fd(bpf_object__find_program_by_name(object, "count_out"));
  }
  ~SlotCounters() { bpf_object__close(object); }
  SlotCounters(const SlotCounters &) = delete;
  SlotCounters &operator=(const SlotCounters &) = delete;

  // Packets seen by the slot before the adopted one, and by the one after.
  std::vector<uint64_t> counts() const {
    return perCpuCounters(bpf_map__fd(bpf_object__find_map_by_name(object, "slot_counts")), 2);
  }

  int in = -1, out = -1;

private:
  bpf_object *object = nullptr;
};

// Frames across the veth from construction until stop(), which returns
// how many were sent.
class DispatcherTraffic {
public:
  DispatcherTraffic(const VethPair &veth, std::vector<trafficgen::Flow> flows)
      : generator(trafficgen::LiveFramesGenerator::create(trafficgen::acrossVeth(veth, flows))),
        sender([this] {
          while (!stopping)
            sent += generator.send(Burst).packetsSent;
        }) {}
  ~DispatcherTraffic() { stop(); }
  uint64_t stop() {
    stopping = true;
    if (sender.joinable())
      sender.join();
    return sent;
  }

private:
  static constexpr uint64_t Burst = 100000;
  trafficgen::LiveFramesGenerator generator;
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> sent{0};
  std::thread sender; // last: started once the rest is built
};

// Half the flows hit the owner's drop policy (UDP to 10.0.0.1:80), half
// pass on to the next slot.
inline std::vector<trafficgen::Flow> halfDroppedFlows() {
  std::vector<trafficgen::Flow> flows;
  for (uint32_t i = 0; i < 4; ++i) {
    flows.push_back({0x0a0000c8 + i, 0x0a000001, uint16_t(1000 + i), 80, IPPROTO_UDP});
    flows.push_back({0x0a0000c8 + i, 0x0a000002, uint16_t(1000 + i), 80, IPPROTO_UDP});
  }
  return flows;
}

// What one phase of traffic did, from the counters of the three slots.
struct Counted {
  uint64_t entered = 0, dropped = 0, passed = 0, wentOn = 0;
};
inline Counted countedBy(const SlotCounters &counters, const Owner &owner) {
  std::vector<uint64_t> slots = counters.counts();
  std::vector<uint64_t> verdicts = perCpuCounters(owner.mapFd("stats"), STAT_MAX);
  return {slots[0], verdicts[STAT_DROP], verdicts[STAT_PASS], slots[1]};
}

// Every packet sent since `before` was counted by the first slot, answered
// by the adopted program (dropped or passed, and nothing else), and went on
// to the last slot exactly when it passed.
inline void expectEveryPacketCounted(const SlotCounters &counters, const Owner &owner,
                                     const Counted &before, uint64_t sent,
                                     const std::string &when) {
  Counted now;
  EXPECT_TRUE(waitFor(
      [&] {
        now = countedBy(counters, owner);
        return now.entered - before.entered >= sent;
      },
      std::chrono::milliseconds(2000)))
      << when << ": every frame reaches the dispatcher";
  EXPECT_EQ(now.entered - before.entered, sent) << when << ": packets lost";
  EXPECT_EQ((now.dropped - before.dropped) + (now.passed - before.passed), sent)
      << when << ": every packet answered by the adopted slot";
  EXPECT_GT(now.dropped - before.dropped, 0u) << when;
  EXPECT_GT(now.passed - before.passed, 0u) << when;
  EXPECT_EQ(now.wentOn - before.wentOn, now.passed - before.passed)
      << when << ": exactly the passed packets go on to the next slot";
}

} // namespace morpheus::testing
