// The context of a sample packet (runtime/PacketSamples): the fields of the
// xdp_md or __sk_buff that BPF_PROG_TEST_RUN takes from user space, drawn
// for each packet from values that matter to the program, so that code
// gated on them runs in shadow validation and in the fuzzer (a TC program
// whose work is for packets carrying a mark; an XDP program that works on
// one receive queue). Every version compared gets the same context.
//
// Only fields the program reads are drawn (core/ContextReads; all settable
// ones when the analysis lost the pointer), each from: zero, the values the
// program's tests single out, numbers from the tables' keys and values (a
// mark compared with a configured one), and biased random numbers; device
// fields from the interfaces of the namespace the check runs in (a receive
// queue below the drawn device's count).
#pragma once

#include "backend/bpf/ProgramSpec.h"
#include "backend/bpf/ProgramType.h"
#include "support/Error.h"

#include <cstdint>
#include <functional>
#include <map>
#include <random>
#include <string>
#include <vector>

namespace morpheus::runtime {

// Context field values by field name (bpf::ContextField::name).
using ContextValues = std::map<std::string, uint64_t>;

struct ContextPlan {
  bpf::ProgramType type = bpf::ProgramType::Xdp;
  struct Field {
    bpf::ContextField field;
    std::vector<uint64_t> singledOut; // by the program's tests
  };
  std::vector<Field> fields; // the settable fields the program reads
  // The namespace's interfaces: index -> receive queues.
  std::map<uint32_t, uint32_t> devices;
};

// The plan for program `entry` of `spec`, in the calling thread's network
// namespace. `zeroed` (test-only, core::FaultInjection::zeroedContext)
// draws nothing: every field stays zero.
Expected<ContextPlan> planContext(const bpf::ProgramSpec &spec, const std::string &entry,
                                  bool zeroed);

// One packet's context under `plan`; `packetLength` bounds wire_len, and
// `fromTables(width)` is a number of `width` bytes found in the tables.
ContextValues drawContext(const ContextPlan &plan, std::mt19937_64 &rng, size_t packetLength,
                          const std::function<uint64_t(size_t width)> &fromTables);

} // namespace morpheus::runtime
