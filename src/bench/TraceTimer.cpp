#include "TraceTimer.h"

#include "support/CpuPin.h"

#include <algorithm>
#include <unistd.h>

namespace morpheus::bench {

Expected<LiveTarget> LiveTarget::attach(bpf::ProgramType type, const std::string &ingress,
                                       int programFd, int passFd, uint32_t senderIfindex) {
  std::optional<bpf::ProgramLink> passing;
  bpf::AttachPoint point;
  point.iface = ingress;
  if (type == bpf::ProgramType::Tc) {
    auto attached = bpf::ProgramLink::attach(passFd, point);
    if (!attached)
      return withContext(attached.takeError(), "live method: passing frames on to tcx");
    passing.emplace(std::move(*attached));
    point.type = bpf::ProgramType::Tc;
  }
  auto link = bpf::ProgramLink::attach(programFd, point);
  if (!link)
    return link.takeError();
  return LiveTarget{std::move(*link), std::move(passing), senderIfindex};
}

Expected<Timing> TraceTimer::time(int fd, uint32_t start, uint32_t count) {
  if (cpuEdges.empty())
    return timeHere(fd, start, count);
  long cpus = std::max(1L, sysconf(_SC_NPROCESSORS_ONLN));
  Timing total;
  Error failed = Error::success();
  for (uint32_t at = start, end = start + count; at < end && !failed;) {
    size_t part = std::upper_bound(cpuEdges.begin(), cpuEdges.end(), at) - cpuEdges.begin();
    uint32_t partEnd = part < cpuEdges.size() ? std::min<uint64_t>(end, cpuEdges[part]) : end;
    CpuPin pin(int(part % size_t(cpus)));
    auto timing = timeHere(fd, at, partEnd - at);
    if (!timing) {
      failed = timing.takeError();
      break;
    }
    total.ns += timing->ns * (partEnd - at) / count;
    total.mpps += timing->mpps * (partEnd - at) / count;
    at = partEnd;
  }
  if (failed)
    return std::move(failed);
  return total;
}

Expected<Timing> TraceTimer::timeTrace(int fd, uint32_t segments, std::vector<double> *perSegment) {
  Timing total;
  for (uint32_t i = 0; i < segments; ++i) {
    uint32_t start = uint64_t(packets) * i / segments;
    uint32_t count = uint64_t(packets) * (i + 1) / segments - start;
    auto timing = time(fd, start, count);
    if (!timing)
      return timing.takeError();
    if (perSegment)
      perSegment->push_back(timing->ns);
    total.ns += timing->ns * count / packets;
    total.mpps += timing->mpps * count / packets;
  }
  return total;
}

Expected<double> TraceTimer::emptyAlone(int emptyFd, double controlNs) {
  // Live, and TC (run without a driver), the control is the empty program
  // alone already.
  if (live || driver.programType() == bpf::ProgramType::Tc)
    return controlNs;
  return driver.measureAlone(emptyFd, packets, ingress);
}

Expected<Timing> TraceTimer::timeHere(int fd, uint32_t start, uint32_t count) {
  return live ? timeLive(fd, start, count) : timeDriven(fd, start, count);
}

Expected<Timing> TraceTimer::timeDriven(int fd, uint32_t start, uint32_t count) {
  if (Error err = driver.setTarget(fd))
    return err;
  auto ns = driver.measure(start, count, ingress);
  if (!ns)
    return ns.takeError();
  return Timing{*ns, 0};
}

Expected<Timing> TraceTimer::timeLive(int fd, uint32_t start, uint32_t count) {
  if (Error err = live->link.replace(fd))
    return err;
  bpf::ProgramRunStats before = bpf::programRunStats(fd);
  auto duration = driver.send(start, count, live->senderIfindex);
  if (!duration)
    return duration.takeError();
  bpf::ProgramRunStats after = bpf::programRunStats(fd);
  // Frames the veth could not queue never reach the program; a rate from
  // a few survivors would be meaningless.
  if (after.runCount - before.runCount < count / 2)
    return makeError("trace {0}: only {1} of {2} live frames reached the program", trace.name,
                     after.runCount - before.runCount, count);
  return Timing{double(after.runTimeNs - before.runTimeNs) /
                    double(after.runCount - before.runCount),
                count / *duration * 1e3};
}

std::vector<uint64_t> cpuEdges(const Trace &trace, const BenchOptions &options) {
  if (!options.twoCpus || trace.name != PhasedTrace)
    return {};
  return cantFail(phaseEdges(options.phases, trace.sequence.size())); // checked when generated
}

} // namespace morpheus::bench
