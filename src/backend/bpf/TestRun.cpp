#include "backend/bpf/TestRun.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>

namespace morpheus::bpf {

Expected<TestRunOutput> testRun(int programFd, const TestRunInput &input) {
  TestRunOutput output;
  output.packet.resize(input.packetRoom);
  output.context.resize(input.keepContext ? input.context.size() : 0);
  LIBBPF_OPTS(bpf_test_run_opts, run, .data_in = input.packet.data(),
              .data_out = input.packetRoom ? output.packet.data() : nullptr,
              .data_size_in = uint32_t(input.packet.size()),
              .data_size_out = uint32_t(input.packetRoom),
              .ctx_in = input.context.empty() ? nullptr : input.context.data(),
              .ctx_out = input.keepContext ? output.context.data() : nullptr,
              .ctx_size_in = uint32_t(input.context.size()),
              .ctx_size_out = uint32_t(output.context.size()), .repeat = int(input.repeat),
              .flags = input.liveBatch ? uint32_t(BPF_F_TEST_XDP_LIVE_FRAMES) : 0u,
              .batch_size = input.liveBatch);
  if (bpf_prog_test_run_opts(programFd, &run))
    return makeSystemError(errno, "BPF_PROG_TEST_RUN of program fd {0}", programFd);
  output.verdict = run.retval;
  output.packet.resize(input.packetRoom ? run.data_size_out : 0);
  output.context.resize(input.keepContext ? run.ctx_size_out : 0);
  output.meanNs = run.duration;
  return output;
}

} // namespace morpheus::bpf
