// The calling thread pinned to one CPU while this object lives, its
// previous affinity restored after. BPF_PROG_TEST_RUN runs a program on the
// caller's CPU, so per-CPU map slots, per-CPU fast paths and timings are
// those of whichever CPU the thread is on: the fuzzer, the bench's two-CPU
// traces and the per-CPU tests each hold one of these while they run.
#pragma once

#include <sched.h>

namespace morpheus {

class CpuPin {
public:
  // `cpu` < 0: the CPU the thread runs on now.
  explicit CpuPin(int cpu = -1) {
    saved = sched_getaffinity(0, sizeof(previous), &previous) == 0;
    if (cpu < 0)
      cpu = sched_getcpu();
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(cpu < 0 ? 0 : cpu, &one);
    pinned = sched_setaffinity(0, sizeof(one), &one) == 0;
  }
  ~CpuPin() {
    if (saved)
      sched_setaffinity(0, sizeof(previous), &previous);
  }
  CpuPin(const CpuPin &) = delete;
  CpuPin &operator=(const CpuPin &) = delete;

  bool ok() const { return pinned; }

private:
  cpu_set_t previous;
  bool saved = false, pinned = false;
};

} // namespace morpheus
