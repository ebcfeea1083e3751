#include "TraceDriver.h"

#include <linux/bpf.h>
#include <llvm/Support/FormatVariadic.h>

#include <cstring>

extern "C" const unsigned char bench_trace_driver_start[], bench_trace_driver_end[];
extern "C" const unsigned char bench_empty_start[], bench_empty_end[];

namespace morpheus::bench {

static_assert(sizeof(trace_frame) == TRACE_FRAME_MAX);
static_assert(sizeof(trace_state) == 24);

namespace {

llvm::ArrayRef<char> embedded(const unsigned char *start, const unsigned char *end) {
  return {reinterpret_cast<const char *>(start), size_t(end - start)};
}

} // namespace

Expected<TraceDriver> TraceDriver::load(bpf::ProgramType type, bool sends) {
  if (type == bpf::ProgramType::Other)
    return makeError("trace driver: only XDP and TC programs can be driven");
  auto object = bpf::LoadedObject::load(
      embedded(bench_trace_driver_start, bench_trace_driver_end), "bench_driver", {});
  if (!object)
    return object.takeError();
  return TraceDriver(std::move(*object), type, sends);
}

Error TraceDriver::setTrace(const Trace &trace) {
  replaying = &trace;
  frameLength = trace.frameLength;
  packets = uint32_t(trace.sequence.size());
  templateFrame.assign(trace.frames[trace.sequence[0]].begin(),
                       trace.frames[trace.sequence[0]].end());
  if (type == bpf::ProgramType::Tc && !sends)
    return Error::success(); // test runs read the trace itself
  bpf::MapAccess frames = map("frames"), sequence = map("sequence");
  for (uint32_t i = 0; i < trace.frames.size(); ++i) {
    trace_frame frame = {};
    std::memcpy(frame.words, trace.frames[i].data(), trace.frames[i].size());
    if (Error err = frames.put(i, frame))
      return withContext(std::move(err), "trace driver");
  }
  // In batches rather than a million single updates.
  std::vector<uint32_t> keys(packets);
  for (uint32_t i = 0; i < packets; ++i)
    keys[i] = i;
  if (Error err = sequence.updateBatch(
          {reinterpret_cast<const uint8_t *>(keys.data()), keys.size() * sizeof(uint32_t)},
          {reinterpret_cast<const uint8_t *>(trace.sequence.data()),
           trace.sequence.size() * sizeof(trace.sequence[0])},
          packets))
    return withContext(std::move(err), "trace driver: the packet sequence");
  return resetCursor(0);
}

Error TraceDriver::setTarget(int programFd) {
  if (type == bpf::ProgramType::Tc) {
    target = programFd;
    return Error::success();
  }
  return withContext(map("target").put(uint32_t(0), programFd),
                     llvm::formatv("trace driver: cannot tail-call program fd {0} (is it XDP?)",
                                   programFd)
                         .str());
}

Expected<double> TraceDriver::measure(uint32_t start, uint32_t repeat, uint32_t ingress) {
  if (type == bpf::ProgramType::Tc) {
    bpf::ProgramRunStats before = bpf::programRunStats(target);
    for (uint32_t i = 0; i < repeat; ++i)
      if (auto ran = runTc((start + i) % packets, ingress, 0); !ran)
        return ran.takeError();
    bpf::ProgramRunStats after = bpf::programRunStats(target);
    if (after.runCount == before.runCount)
      return makeError("trace driver: bpf_stats counted no runs (are stats enabled?)");
    return double(after.runTimeNs - before.runTimeNs) / double(after.runCount - before.runCount);
  }
  if (Error err = resetCursor(start))
    return err;
  bpf::ProgramRunStats before = bpf::programRunStats(fd());
  if (auto ran = testRun(fd(), repeat, ingress); !ran)
    return ran.takeError();
  bpf::ProgramRunStats after = bpf::programRunStats(fd());
  if (after.runCount == before.runCount)
    return makeError("trace driver: bpf_stats counted no runs (are stats enabled?)");
  return double(after.runTimeNs - before.runTimeNs) / double(after.runCount - before.runCount);
}

Expected<std::pair<uint32_t, std::vector<uint8_t>>> TraceDriver::runOne(uint32_t position,
                                                           uint32_t ingress) {
  if (type == bpf::ProgramType::Tc) {
    auto ran = runTc(position, ingress, frameLength + 512);
    if (!ran)
      return ran.takeError();
    return std::make_pair(ran->verdict, std::move(ran->packet));
  }
  if (Error err = resetCursor(position))
    return err;
  auto ran = testRun(fd(), 1, ingress, frameLength + 512);
  if (!ran)
    return ran.takeError();
  return std::make_pair(ran->verdict, std::move(ran->packet));
}

Expected<trace_state> TraceDriver::state() const {
  auto st = map("state").find<trace_state>(uint32_t(0));
  if (!st)
    return withContext(st.takeError(), "trace driver");
  return st->value_or(trace_state{});
}

Expected<double> TraceDriver::send(uint32_t start, uint32_t repeat, uint32_t ifindex) {
  if (Error err = resetCursor(start))
    return err;
  xdp_md context = {};
  context.data_end = uint32_t(templateFrame.size());
  context.ingress_ifindex = ifindex;
  bpf::TestRunInput live;
  live.packet = templateFrame;
  live.context = byteView(context);
  live.repeat = repeat;
  live.liveBatch = 64;
  auto ran = bpf::testRun(object.programFd("trace_sender"), live);
  if (!ran)
    return withContext(ran.takeError(),
                       "trace sender: live frames out of ifindex " + std::to_string(ifindex));
  return double(ran->meanNs) * repeat;
}

Expected<double> TraceDriver::measureAlone(int programFd, uint32_t repeat, uint32_t ingress) {
  bpf::ProgramRunStats before = bpf::programRunStats(programFd);
  if (auto ran = testRun(programFd, repeat, ingress); !ran)
    return ran.takeError();
  bpf::ProgramRunStats after = bpf::programRunStats(programFd);
  if (after.runCount == before.runCount)
    return makeError("bpf_stats counted no runs of the empty program");
  return double(after.runTimeNs - before.runTimeNs) / double(after.runCount - before.runCount);
}

Error TraceDriver::resetCursor(uint32_t cursor) {
  auto st = state();
  if (!st)
    return st.takeError();
  st->packets = packets;
  st->frame_length = frameLength;
  st->cursor = cursor;
  return withContext(map("state").put(uint32_t(0), *st), "trace driver");
}

Expected<bpf::TestRunOutput> TraceDriver::testRun(int programFd, uint32_t repeat, uint32_t ingress,
                                     size_t outputRoom) {
  xdp_md context = {};
  context.data_end = uint32_t(templateFrame.size());
  context.ingress_ifindex = ingress;
  bpf::TestRunInput run;
  run.packet = templateFrame;
  run.packetRoom = outputRoom;
  run.context = byteView(context);
  run.repeat = repeat;
  return bpf::testRun(programFd, run);
}

Expected<bpf::TestRunOutput> TraceDriver::runTc(uint32_t position, uint32_t ingress,
                                                size_t outputRoom) {
  // As the packet is at the tc ingress hook of the interface it arrived on.
  __sk_buff context = {};
  context.ifindex = ingress;
  context.ingress_ifindex = ingress;
  bpf::TestRunInput run;
  run.packet = replaying->frames[replaying->sequence[position]];
  run.packetRoom = outputRoom;
  run.context = byteView(context);
  auto ran = bpf::testRun(target, run);
  if (!ran)
    return withContext(ran.takeError(),
                       llvm::formatv("trace {0}, packet {1} (TC)", replaying->name, position).str());
  return ran;
}

const char *emptyControlName(bpf::ProgramType type) {
  return type == bpf::ProgramType::Tc ? "empty_tc" : "empty";
}

Expected<bpf::LoadedObject> loadEmptyControl() {
  return bpf::LoadedObject::load(embedded(bench_empty_start, bench_empty_end), "bench_empty", {});
}

} // namespace morpheus::bench
