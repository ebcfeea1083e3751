// What the kernel tests of tests/programs/tc_classifier.bpf.c share: the
// layout of its configuration, and the XDP program real frames across a
// veth need on the receiving side.
#pragma once

#include "backend/bpf/ProgramLink.h"
#include "netns/VethPair.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

#include <cerrno>
#include <cstdint>

namespace morpheus::testing {

// tc_classifier's `struct tc_config`.
struct TcConfig {
  uint32_t mode, mark;
  uint8_t dscp, pad[3];
};

// veth accepts frames sent with XDP_TX (the traffic generator) only on a
// peer with a native XDP program: one that passes everything.
inline Expected<bpf::ProgramLink> attachXdpPass(const VethPair &veth) {
  const bpf_insn pass[] = {
      {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_PASS},
      {.code = BPF_JMP | BPF_EXIT},
  };
  int program = bpf_prog_load(BPF_PROG_TYPE_XDP, "xdp_pass", "GPL", pass, 2, nullptr);
  if (program < 0)
    return makeSystemError(errno, "xdp_pass");
  auto link = bpf::ProgramLink::attach(program,
                                       bpf::AttachPoint{bpf::ProgramType::Xdp, veth.ifB(), veth.nsB()});
  close(program); // the link holds it
  return link;
}

} // namespace morpheus::testing
