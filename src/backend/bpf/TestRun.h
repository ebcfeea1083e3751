// One BPF_PROG_TEST_RUN of a loaded program: a packet and a context in;
// the verdict, the packet and the context as the program left them, and
// the kernel's time per run, out. The equivalence checks, the benchmark
// and the calibration all run programs through it.
#pragma once

#include "support/Bytes.h"
#include "support/Error.h"

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>

namespace morpheus::bpf {

struct TestRunInput {
  llvm::ArrayRef<uint8_t> packet;
  // Room for the packet as the program leaves it; 0: not kept.
  size_t packetRoom = 0;
  // The context the run starts from (an xdp_md, a __sk_buff); empty: none.
  llvm::ArrayRef<uint8_t> context;
  bool keepContext = false; // the context as the program left it, out
  uint32_t repeat = 1;
  // XDP: the frames the program passes or redirects are transmitted for
  // real (BPF_F_TEST_XDP_LIVE_FRAMES), `liveBatch` at a time; 0: not live.
  uint32_t liveBatch = 0;
};

struct TestRunOutput {
  uint32_t verdict = 0;
  Bytes packet, context; // when asked for
  uint32_t meanNs = 0;   // per run, the kernel's clock
};

// Runs `programFd` once per input.repeat; the error names the fd.
Expected<TestRunOutput> testRun(int programFd, const TestRunInput &input);

} // namespace morpheus::bpf
