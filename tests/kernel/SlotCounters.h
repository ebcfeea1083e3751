// The programs of the kernel tests' dispatcher slots before and after the
// adopted one (slot_counters.bpf.c, loaded by plain libbpf): each counts
// the packets it sees, so that a test sees every packet enter the
// dispatcher and exactly those the adopted program passed go on. Shared by
// the dispatcher and agent tests.
#pragma once

#include "KernelSupport.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>

#include <cstdint>
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

} // namespace morpheus::testing
