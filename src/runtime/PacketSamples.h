// Sample packets for comparing versions of a program, and running one
// through BPF_PROG_TEST_RUN. Shared by the differential fuzzer
// (runtime/Differential) and the optimizer's pre-swap shadow validation
// (runtime/ShadowValidation): both need packets that actually hit the
// tables' entries, and malformed ones that probe every bounds check.
#pragma once

#include "backend/bpf/KernelTypes.h"
#include "backend/bpf/ProgramType.h"
#include "core/Tables.h"
#include "runtime/ContextSamples.h"
#include "support/Error.h"

#include <cstdint>
#include <random>
#include <utility>
#include <vector>

namespace morpheus::runtime {

using Rng = std::mt19937_64;

// An integer field of a key or value (bpf::KernelTypes reads them).
using Field = bpf::IntegerField;

// A random integer of `width` bytes biased towards what programs branch on
// and what breaks arithmetic: 0 (a divisor or count not configured yet), 1,
// small numbers such as protocol numbers, all-ones, the widths and shift
// counts at and past them (7 to 256), the signed extremes, and `compared`
// (the constants the program compares with, core/ComparedConstants).
uint64_t biased(Rng &rng, uint32_t width, const std::vector<uint64_t> &compared = {});

// Entries of one table whose keys and values packets should carry.
struct KeyedTable {
  unsigned type = 0;             // BPF map type
  std::vector<Field> keyFields;  // from BTF; empty = the key's aligned words
  std::vector<std::pair<core::Bytes, core::Bytes>> entries;
};

struct SamplePacket {
  core::Bytes packet;
  // The context fields the run sets (the others are zero).
  ContextValues context = {};
  // The random stream every compared copy draws from in this run
  // (backend/bpf/dataplane/replay_abi.h).
  uint64_t randomSeed = 0;
};

// `count` packets: most are valid Ethernet/802.1Q/IPv4/IPv6 with UDP, TCP or
// ICMP whose addresses, ports and protocol come from the tables' keys and
// values, some with IP options or fragment bits; a quarter are cut at a
// header boundary and one in eight is random bytes. Each gets a context
// drawn under `context` and a random seed.
std::vector<SamplePacket> synthesizePackets(const std::vector<KeyedTable> &tables, Rng &rng,
                                            uint32_t count, const ContextPlan &context);

struct PacketResult {
  uint32_t verdict = 0;
  core::Bytes output;
  core::Bytes context; // the context after the run, as the kernel returns it
};

// Runs `packet` once through the program (BPF_PROG_TEST_RUN) with the
// context of its type: an xdp_md, or an __sk_buff for TC, holding the
// packet's context values. The kernel builds
// an skb only from a whole Ethernet header and, behind an IPv4/IPv6
// ethertype, a whole IP header: a shorter TC packet is run zero-padded to
// that length (every version gets the same input).
Expected<PacketResult> runPacket(int programFd, bpf::ProgramType type,
                                 const SamplePacket &packet);

} // namespace morpheus::runtime
