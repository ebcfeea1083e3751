// The trace driver (trace_driver.bpf.c) loaded, with a trace in its maps:
// it replays the trace's packets through whatever program sits in its
// target slot (a tail call), or sends them as live frames out of an
// interface. Every bench measurement runs packets through it.
#pragma once

#include "Trace.h"
#include "trace_driver.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/TestRun.h"

#include <utility>
#include <vector>

namespace morpheus::bench {

class TraceDriver {
public:
  static Expected<TraceDriver> load();

  Error setTrace(const Trace &trace);
  Error setTarget(int programFd);

  // Replays `repeat` packets of the trace from packet `start` on and returns
  // ns/packet by bpf_stats: the driver's run time includes the tail-called
  // program's.
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
  // Runs `programFd` directly on the template frame (the empty control).
  Expected<double> measureAlone(int programFd, uint32_t repeat, uint32_t ingress);

private:
  explicit TraceDriver(bpf::LoadedObject object) : object(std::move(object)) {}
  int fd() const { return object.programFd("trace_driver"); }
  bpf::MapAccess map(const char *name) const { return {object.mapFd(name), name}; }
  Error resetCursor(uint32_t cursor);
  // Runs `programFd` `repeat` times on the template frame arriving on
  // `ingress`; `outputRoom` bytes of the frame it leaves are kept.
  Expected<bpf::TestRunOutput> testRun(int programFd, uint32_t repeat, uint32_t ingress,
                                       size_t outputRoom = 0);

  bpf::LoadedObject object;
  std::vector<uint8_t> templateFrame;
  uint32_t frameLength = 0, packets = 0;
};

// The empty program, the control every measurement subtracts.
Expected<bpf::LoadedObject> loadEmptyControl();

} // namespace morpheus::bench
