// The trace driver (trace_driver.bpf.c) loaded, with a trace in its maps:
// it replays the trace's packets through whatever program sits in its
// target slot (a tail call), or sends them as live frames out of an
// interface. Every bench measurement runs packets through it.
//
// A TC program cannot be tail-called from the XDP driver, and repeated
// runs of one BPF_PROG_TEST_RUN share one skb (the kernel resets neither
// its bytes nor its fields, so a program that changes the packet would see
// its own output). TC programs are therefore driven from here: one test
// run per packet (repeat = 1, a fresh skb of the trace's frame each time),
// timed together by the program's bpf_stats. The stats count only the
// program's own runs, so the syscall per packet does not enter the
// figure; it costs wall-clock time (docs/benchmarks.md).
#pragma once

#include "Trace.h"
#include "trace_driver.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/ProgramType.h"
#include "backend/bpf/TestRun.h"

#include <utility>
#include <vector>

namespace morpheus::bench {

class TraceDriver {
public:
  // Drives programs of `type`: XDP (the BPF driver) or TC (test runs of
  // their own, above). With `sends` (the live method), a TC trace is also
  // written to the driver's maps, which the sender reads.
  static Expected<TraceDriver> load(bpf::ProgramType type = bpf::ProgramType::Xdp,
                                    bool sends = false);

  // `trace` must outlive the measurements (TC runs read its frames).
  Error setTrace(const Trace &trace);
  Error setTarget(int programFd);
  bpf::ProgramType programType() const { return type; }

  // Replays `repeat` packets of the trace from packet `start` on and returns
  // ns/packet by bpf_stats: for XDP the driver's run time, which includes
  // the tail-called program's; for TC the target's own.
  Expected<double> measure(uint32_t start, uint32_t repeat, uint32_t ingress);
  // Packet `position` of the trace through the target once: its verdict
  // and the frame it left.
  Expected<std::pair<uint32_t, std::vector<uint8_t>>> runOne(uint32_t position,
                                                             uint32_t ingress);
  // Counters the driver keeps about the programs it drove.
  Expected<trace_state> state() const;
  // Live method: transmits `repeat` packets of the trace from `start` on out
  // of interface `ifindex` (its veth peer runs the program under test) and
  // returns the kernel's duration of the whole run in ns.
  Expected<double> send(uint32_t start, uint32_t repeat, uint32_t ifindex);
  // Runs `programFd` directly on the template frame (the empty control);
  // XDP only (for TC, measure() already times the program alone).
  Expected<double> measureAlone(int programFd, uint32_t repeat, uint32_t ingress);

private:
  TraceDriver(bpf::LoadedObject object, bpf::ProgramType type, bool sends)
      : object(std::move(object)), type(type), sends(sends) {}
  int fd() const { return object.programFd("trace_driver"); }
  bpf::MapAccess map(const char *name) const { return {object.mapFd(name), name}; }
  Error resetCursor(uint32_t cursor);
  // Runs `programFd` `repeat` times on the template frame arriving on
  // `ingress`; `outputRoom` bytes of the frame it leaves are kept.
  Expected<bpf::TestRunOutput> testRun(int programFd, uint32_t repeat, uint32_t ingress,
                                       size_t outputRoom = 0);
  // TC: packet `position` of the trace through the target once, on a fresh
  // skb arriving on `ingress`.
  Expected<bpf::TestRunOutput> runTc(uint32_t position, uint32_t ingress, size_t outputRoom);

  bpf::LoadedObject object;
  bpf::ProgramType type;
  bool sends;
  const Trace *replaying = nullptr;
  int target = -1; // TC: the program under test
  std::vector<uint8_t> templateFrame;
  uint32_t frameLength = 0, packets = 0;
};

// The empty programs, the control every measurement subtracts: "empty"
// (XDP) and "empty_tc".
Expected<bpf::LoadedObject> loadEmptyControl();
// The empty control's program name for programs of `type`.
const char *emptyControlName(bpf::ProgramType type);

} // namespace morpheus::bench
