#include "Bench.h"

#include "Oracle.h"
#include "trace_driver.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/MapUpdater.h"
#include "backend/bpf/ProgramLink.h"
#include "backend/bpf/TestRun.h"
#include "core/PhaseClock.h"
#include "core/Pipeline.h"
#include "nf/common/Registry.h"
#include "runtime/Daemon.h"
#include "support/CpuPin.h"
#include "support/Netns.h"

#include <linux/bpf.h>

#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <cmath>
#include <sched.h>
#include <set>
#include <unistd.h>

extern "C" const unsigned char bench_trace_driver_start[], bench_trace_driver_end[];
extern "C" const unsigned char bench_empty_start[], bench_empty_end[];

namespace morpheus::bench {

static_assert(sizeof(trace_frame) == TRACE_FRAME_MAX);
static_assert(sizeof(trace_state) == 24);

double Series::median() const {
  if (values.empty())
    return NAN;
  std::vector<double> sorted = values;
  std::sort(sorted.begin(), sorted.end());
  size_t n = sorted.size();
  return n % 2 ? sorted[n / 2] : (sorted[n / 2 - 1] + sorted[n / 2]) / 2;
}
double Series::min() const {
  return values.empty() ? NAN : *std::min_element(values.begin(), values.end());
}
double Series::max() const {
  return values.empty() ? NAN : *std::max_element(values.begin(), values.end());
}

namespace {

std::string sourceDir() { return MORPHEUS_SOURCE_DIR; }

// The name of the trace generated from BenchOptions::phases.
const char PhasedTrace[] = "phased";

llvm::ArrayRef<char> embedded(const unsigned char *start, const unsigned char *end) {
  return {reinterpret_cast<const char *>(start), size_t(end - start)};
}

// A config word naming a file beside the preset becomes an absolute path,
// so setup and trace lines read like the commands an operator would type
// from the function's folder.
std::string resolveWord(const std::string &dir, const std::string &word) {
  if (word.empty() || word[0] == '-')
    return word;
  llvm::SmallString<256> path(dir);
  llvm::sys::path::append(path, word);
  return llvm::sys::fs::exists(path) ? std::string(path) : word;
}

} // namespace

void pinToCpu(int cpu) {
  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu, &set);
  sched_setaffinity(0, sizeof(set), &set); // best effort: unpinned still measures
}

namespace {

// `update MAP key HEX... value HEX...` or `global NAME HEX...` (the words
// after the keyword).
Expected<PresetWrite> parseWrite(const nf::ConfigLine &line, bool global,
                                 const std::vector<std::string> &rest) {
  PresetWrite write;
  write.line = line;
  write.kind = global ? PresetWrite::Kind::Global : PresetWrite::Kind::Map;
  auto valueAt = std::find(rest.begin(), rest.end(), "value");
  bool wellFormed = global ? rest.size() >= 2
                           : rest.size() >= 5 && rest[1] == "key" &&
                                 valueAt > rest.begin() + 2 && valueAt + 1 < rest.end();
  if (!wellFormed)
    return line.error(global ? "expected 'global NAME HEX...'"
                             : "expected 'update MAP key HEX... value HEX...'");
  write.target = rest[0];
  auto hex = [&](auto from, auto to, const char *what) -> Expected<Bytes> {
    std::vector<std::string> words(from, to);
    auto bytes = bpf::parseHexBytes(llvm::join(words, " "), write.target + " " + what);
    if (!bytes)
      return line.error("{0}", llvm::toString(bytes.takeError()));
    return bytes;
  };
  if (global) {
    auto value = hex(rest.begin() + 1, rest.end(), "value");
    if (!value)
      return value.takeError();
    write.value = std::move(*value);
    return write;
  }
  auto key = hex(rest.begin() + 2, valueAt, "key");
  if (!key)
    return key.takeError();
  auto value = hex(valueAt + 1, rest.end(), "value");
  if (!value)
    return value.takeError();
  write.key = std::move(*key);
  write.value = std::move(*value);
  return write;
}

} // namespace

Expected<Preset> readPreset(const std::string &nameOrFile) {
  std::string file = nameOrFile;
  if (nameOrFile.find('/') == std::string::npos && !llvm::sys::fs::exists(nameOrFile)) {
    // "router" -> nf/router/bench.conf, "router-20routes" -> nf/router/bench-20routes.conf,
    // else "composite_l4lb" -> tests/programs/bench/composite_l4lb.conf
    auto [function, variant] = llvm::StringRef(nameOrFile).split('-');
    file = sourceDir() + "/nf/" + function.str() + "/bench" +
           (variant.empty() ? "" : "-" + variant.str()) + ".conf";
    std::string corpus = sourceDir() + "/tests/programs/bench/" + nameOrFile + ".conf";
    if (!llvm::sys::fs::exists(file) && llvm::sys::fs::exists(corpus))
      file = corpus;
  }
  if (!llvm::sys::fs::exists(file))
    return makeError("no benchmark preset '{0}' (looked for {1}); a preset is a network "
                     "function of nf/, a program of tests/programs/bench/ or the path of a "
                     "preset file",
                     nameOrFile, file);
  auto lines = nf::readConfig(file);
  if (!lines)
    return lines.takeError();
  Preset preset;
  preset.file = file;
  std::string dir(llvm::sys::path::parent_path(file));
  // A preset in nf/FUNCTION/ sets its function up through `morpheus nf`.
  if (llvm::sys::path::filename(llvm::sys::path::parent_path(dir)) == "nf")
    preset.function = std::string(llvm::sys::path::filename(dir));
  llvm::StringRef variant = llvm::sys::path::stem(file);
  if (preset.function.empty())
    preset.name = variant.str();
  else {
    preset.name = preset.function;
    if (variant.consume_front("bench-"))
      preset.name += "-" + variant.str();
  }
  for (nf::ConfigLine &line : *lines) {
    const std::string &key = line.words[0];
    std::vector<std::string> rest;
    for (size_t i = 1; i < line.words.size(); ++i)
      rest.push_back(resolveWord(dir, line.words[i]));
    if (key == "program" && rest.size() == 1)
      preset.program = rest[0];
    else if (key == "entry" && rest.size() == 1)
      preset.entry = rest[0];
    else if (key == "cflags" && !rest.empty()) {
      for (std::string word : rest) {
        // -IDIR relative to the preset, as every other path in it.
        if (llvm::StringRef(word).starts_with("-I") && word.size() > 2 &&
            !llvm::sys::path::is_absolute(word.substr(2)))
          word = "-I" + resolveWord(dir, word.substr(2));
        preset.cflags.push_back(std::move(word));
      }
    }
    else if (key == "interfaces" && !rest.empty())
      preset.interfaces = rest;
    else if (key == "ingress" && rest.size() == 1)
      preset.ingress = rest[0];
    else if (key == "setup" && !rest.empty()) {
      if (preset.function.empty())
        return line.error("'setup' runs `morpheus nf FUNCTION ...`: only a preset in "
                          "nf/FUNCTION/ has one (configure other programs with 'update' and "
                          "'global' lines)");
      line.words = rest;
      preset.setup.push_back(line);
    } else if (key == "update" || key == "global") {
      auto write = parseWrite(line, key == "global", rest);
      if (!write)
        return write.takeError();
      preset.writes.push_back(std::move(*write));
    } else if (key == "trace")
      preset.traceArgs = rest;
    else if (key == "oracle" && rest.size() == 1)
      preset.oracle = rest[0];
    else
      return line.error("expected 'program FILE', 'entry PROGRAM', 'cflags FLAG...', "
                        "'interfaces IFACE...', 'ingress IFACE', "
                        "'setup COMMAND...', 'update MAP key HEX... value HEX...', 'global "
                        "NAME HEX...', 'trace GEN_TRACE_ARGS...' or 'oracle KIND'");
  }
  if (preset.program.empty())
    return makeError("{0}: no 'program' line", file);
  if (!preset.ingress.empty() &&
      std::find(preset.interfaces.begin(), preset.interfaces.end(), preset.ingress) ==
          preset.interfaces.end())
    return makeError("{0}: ingress '{1}' is not one of the interfaces", file, preset.ingress);
  if (preset.function.empty() &&
      std::find(preset.traceArgs.begin(), preset.traceArgs.end(), "--nf") ==
          preset.traceArgs.end())
    return makeError("{0}: a preset outside nf/ names its flows' source in its 'trace' line "
                     "(e.g. 'trace --nf firewall --config FLOWS')",
                     file);
  return preset;
}

namespace {

// The trace driver loaded, with a trace in its maps; measures whatever
// program sits in its target slot.
class Driver {
public:
  static Expected<Driver> load() {
    auto object = bpf::LoadedObject::load(
        embedded(bench_trace_driver_start, bench_trace_driver_end), "bench_driver", {});
    if (!object)
      return object.takeError();
    return Driver(std::move(*object));
  }

  Error setTrace(const Trace &trace) {
    frameLength = trace.frameLength;
    packets = uint32_t(trace.sequence.size());
    bpf::MapAccess frames = map("frames"), sequence = map("sequence");
    for (uint32_t i = 0; i < trace.frames.size(); ++i) {
      trace_frame frame = {};
      std::memcpy(frame.words, trace.frames[i].data(), trace.frames[i].size());
      if (Error err = frames.put(i, frame))
        return withContext(std::move(err), "trace driver");
    }
    // One batch call instead of a million single updates.
    std::vector<uint32_t> keys(packets);
    for (uint32_t i = 0; i < packets; ++i)
      keys[i] = i;
    if (Error err = sequence.updateBatch(keys.data(), trace.sequence.data(), packets))
      return withContext(std::move(err), "trace driver: the packet sequence");
    templateFrame.assign(trace.frames[trace.sequence[0]].begin(),
                         trace.frames[trace.sequence[0]].end());
    return resetCursor(0);
  }

  Error setTarget(int programFd) {
    return withContext(map("target").put(uint32_t(0), programFd),
                       llvm::formatv("trace driver: cannot tail-call program fd {0} (is it XDP?)",
                                     programFd)
                           .str());
  }

  // Replays `repeat` packets of the trace from packet `start` on and returns
  // ns/packet by bpf_stats: the driver's run time includes the tail-called
  // program's.
  Expected<double> measure(uint32_t start, uint32_t repeat, uint32_t ingress) {
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

  // Packet `position` of the trace through the target once.
  Expected<std::pair<uint32_t, std::vector<uint8_t>>> runOne(uint32_t position,
                                                             uint32_t ingress) {
    if (Error err = resetCursor(position))
      return err;
    auto ran = testRun(fd(), 1, ingress, frameLength + 512);
    if (!ran)
      return ran.takeError();
    return std::make_pair(ran->verdict, std::move(ran->packet));
  }

  // Counters the driver keeps about the programs it drove.
  Expected<trace_state> state() const {
    auto st = map("state").find<trace_state>(uint32_t(0));
    if (!st)
      return withContext(st.takeError(), "trace driver");
    return st->value_or(trace_state{});
  }

  // Live method: transmits `repeat` packets of the trace from `start` on out
  // of interface `ifindex` (its veth peer runs the program under test) and
  // returns the kernel's duration of the whole run in ns.
  Expected<double> send(uint32_t start, uint32_t repeat, uint32_t ifindex) {
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

  // Runs `programFd` directly on the template frame (the empty control).
  Expected<double> measureAlone(int programFd, uint32_t repeat, uint32_t ingress) {
    bpf::ProgramRunStats before = bpf::programRunStats(programFd);
    if (auto ran = testRun(programFd, repeat, ingress); !ran)
      return ran.takeError();
    bpf::ProgramRunStats after = bpf::programRunStats(programFd);
    if (after.runCount == before.runCount)
      return makeError("bpf_stats counted no runs of the empty program");
    return double(after.runTimeNs - before.runTimeNs) / double(after.runCount - before.runCount);
  }

private:
  explicit Driver(bpf::LoadedObject object) : object(std::move(object)) {}
  int fd() const { return object.programFd("trace_driver"); }
  bpf::MapAccess map(const char *name) const { return {object.mapFd(name), name}; }

  Error resetCursor(uint32_t cursor) {
    auto st = state();
    if (!st)
      return st.takeError();
    st->packets = packets;
    st->frame_length = frameLength;
    st->cursor = cursor;
    return withContext(map("state").put(uint32_t(0), *st), "trace driver");
  }

  // Runs `programFd` `repeat` times on the template frame arriving on
  // `ingress`; `outputRoom` bytes of the frame it leaves are kept.
  Expected<bpf::TestRunOutput> testRun(int programFd, uint32_t repeat, uint32_t ingress,
                                       size_t outputRoom = 0) {
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

  bpf::LoadedObject object;
  std::vector<uint8_t> templateFrame;
  uint32_t frameLength = 0, packets = 0;
};

struct Variant {
  std::string name;
  int fd;
};

// A preset's write of a global: its bytes in its section's one-slot map.
Error writeGlobal(const runtime::Optimizer &optimizer, const PresetWrite &write) {
  for (const core::GlobalSlice &slice : optimizer.spec().globals()) {
    if (slice.global != write.target)
      continue;
    if (slice.size != write.value.size())
      return write.line.error("global '{0}' takes {1} bytes, not {2}", write.target, slice.size,
                              write.value.size());
    int fd = optimizer.mapFd(slice.sectionTable);
    if (fd < 0)
      return write.line.error("global '{0}': no map for its section {1}", write.target,
                              slice.sectionTable);
    std::string where = write.line.file + ":" + std::to_string(write.line.number);
    auto layout = bpf::layoutOf(fd, slice.sectionTable);
    if (!layout)
      return withContext(layout.takeError(), where);
    bpf::MapAccess map(fd, slice.sectionTable);
    Bytes section(layout->valueSize);
    uint32_t zero = 0;
    auto read = map.lookup(byteView(zero), section);
    if (!read || !*read)
      return withContext(read ? makeError("map '{0}': no slot 0", slice.sectionTable)
                              : read.takeError(),
                         where + ": reading section " + slice.sectionTable);
    std::copy(write.value.begin(), write.value.end(), section.begin() + slice.offset);
    return withContext(map.update(byteView(zero), section),
                       where + ": writing global '" + write.target + "'");
  }
  return write.line.error("the program has no global '{0}' in .data or .bss", write.target);
}

// The preset's control plane: its `morpheus nf` setup commands (on the
// maps `optimizer` pinned in `pinDir`), then its writes (guard bracketed,
// as `morpheus map update` writes).
Error runSetup(const Preset &preset, runtime::Optimizer &optimizer, const std::string &pinDir) {
  for (const nf::ConfigLine &line : preset.setup) {
    std::vector<std::string> words = {preset.function};
    words.insert(words.end(), line.words.begin(), line.words.end());
    words.insert(words.end(), {"--pin-dir", pinDir});
    std::fflush(stdout);
    int status = nf::runNfCommand(words);
    std::fflush(stdout); // its report before the bench's next line
    if (status != 0)
      return line.error("`morpheus nf {0} {1}` failed (exit status {2}; its message is above)",
                        preset.function, llvm::join(line.words, " "), status);
  }
  for (const PresetWrite &write : preset.writes) {
    if (write.kind == PresetWrite::Kind::Global) {
      if (Error err = writeGlobal(optimizer, write))
        return err;
      continue;
    }
    int fd = optimizer.mapFd(write.target);
    if (fd < 0)
      return write.line.error("the program has no map '{0}'", write.target);
    auto map = bpf::MapUpdater::forMap(fd, write.target, &optimizer.guard());
    if (!map)
      return write.line.error("{0}", llvm::toString(map.takeError()));
    if (Error err = map->update(write.key, write.value))
      return write.line.error("{0}", llvm::toString(std::move(err)));
  }
  return Error::success();
}

Expected<Trace> generateTrace(const Preset &preset, const BenchOptions &options,
                              const std::string &locality, const std::string &dir) {
  auto python = llvm::sys::findProgramByName("python3");
  if (!python)
    return makeError("python3 is needed to generate traces (tools/traces/gen_trace.py)");
  std::string output = dir + "/" + preset.name + "-" + locality + ".pcap";
  std::vector<std::string> args = {*python, sourceDir() + "/tools/traces/gen_trace.py"};
  if (!preset.function.empty())
    args.insert(args.end(), {"--nf", preset.function});
  args.insert(args.end(), preset.traceArgs.begin(), preset.traceArgs.end());
  args.insert(args.end(), {"--flows", std::to_string(options.flows), "--packets",
                           std::to_string(options.packets), "--seed",
                           std::to_string(options.seed), "-q", "-o", output});
  args.insert(args.end(), {locality == PhasedTrace ? "--phases" : "--locality",
                           locality == PhasedTrace ? options.phases : locality});
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  std::string message;
  int status = llvm::sys::ExecuteAndWait(args[0], refs, std::nullopt, {}, 0, 0, &message);
  if (status != 0)
    return makeError("generating the {0} trace for {1} failed ({2}): `{3}`", locality,
                     preset.name, message.empty() ? "exit " + std::to_string(status) : message,
                     llvm::join(args, " "));
  return readPcapTrace(output, locality);
}

// Every variant must treat the first packets of the trace as the baseline
// does (verdict and output bytes), or its timings mean nothing.
Error checkVariants(Driver &driver, const std::vector<Variant> &variants, const Trace &trace,
                    uint32_t count, uint32_t ingress, uint64_t &checked) {
  count = std::min<uint32_t>(count, uint32_t(trace.sequence.size()));
  for (uint32_t position = 0; position < count; ++position) {
    std::pair<uint32_t, std::vector<uint8_t>> expected;
    for (size_t v = 0; v < variants.size(); ++v) {
      if (Error err = driver.setTarget(variants[v].fd))
        return err;
      auto got = driver.runOne(position, ingress);
      if (!got)
        return got.takeError();
      if (v == 0)
        expected = std::move(*got);
      else if (*got != expected)
        return makeError("trace {0}, packet {1}: {2} returned verdict {3} ({4} bytes), the "
                         "baseline {5} ({6} bytes): not benchmarking a program that behaves "
                         "differently",
                         trace.name, position, variants[v].name, got->first, got->second.size(),
                         expected.first, expected.second.size());
    }
    ++checked;
  }
  return Error::success();
}

// Where the live method sends packets: the program under test is attached
// to `link`, the sender transmits from the veth peer `senderIfindex`.
struct LiveTarget {
  bpf::ProgramLink &link;
  uint32_t senderIfindex;
};

struct Timing {
  double ns = 0;   // per packet, by the program's bpf_stats
  double mpps = 0; // live only: the rate frames were offered at
};

// The variants every measurement has, by name: what the others are
// compared with, and the empty control subtracted from all of them.
const char BaselineName[] = "baseline", StaticName[] = "morpheus-static",
           UnguardedName[] = "morpheus-static-unguarded", ControlName[] = "empty";

// Times packets of one trace through a program: the driver tail-calls it
// (BPF_PROG_TEST_RUN), or, live, it is attached to the port the sender's
// frames arrive on.
// With `cpuEdges` (BenchOptions::twoCpus), packets [0, edge 0) run on
// CPU 0, [edge 0, edge 1) on CPU 1, and so on (mod the CPUs), the thread
// pinned for each part and back where it was after.
class TraceTimer {
public:
  TraceTimer(Driver &driver, const Trace &trace, uint32_t ingress, LiveTarget *live,
             std::vector<uint64_t> cpuEdges)
      : driver(driver), trace(trace), ingress(ingress), live(live),
        packets(uint32_t(trace.sequence.size())), cpuEdges(std::move(cpuEdges)) {}

  // `count` packets of the trace from `start` on through `fd`; with CPU
  // edges, each part on its CPU, the figure the parts' packet-weighted mean.
  Expected<Timing> time(int fd, uint32_t start, uint32_t count) {
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

  // The whole trace through `fd` in `segments` consecutive slices (each
  // slice's ns/packet appended to `perSegment` when given); the whole-trace
  // figure is the slices' packet-weighted mean.
  Expected<Timing> timeTrace(int fd, uint32_t segments, std::vector<double> *perSegment) {
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

  // An empty program's own cost (driver: run alone on the template frame;
  // live: what the empty control was timed at).
  Expected<double> emptyAlone(int emptyFd, double controlNs) {
    if (live)
      return controlNs;
    return driver.measureAlone(emptyFd, packets, ingress);
  }

private:
  Expected<Timing> timeHere(int fd, uint32_t start, uint32_t count) {
    return live ? timeLive(fd, start, count) : timeDriven(fd, start, count);
  }

  Expected<Timing> timeDriven(int fd, uint32_t start, uint32_t count) {
    if (Error err = driver.setTarget(fd))
      return err;
    auto ns = driver.measure(start, count, ingress);
    if (!ns)
      return ns.takeError();
    return Timing{*ns, 0};
  }

  Expected<Timing> timeLive(int fd, uint32_t start, uint32_t count) {
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

  Driver &driver;
  const Trace &trace;
  uint32_t ingress;
  LiveTarget *live;
  uint32_t packets;
  std::vector<uint64_t> cpuEdges;
};

// Where `trace` changes CPU (TraceTimer): the phased trace's phase edges
// with --two-cpus, else none.
std::vector<uint64_t> cpuEdges(const Trace &trace, const BenchOptions &options) {
  if (!options.twoCpus || trace.name != PhasedTrace)
    return {};
  return cantFail(phaseEdges(options.phases, trace.sequence.size())); // checked when generated
}

// One variant's timing in one round: the whole trace and, for a phased
// trace, each slice.
struct RoundTiming {
  Timing whole;
  std::vector<double> segments;
};

// One round: every variant and the control once, in an order rotated by
// the round number (so any drift within a round spreads over all
// variants), by name.
Expected<std::map<std::string, RoundTiming>> timeRound(TraceTimer &timer,
                                                       const std::vector<Variant> &rotation,
                                                       uint32_t round, uint32_t segments) {
  std::map<std::string, RoundTiming> timings;
  for (size_t k = 0; k < rotation.size(); ++k) {
    const Variant &variant = rotation[(k + round) % rotation.size()];
    RoundTiming &timing = timings[variant.name];
    auto whole = timer.timeTrace(variant.fd, segments, segments > 1 ? &timing.segments : nullptr);
    if (!whole)
      return whole.takeError();
    timing.whole = *whole;
  }
  return timings;
}

// What the trace is, before anything is timed.
TraceResult describeTrace(const Trace &trace, const BenchOptions &options) {
  TraceResult result;
  result.name = trace.name;
  result.packets = trace.sequence.size();
  result.flows = trace.frames.size();
  result.top10Share = topShare(trace, 10);
  bool phased = trace.name == PhasedTrace;
  // A phased trace is timed segment by segment, so its results show how
  // each variant fares in each phase.
  result.segments = std::clamp<uint32_t>(phased ? options.segments : 1, 1,
                                         uint32_t(trace.sequence.size()));
  if (phased) {
    result.phases = options.phases;
    // Checked when the trace was generated.
    result.phaseEdges = cantFail(phaseEdges(options.phases, result.packets));
  }
  return result;
}

// Adds one round to the result: each variant's net (minus the control),
// gross (net plus an empty program's own cost) and speed-up over the
// baseline, per slice for phased traces.
void recordRound(TraceResult &result, const std::map<std::string, RoundTiming> &timings,
                 double emptyAloneNs, std::vector<std::vector<Series>> &segmentNet) {
  const RoundTiming &control = timings.at(ControlName);
  result.controlNs.values.push_back(control.whole.ns);
  result.emptyAloneNs.values.push_back(emptyAloneNs);
  double baselineNet = timings.at(BaselineName).whole.ns - control.whole.ns;
  for (size_t v = 0; v < result.variants.size(); ++v) {
    VariantResult &variant = result.variants[v];
    const RoundTiming &timing = timings.at(variant.name);
    double net = timing.whole.ns - control.whole.ns;
    variant.net.values.push_back(net);
    variant.gross.values.push_back(net + emptyAloneNs);
    variant.speedup.values.push_back(baselineNet / std::max(net, 0.1));
    for (size_t i = 0; i < timing.segments.size(); ++i)
      segmentNet[v][i].values.push_back(timing.segments[i] - control.segments[i]);
  }
}

// Morpheus following the traffic: an optimizer whose program records
// lookup keys, and, for the loop variants, cycles run on the trace.
const char MorpheusName[] = "morpheus", AdaptiveInstrumentationName[] = "adaptive-instrumentation",
           NaiveInstrumentationName[] = "naive-instrumentation", SamplingPrefix[] = "sampling-every-",
           GlobalChainName[] = "morpheus-global-chain";

struct FollowingVariant {
  std::string name;
  std::unique_ptr<runtime::Optimizer> optimizer;
  bool loop; // cycles on each trace before timing
};

// A cycle of a loop following the traffic, in one line: its outcome, and
// per profiled site what the samples said and became of the hot keys.
std::string describeCycle(const runtime::CycleReport &report) {
  std::string line = report.describe();
  if (report.installed() && report.verifiedInstructions)
    line += llvm::formatv(" ({0} instructions verified)", *report.verifiedInstructions).str();
  for (const auto &[site, traffic] : report.traffic) {
    line += llvm::formatv("; site #{0}: period {1}, {2}", site, traffic.period, traffic.why).str();
    // What became of the hot keys (a recompiled cycle only): each distinct
    // decision once (per-CPU chains dropped by the budget, then the global
    // chain's; a generic copy's twin says the same).
    std::set<std::pair<bool, std::string>> said;
    for (const core::SiteDecision &decision : report.log.decisions)
      if (decision.site == site && decision.pass == "heavy-hitter-fast-path" &&
          said.insert({decision.applied, decision.detail}).second)
        line += (decision.applied ? " -> fast path: " : " -> no fast path: ") + decision.detail;
  }
  return line;
}

// The loop on one trace, as `morpheus run` would run it: the whole trace
// through the running version (which samples it), then a cycle, each of
// `options.trafficCycles` times. Returns one line per cycle.
Expected<std::vector<std::string>> followTrace(Driver &driver, runtime::Optimizer &optimizer,
                                               const Trace &trace, const BenchOptions &options,
                                               uint32_t ingress, LiveTarget *live) {
  if (Error err = driver.setTrace(trace))
    return err;
  TraceTimer timer(driver, trace, ingress, live, cpuEdges(trace, options));
  std::vector<std::string> lines;
  for (uint32_t cycle = 0; cycle < options.trafficCycles; ++cycle) {
    if (auto pass = timer.time(optimizer.activeFd(), 0, uint32_t(trace.sequence.size())); !pass)
      return pass.takeError();
    runtime::CycleReport report = optimizer.runCycle();
    if (report.outcome == runtime::CycleOutcome::Failed ||
        report.outcome == runtime::CycleOutcome::Refused)
      return makeError("trace {0}: cycle {1} of the loop: {2}", trace.name, cycle + 1,
                       report.describe());
    lines.push_back(llvm::formatv("cycle {0}: {1}", cycle + 1, describeCycle(report)).str());
  }
  return lines;
}

// Median speed-up of slices [first, first + count) of `slices`.
double medianSpeedup(const std::vector<AdaptationSlice> &slices, uint32_t first, uint32_t count) {
  Series speedups;
  for (uint32_t i = first; i < first + count; ++i)
    speedups.values.push_back(slices[i].speedup);
  return speedups.median();
}

// The adaptation experiment (the papers' phased traces, issue 11): the
// trace plays in order, slice by slice, each slice timed `rounds` times
// through the baseline and the running version of `optimizer` (and the
// control), interleaved; every `period` slices the loop runs a cycle on
// what the running version sampled so far, as `morpheus run` would each
// period. The optimizer starts instrumented and without fast paths.
Expected<AdaptationResult> adaptToTrace(Driver &driver, runtime::Optimizer &optimizer,
                                        int baselineFd, int emptyFd, const Trace &trace,
                                        const TraceResult &described,
                                        const BenchOptions &options, uint32_t ingress,
                                        LiveTarget *live) {
  if (Error err = driver.setTrace(trace))
    return err;
  TraceTimer timer(driver, trace, ingress, live, cpuEdges(trace, options));
  uint64_t packets = trace.sequence.size();
  uint32_t segments = described.segments;
  // The data-plane state the baseline's passes brought (learnt addresses,
  // connections), brought through the loop's original program, which
  // shares its maps and samples nothing.
  if (auto warm = timer.time(optimizer.originalFd(), 0, uint32_t(packets)); !warm)
    return warm.takeError();
  AdaptationResult result;
  result.periodSlices = options.adaptPeriod;
  for (llvm::StringRef spec : llvm::split(options.phases, ','))
    result.phases.push_back({spec.trim().str()});
  for (uint32_t i = 0; i < segments; ++i) {
    AdaptationSlice &slice = result.slices.emplace_back();
    if (i > 0 && i % options.adaptPeriod == 0) {
      runtime::CycleReport report = optimizer.runCycle();
      if (report.outcome == runtime::CycleOutcome::Failed ||
          report.outcome == runtime::CycleOutcome::Refused)
        return makeError("trace {0}: the loop's cycle before slice {1}: {2}", trace.name, i + 1,
                         report.describe());
      slice.cycle = describeCycle(report);
      slice.installed = report.installed();
      if (options.progress)
        options.progress(llvm::formatv("  {0}: adaptation cycle before slice {1}: {2}",
                                       trace.name, i + 1, slice.cycle)
                             .str());
    }
    uint32_t start = uint32_t(packets * i / segments);
    uint32_t count = uint32_t(packets * (i + 1) / segments) - start;
    slice.phase = uint32_t(llvm::count_if(described.phaseEdges,
                                          [&](uint64_t edge) { return edge <= start; }));
    for (uint32_t round = 0; round < options.rounds; ++round) {
      // Rotated like the bench's rounds; the running version is asked for
      // each time (a cycle may have swapped it).
      std::array<int, 3> fds = {baselineFd, optimizer.activeFd(), emptyFd};
      std::array<double, 3> ns{};
      for (uint32_t k = 0; k < fds.size(); ++k) {
        uint32_t which = (k + round) % fds.size();
        auto timing = timer.time(fds[which], start, count);
        if (!timing)
          return timing.takeError();
        ns[which] = timing->ns;
      }
      slice.baselineNet.values.push_back(ns[0] - ns[2]);
      slice.morpheusNet.values.push_back(ns[1] - ns[2]);
    }
    slice.speedup = slice.baselineNet.median() / std::max(slice.morpheusNet.median(), 0.1);
    if (options.progress)
      options.progress(llvm::formatv("  {0}: adaptation slice {1}/{2} (phase {3}){4}: baseline "
                                     "{5:f1} ns, morpheus {6:f1} ns",
                                     trace.name, i + 1, segments, slice.phase + 1,
                                     slice.installed ? ", new version" : "",
                                     slice.baselineNet.median(), slice.morpheusNet.median())
                           .str());
  }
  for (uint32_t p = 0; p < result.phases.size(); ++p) {
    PhaseAdaptation &phase = result.phases[p];
    auto inPhase = [&](const AdaptationSlice &s) { return s.phase == p; };
    auto first = llvm::find_if(result.slices, inPhase);
    phase.firstSlice = uint32_t(first - result.slices.begin());
    phase.slices = uint32_t(llvm::count_if(result.slices, inPhase));
    if (phase.slices == 0)
      continue;
    uint32_t secondHalf = phase.slices / 2;
    phase.steadySpeedup = medianSpeedup(result.slices, phase.firstSlice + secondHalf,
                                        phase.slices - secondHalf);
    double gain = phase.steadySpeedup - 1;
    if (gain < 0.02)
      continue;
    for (uint32_t i = 0; i < phase.slices; ++i)
      if (result.slices[phase.firstSlice + i].speedup - 1 >= 0.9 * gain) {
        phase.slicesTo90 = i;
        break;
      }
  }
  return result;
}

// Times every variant (baseline first) over `trace`, after a warm-up pass
// each and the first-packets equivalence check.
Expected<TraceResult> measureTrace(Driver &driver, const std::vector<Variant> &variants,
                                   int emptyFd, const Trace &trace, const BenchOptions &options,
                                   uint32_t ingress, LiveTarget *live) {
  TraceResult result = describeTrace(trace, options);
  if (Error err = driver.setTrace(trace))
    return err;
  TraceTimer timer(driver, trace, ingress, live, cpuEdges(trace, options));
  uint32_t packets = uint32_t(trace.sequence.size());
  // One untimed pass each warms caches and brings data-plane state
  // (connection tables, learned addresses) to where the timed passes see it.
  for (const Variant &variant : variants)
    if (auto warm = timer.time(variant.fd, 0, packets); !warm)
      return warm.takeError();
  if (Error err = checkVariants(driver, variants, trace, options.checkPackets, ingress,
                                result.checked))
    return err;

  for (const Variant &variant : variants)
    result.variants.emplace_back().name = variant.name;
  std::vector<Variant> rotation = variants;
  rotation.push_back({ControlName, emptyFd});
  std::vector<std::vector<Series>> segmentNet(variants.size(),
                                              std::vector<Series>(result.segments));
  for (uint32_t round = 0; round < options.rounds; ++round) {
    auto timings = timeRound(timer, rotation, round, result.segments);
    if (!timings)
      return timings.takeError();
    double controlNs = timings->at(ControlName).whole.ns;
    auto alone = timer.emptyAlone(emptyFd, controlNs);
    if (!alone)
      return alone.takeError();
    recordRound(result, *timings, *alone, segmentNet);
    if (live)
      result.mpps.values.push_back(timings->at(BaselineName).whole.mpps);
    if (options.progress)
      options.progress(llvm::formatv("  {0}: round {1}/{2}  net baseline {3:f1} ns, "
                                     "morpheus-static {4:f1} ns",
                                     trace.name, round + 1, options.rounds,
                                     timings->at(BaselineName).whole.ns - controlNs,
                                     timings->at(StaticName).whole.ns - controlNs)
                           .str());
  }
  for (size_t v = 0; v < variants.size() && result.segments > 1; ++v)
    for (const Series &segment : segmentNet[v])
      result.variants[v].segmentNet.push_back(segment.median());
  auto st = driver.state();
  if (!st)
    return st.takeError();
  if (st->tail_call_failed)
    return makeError("trace {0}: {1} tail calls into the program under test failed",
                     trace.name, st->tail_call_failed);
  result.resizedFrames = st->resized;
  return result;
}

// The preset's function under an optimizer, on maps of its own (no pin
// root: maps declared pinned by name are not a running loader's), pinned
// in a fresh directory and configured by its own control plane. Runs in
// the preset's namespace (interface names resolve there).
Expected<std::unique_ptr<runtime::Optimizer>> loadConfigured(const Preset &preset,
                                                             runtime::OptimizerOptions options,
                                                             const std::string &variant) {
  options.program = preset.entry;
  options.frontend.cflags.insert(options.frontend.cflags.end(), preset.cflags.begin(),
                                 preset.cflags.end());
  options.pinDir = llvm::formatv("/sys/fs/bpf/morpheus-bench-{0}-{1}-{2}", getpid(),
                                 preset.name, variant)
                       .str();
  if (Error err = bpf::ensureBpffs(options.pinDir))
    return err;
  auto created = runtime::Optimizer::create(preset.program, options);
  if (!created)
    return created.takeError();
  if (Error err = runSetup(preset, **created, options.pinDir))
    return err;
  return created;
}

// Runs `work` on a thread inside a scratch namespace holding the preset's
// interfaces (devmap entries and ingress ifindexes are only valid there),
// passing the ingress interface's veth peer.
Error inPresetNamespace(const Preset &preset,
                        const std::function<Error(const std::string &sender)> &work) {
  netns::sweepStale("bench");
  auto scratch = netns::ScratchNamespace::create("bench");
  if (!scratch)
    return withContext(scratch.takeError(), preset.name);
  std::string sender;
  for (const std::string &iface : preset.interfaces) {
    auto peer = (*scratch)->addInterface(iface);
    if (!peer)
      return withContext(peer.takeError(), preset.name);
    if (iface == preset.ingress)
      sender = *peer;
  }
  return netns::runInNetns((*scratch)->name(), [&] { return work(sender); });
}

Expected<BenchResult> runInNamespace(const Preset &preset, const BenchOptions &options,
                                     const std::string &traceDir,
                                     const std::string &senderInterface) {
  BenchResult result;
  result.method = options.method == Method::Live ? "live" : "driver";
  result.preset = preset.name;
  result.program = preset.program;
  int cpu = options.cpu >= 0 ? options.cpu : int(sysconf(_SC_NPROCESSORS_ONLN)) - 1;
  pinToCpu(cpu);
  uint32_t ingress = 0;
  uint32_t senderIfindex = 0;
  if (!preset.ingress.empty()) {
    auto ingressIndex = netns::interfaceIndex(preset.ingress);
    if (!ingressIndex)
      return ingressIndex.takeError();
    auto senderIndex = netns::interfaceIndex(senderInterface);
    if (!senderIndex)
      return senderIndex.takeError();
    ingress = *ingressIndex;
    senderIfindex = *senderIndex;
  }

  runtime::OptimizerOptions optimizerOptions;
  optimizerOptions.shadowPackets = options.shadowPackets;
  optimizerOptions.inlineLimit = options.inlineLimit;
  if (!options.noPasses.empty())
    optimizerOptions.tablePasses = core::tablePassesWithout(options.noPasses);
  optimizerOptions.costModel = options.costModel;
  result.costModel = options.costModel.source();
  optimizerOptions.faults = options.faults;
  auto created = loadConfigured(preset, optimizerOptions, "static");
  if (!created)
    return created.takeError();
  runtime::Optimizer &optimizer = **created;
  if (options.progress)
    options.progress(llvm::formatv("bench {0}: loaded {1} ({2:f0} ms) and configured{3}",
                                   preset.name, preset.program, optimizer.startupMs(),
                                   options.noPasses.empty()
                                       ? std::string()
                                       : "; table passes left out: " +
                                             llvm::join(options.noPasses, ", "))
                         .str());

  result.compile.startupMs = optimizer.startupMs();
  result.compile.startupPhases = optimizer.startupPhases();
  runtime::CycleReport first = optimizer.runCycle();
  if (!first.installed())
    return makeError("bench {0}: Morpheus did not specialize the program: {1}", preset.name,
                     first.describe());
  result.compile.first = first.times;
  result.compile.originalInstructions = bpf::translatedInstructions(optimizer.originalFd());
  result.compile.specializedInstructions = first.instructions;
  for (const core::SiteDecision &decision : first.log.decisions)
    if (decision.applied)
      result.compile.applied.push_back(llvm::formatv("{0} site #{1} {2}: {3}", decision.table,
                                                     decision.site, decision.pass,
                                                     decision.detail));
  // The model's choice per site (both LPM passes log the same one).
  for (const core::SiteDecision &decision : first.log.decisions)
    if (decision.choice && std::none_of(result.compile.predictions.begin(),
                                        result.compile.predictions.end(),
                                        [&](const TablePrediction &known) {
                                          return known.site == decision.site;
                                        }))
      result.compile.predictions.push_back({decision.table, decision.site, *decision.choice});
  for (uint32_t i = 0; i < options.recompiles; ++i) {
    runtime::CycleReport again = optimizer.runCycle(/*force=*/true);
    result.compile.analysisMs.values.push_back(again.times.analysisMs);
    result.compile.codegenMs.values.push_back(again.times.codegenMs);
    auto &phases = result.compile.codegenPhaseMs;
    for (const core::BuildPhase &phase : again.log.phases) {
      auto known = std::find_if(phases.begin(), phases.end(),
                                [&](const auto &p) { return p.first == phase.phase; });
      if (known == phases.end())
        known = phases.insert(phases.end(), {phase.phase, Series()});
      known->second.values.push_back(phase.ms);
    }
  }

  // The options of a loop following the traffic as `traffic` says, its
  // fast paths priced by the calibrated model.
  auto followingOptions = [&](core::TrafficProfileOptions traffic) {
    runtime::OptimizerOptions following = optimizerOptions;
    if (options.costModel.calibrated())
      traffic.costs = options.costModel.fastPathCosts(traffic.costs);
    following.traffic = traffic;
    return following;
  };

  // The variants that follow the traffic, each on its own maps (the same
  // configuration), so their samples and data-plane state are their own.
  std::vector<FollowingVariant> following;
  if (options.trafficCycles > 0) {
    core::TrafficProfileOptions adaptive, sampledOnly, naive;
    naive.mode = core::ProfileMode::Naive;
    sampledOnly.maxFastPath = 0;
    naive.maxFastPath = 0;
    std::vector<std::tuple<std::string, core::TrafficProfileOptions, bool>> loops = {
        {MorpheusName, adaptive, true},
        {AdaptiveInstrumentationName, sampledOnly, true},
        {NaiveInstrumentationName, naive, false}};
    if (options.twoCpus) {
      core::TrafficProfileOptions globalChain;
      globalChain.perCpuChains = false;
      loops.emplace_back(GlobalChainName, globalChain, true);
    }
    for (uint32_t period : options.samplingPeriods) {
      core::TrafficProfileOptions held = sampledOnly;
      held.initialPeriod = held.minPeriod = held.maxPeriod = period;
      loops.emplace_back(llvm::formatv("{0}{1}", SamplingPrefix, period).str(), held, true);
    }
    for (const auto &[name, traffic, loop] : loops) {
      auto loaded = loadConfigured(preset, followingOptions(traffic), name);
      if (!loaded)
        return loaded.takeError();
      runtime::CycleReport installed = (*loaded)->runCycle();
      if (!installed.installed())
        return makeError("bench {0}: {1}: the instrumented program was not installed: {2}",
                         preset.name, name, installed.describe());
      following.push_back({name, std::move(*loaded), loop});
    }
  }

  // The adaptation experiment's loop: the `morpheus` variant's options, an
  // optimizer and maps of its own, instrumented and nothing learnt yet.
  std::unique_ptr<runtime::Optimizer> adapting;
  if (options.adaptPeriod > 0) {
    auto loaded = loadConfigured(preset, followingOptions(core::TrafficProfileOptions()),
                                 "adapting");
    if (!loaded)
      return loaded.takeError();
    runtime::CycleReport installed = (*loaded)->runCycle();
    if (!installed.installed())
      return makeError("bench {0}: adaptation: the instrumented program was not installed: {1}",
                       preset.name, installed.describe());
    adapting = std::move(*loaded);
  }

  // morpheus-static without its program guard: what the guard costs.
  auto unguarded = optimizer.loadUnguardedTwin();
  if (!unguarded)
    return withContext(unguarded.takeError(), "bench " + preset.name + ": unguarded twin");

  auto driver = Driver::load();
  if (!driver)
    return driver.takeError();
  auto empty = bpf::LoadedObject::load(embedded(bench_empty_start, bench_empty_end),
                                       "bench_empty", {});
  if (!empty)
    return empty.takeError();
  int emptyFd = empty->programFd("empty");

  std::vector<Trace> traces;
  std::vector<std::string> generated = options.localities;
  if (!options.phases.empty())
    generated.push_back(PhasedTrace);
  for (const std::string &locality : generated) {
    if (options.progress)
      options.progress(llvm::formatv("bench {0}: generating the '{1}' trace ({2} flows, {3} "
                                     "packets, seed {4})",
                                     preset.name, locality, options.flows, options.packets,
                                     options.seed)
                           .str());
    auto trace = generateTrace(preset, options, locality, traceDir);
    if (!trace)
      return trace.takeError();
    traces.push_back(std::move(*trace));
  }
  for (const std::string &file : options.traceFiles) {
    auto trace = readPcapTrace(file, std::string(llvm::sys::path::filename(file)));
    if (!trace)
      return trace.takeError();
    traces.push_back(std::move(*trace));
  }

  std::optional<bpf::ProgramLink> link;
  std::optional<LiveTarget> live;
  if (options.method == Method::Live) {
    if (preset.ingress.empty())
      return makeError("{0}: the live method needs an 'ingress' interface", preset.file);
    bpf::AttachPoint ingress;
    ingress.iface = preset.ingress;
    auto attached = bpf::ProgramLink::attach(optimizer.originalFd(), ingress);
    if (!attached)
      return attached.takeError();
    link.emplace(std::move(*attached));
    live.emplace(LiveTarget{*link, senderIfindex});
  }

  for (const Trace &trace : traces) {
    std::vector<std::string> followed;
    for (FollowingVariant &variant : following)
      if (variant.loop) {
        auto log = followTrace(*driver, *variant.optimizer, trace, options, ingress,
                               live ? &*live : nullptr);
        if (!log)
          return log.takeError();
        if (variant.name == MorpheusName)
          followed = std::move(*log);
      }
    // baseline, morpheus (the loop), morpheus-static, the instrumentation
    // costs, the oracles.
    std::vector<Variant> variants = {{BaselineName, optimizer.originalFd()}};
    for (FollowingVariant &variant : following)
      if (variant.name == MorpheusName)
        variants.push_back({variant.name, variant.optimizer->activeFd()});
    variants.push_back({StaticName, optimizer.activeFd()});
    variants.push_back({UnguardedName, unguarded->programFd(optimizer.entryName())});
    for (FollowingVariant &variant : following)
      if (variant.name != MorpheusName)
        variants.push_back({variant.name, variant.optimizer->activeFd()});
    // The oracles are generated from what the data plane holds for this
    // trace (nat's bindings): the baseline's untimed pass through it first,
    // the state the warm-up would bring.
    if (!preset.oracle.empty()) {
      if (Error err = driver->setTrace(trace))
        return err;
      TraceTimer timer(*driver, trace, ingress, live ? &*live : nullptr, cpuEdges(trace, options));
      if (auto pass = timer.time(optimizer.originalFd(), 0, uint32_t(trace.sequence.size()));
          !pass)
        return pass.takeError();
    }
    auto oracles = loadOracles(preset, optimizer, trace, ingress);
    if (!oracles)
      return oracles.takeError();
    for (const OracleProgram &oracle : *oracles)
      variants.push_back({oracle.name, oracle.fd()});
    if (options.progress)
      options.progress(llvm::formatv("bench {0}: trace '{1}': {2} packets, {3} flows, top-10 "
                                     "share {4:f3}; {5} rounds",
                                     preset.name, trace.name, trace.sequence.size(),
                                     trace.frames.size(), topShare(trace, 10), options.rounds)
                           .str());
    auto measured = measureTrace(*driver, variants, emptyFd, trace, options, ingress,
                                 live ? &*live : nullptr);
    if (!measured)
      return measured.takeError();
    measured->followed = std::move(followed);
    if (adapting && trace.name == PhasedTrace) {
      if (options.progress)
        options.progress(llvm::formatv("bench {0}: adaptation on the '{1}' trace: a cycle "
                                       "every {2} of {3} slices",
                                       preset.name, trace.name, options.adaptPeriod,
                                       measured->segments)
                             .str());
      auto adaptation = adaptToTrace(*driver, *adapting, optimizer.originalFd(), emptyFd, trace,
                                     *measured, options, ingress, live ? &*live : nullptr);
      if (!adaptation)
        return adaptation.takeError();
      measured->adaptation = std::move(*adaptation);
    }
    result.traces.push_back(std::move(*measured));
  }
  return result;
}

} // namespace

Expected<std::vector<uint64_t>> phaseEdges(const std::string &spec, uint64_t packets) {
  std::vector<std::optional<uint64_t>> lengths;
  for (llvm::StringRef item : llvm::split(spec, ',')) {
    llvm::SmallVector<llvm::StringRef, 3> fields;
    item.trim().split(fields, '/');
    if (fields.size() > 3 || fields[0].empty())
      return makeError("bad phase '{0}' in '{1}': expected MODEL[/PACKETS[/SET]]", item, spec);
    uint64_t length = 0;
    if (fields.size() < 2 || fields[1].empty() || fields[1] == "*")
      lengths.push_back(std::nullopt);
    else if (fields[1].getAsInteger(10, length) || length == 0)
      return makeError("bad phase '{0}' in '{1}': PACKETS must be a positive integer", item,
                       spec);
    else
      lengths.push_back(length);
  }
  uint64_t sized = 0, unsized = 0;
  for (const std::optional<uint64_t> &length : lengths)
    length ? sized += *length : ++unsized;
  if (unsized && sized > packets)
    return makeError("phases '{0}' need {1} packets, more than the trace's {2}", spec, sized,
                     packets);
  uint64_t left = unsized ? packets - sized : 0, position = 0, k = 0;
  std::vector<uint64_t> edges;
  for (size_t i = 0; i + 1 < lengths.size(); ++i) {
    if (lengths[i])
      position += *lengths[i];
    else
      position += left / unsized + (k++ < left % unsized ? 1 : 0);
    edges.push_back(position);
  }
  return edges;
}

Expected<BenchResult> runBench(const Preset &preset, const BenchOptions &options) {
  if (options.rounds == 0 || options.packets == 0)
    return makeError("bench: --rounds and --packets must be at least 1");
  if (!options.phases.empty())
    if (auto edges = phaseEdges(options.phases, options.packets); !edges)
      return withContext(edges.takeError(), "bench: --phases");
  for (uint32_t period : options.samplingPeriods)
    if (!llvm::isPowerOf2_32(period))
      return makeError("bench: sampling period {0} is not a power of two", period);
  if (!options.samplingPeriods.empty() && options.trafficCycles == 0)
    return makeError("bench: the sampling-rate sweep (--sampling-periods) runs the loop: "
                     "give --traffic-cycles 1 or more");
  if (options.adaptPeriod > 0 && options.phases.empty())
    return makeError("bench: the adaptation experiment (--adapt-period) runs on a phased "
                     "trace: give --phases");
  std::string traceDir = options.keepTraces;
  llvm::SmallString<128> temporary;
  if (traceDir.empty()) {
    if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("morpheus-bench", temporary))
      return makeSystemError(ec.value(), "bench: cannot create a directory for traces");
    traceDir = std::string(temporary);
  } else if (std::error_code ec = llvm::sys::fs::create_directories(traceDir)) {
    return makeSystemError(ec.value(), "bench: cannot create {0}", traceDir);
  }
  // bpf_stats stay on only while this is open.
  auto stats = bpf::enableRunTimeStats();
  if (!stats)
    return withContext(stats.takeError(), "bench");

  BenchResult result;
  Error err = inPresetNamespace(preset, [&](const std::string &sender) -> Error {
    auto measured = runInNamespace(preset, options, traceDir, sender);
    if (!measured)
      return measured.takeError();
    result = std::move(*measured);
    return Error::success();
  });
  stats->reset();
  if (!temporary.empty())
    llvm::sys::fs::remove_directories(temporary);
  if (err)
    return withContext(std::move(err), "bench");
  return result;
}

Expected<runtime::MapContents> configuredContents(const Preset &preset, uint32_t limit) {
  runtime::MapContents contents;
  Error err = inPresetNamespace(preset, [&](const std::string &) -> Error {
    runtime::OptimizerOptions options;
    options.shadowPackets = 0; // nothing is specialized here
    auto created = loadConfigured(preset, options, "contents");
    if (!created)
      return created.takeError();
    for (const auto &[name, info] : (*created)->spec().catalog()) {
      int fd = (*created)->mapFd(name);
      if (fd < 0)
        continue;
      auto map = bpf::layoutOf(fd, name);
      if (!map) {
        llvm::consumeError(map.takeError());
        continue;
      }
      if (!bpf::isPlainDataMap(map->type))
        continue;
      size_t valueBytes = bpf::syscallValueSize(map->type, map->valueSize);
      auto &entries = contents[name];
      Error err = bpf::forEachEntry(
          fd, map->keySize, valueBytes, name,
          [&](const core::Bytes &key, const core::Bytes &value) {
            // Arrays list every index; only the ones the config wrote matter.
            if (std::any_of(value.begin(), value.end(), [](uint8_t b) { return b != 0; }))
              entries.emplace_back(key,
                                   core::Bytes(value.begin(), value.begin() + map->valueSize));
            return entries.size() < limit;
          });
      if (err)
        return err;
    }
    return Error::success();
  });
  if (err)
    return withContext(std::move(err), "configuring " + preset.file);
  return contents;
}

nlohmann::json toJson(const BenchResult &result) {
  auto series = [](const Series &s) {
    return nlohmann::json{
        {"median", s.median()}, {"min", s.min()}, {"max", s.max()}, {"values", s.values}};
  };
  nlohmann::json traces = nlohmann::json::array();
  for (const TraceResult &trace : result.traces) {
    nlohmann::json variants = nlohmann::json::array();
    for (const VariantResult &v : trace.variants)
      variants.push_back({{"name", v.name},
                          {"net_ns", series(v.net)},
                          {"gross_ns", series(v.gross)},
                          {"speedup_net", series(v.speedup)},
                          {"segment_net_ns", v.segmentNet}});
    traces.push_back({{"name", trace.name},
                      {"segments", trace.segments},
                      {"phases", trace.phases},
                      {"packets", trace.packets},
                      {"flows", trace.flows},
                      {"top10_share", trace.top10Share},
                      {"checked_packets", trace.checked},
                      {"control_ns", series(trace.controlNs)},
                      {"empty_alone_ns", series(trace.emptyAloneNs)},
                      {"mpps", series(trace.mpps)},
                      {"resized_frames", trace.resizedFrames},
                      {"variants", variants},
                      {"followed", trace.followed}});
    nlohmann::json &added = traces.back();
    if (!trace.phaseEdges.empty())
      added["phase_edges"] = trace.phaseEdges;
    if (const std::optional<AdaptationResult> &adaptation = trace.adaptation) {
      nlohmann::json slices = nlohmann::json::array(), phases = nlohmann::json::array();
      for (const AdaptationSlice &slice : adaptation->slices)
        slices.push_back({{"phase", slice.phase},
                          {"baseline_net_ns", series(slice.baselineNet)},
                          {"morpheus_net_ns", series(slice.morpheusNet)},
                          {"speedup_net", slice.speedup},
                          {"cycle", slice.cycle},
                          {"installed", slice.installed}});
      for (const PhaseAdaptation &phase : adaptation->phases)
        phases.push_back({{"spec", phase.spec},
                          {"first_slice", phase.firstSlice},
                          {"slices", phase.slices},
                          {"steady_speedup_net", phase.steadySpeedup},
                          {"slices_to_90",
                           phase.slicesTo90 ? nlohmann::json(*phase.slicesTo90) : nullptr}});
      added["adaptation"] = {
          {"period_slices", adaptation->periodSlices}, {"slices", slices}, {"phases", phases}};
    }
  }
  const CompileResult &c = result.compile;
  nlohmann::json predictions = nlohmann::json::array();
  for (const TablePrediction &prediction : c.predictions) {
    nlohmann::json candidates = nlohmann::json::object();
    for (const core::CandidateCost &candidate : prediction.choice.candidates)
      candidates[core::representationName(candidate.representation)] = candidate.ns;
    predictions.push_back({{"table", prediction.table},
                           {"site", prediction.site},
                           {"chosen", core::representationName(prediction.choice.chosen)},
                           {"predicted_ns", candidates}});
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const auto &[phase, ms] : c.codegenPhaseMs)
    phases.push_back({{"phase", phase}, {"ms", series(ms)}});
  return {{"method", result.method},
          {"preset", result.preset},
          {"program", result.program},
          {"compile",
           {{"first_t1_ms", c.first.analysisMs},
            {"first_t2_ms", c.first.codegenMs},
            {"first_injection_ms", c.first.injectionMs},
            {"startup_ms", c.startupMs},
            {"startup_phases", runtime::phasesJson(c.startupPhases)},
            {"first_validation_ms", c.first.validationMs},
            {"first_validation_phases", runtime::phasesJson(c.first.validationPhases)},
            {"first_injection_phases", runtime::phasesJson(c.first.injectionPhases)},
            {"t1_ms", series(c.analysisMs)},
            {"t2_ms", series(c.codegenMs)},
            {"t2_phases", phases},
            {"instructions_original", c.originalInstructions},
            {"instructions_specialized", c.specializedInstructions},
            {"applied", c.applied},
            {"predictions", predictions}}},
          {"cost_model", result.costModel},
          {"traces", traces}};
}

namespace {

// Predicted vs measured per table. Measured: the saving of morpheus-static
// over the baseline (net medians), attributed whole to the one table whose
// representation the model changed (at one site or several); with several
// such tables it cannot be split, and is not: the tables' predicted savings
// are then summed (each changed site counted once per packet, as the
// firewall's per-field lookups run) against the measured whole.
std::string formatPredictions(const BenchResult &result, const TraceResult &trace) {
  const std::vector<TablePrediction> &predictions = result.compile.predictions;
  if (predictions.empty())
    return "";
  std::string text = "  cost model: " + result.costModel + "\n";
  auto net = [&](const char *name) -> std::optional<double> {
    for (const VariantResult &v : trace.variants)
      if (v.name == name)
        return v.net.median();
    return std::nullopt;
  };
  std::optional<double> baseline = net(BaselineName), specialized = net(StaticName);
  std::set<std::string> changedTables;
  for (const TablePrediction &prediction : predictions)
    if (prediction.choice.chosen != core::Representation::OriginalMap)
      changedTables.insert(prediction.table);
  size_t changed = changedTables.size();
  double predictedTogether = 0;
  for (const TablePrediction &prediction : predictions) {
    const core::RepresentationChoice &choice = prediction.choice;
    double map = choice.predictionFor(core::Representation::OriginalMap).value_or(NAN);
    text += llvm::formatv("    {0} site #{1}: predicted map {2:f1} ns -> {3} {4:f1} ns (saves "
                          "{5:f1})",
                          prediction.table, prediction.site, map,
                          core::representationName(choice.chosen), choice.predictedNs,
                          map - choice.predictedNs);
    if (choice.chosen != core::Representation::OriginalMap && changed == 1 && baseline &&
        specialized)
      text += llvm::formatv("; measured: morpheus-static saves {0:f1} ns net, all of it "
                            "attributed to this table: {1} {2:f1} ns",
                            *baseline - *specialized, core::representationName(choice.chosen),
                            map - (*baseline - *specialized));
    else if (choice.chosen != core::Representation::OriginalMap)
      text += llvm::formatv("; measured saving not attributed ({0} tables changed)", changed);
    if (choice.chosen != core::Representation::OriginalMap)
      predictedTogether += map - choice.predictedNs;
    if (!choice.memoryDeclined.empty())
      text += "; " + choice.memoryDeclined;
    text += "\n";
  }
  if (changed > 1 && baseline && specialized)
    text += llvm::formatv("    the {0} tables together: predicted saving {1:f1} ns (each changed "
                          "site once per packet); measured: morpheus-static saves {2:f1} ns "
                          "net\n",
                          changed, predictedTogether, *baseline - *specialized);
  return text;
}

// The adaptation experiment: each slice against the baseline, the slices
// a new version served first marked, then per phase the steady gain and how
// soon the loop reached 90 % of it.
std::string formatAdaptation(const AdaptationResult &adaptation) {
  std::string text = llvm::formatv("  adaptation: a cycle every {0} slices; '*' = the slice a "
                                   "new version served first\n"
                                   "  slice phase  baseline net ns  morpheus net ns  speed-up\n",
                                   adaptation.periodSlices)
                         .str();
  for (size_t i = 0; i < adaptation.slices.size(); ++i) {
    const AdaptationSlice &slice = adaptation.slices[i];
    text += llvm::formatv("  {0,5}{1} {2,5} {3,16:f1} {4,16:f1} {5,8:f2}x\n", i + 1,
                          slice.installed ? '*' : ' ', slice.phase + 1,
                          slice.baselineNet.median(), slice.morpheusNet.median(), slice.speedup);
  }
  for (size_t p = 0; p < adaptation.phases.size(); ++p) {
    const PhaseAdaptation &phase = adaptation.phases[p];
    text += llvm::formatv("  phase {0} ({1}): slices {2}-{3}, steady speed-up {4:f2}x", p + 1,
                          phase.spec, phase.firstSlice + 1, phase.firstSlice + phase.slices,
                          phase.steadySpeedup);
    if (phase.slicesTo90)
      text += llvm::formatv(", 90 % of its gain after {0} slices ({1:f1} periods)",
                            *phase.slicesTo90,
                            double(*phase.slicesTo90) / adaptation.periodSlices);
    else if (phase.slices && phase.steadySpeedup - 1 < 0.02)
      text += ", no gain to reach";
    text += "\n";
  }
  return text;
}

} // namespace

std::string formatResult(const BenchResult &result) {
  std::string text;
  const CompileResult &c = result.compile;
  text += llvm::formatv("{0}: {1} ({2} method)\n", result.preset, result.program,
                        result.method);
  text += llvm::formatv("  specialization: t1 {0:f2} ms, t2 {1:f1} ms, shadow validation "
                        "{2:f1} ms, injection {3:f2} ms; recompiles: t1 median {4:f2} ms, t2 "
                        "median {5:f1} ms; instructions {6} -> {7}\n",
                        c.first.analysisMs, c.first.codegenMs, c.first.validationMs,
                        c.first.injectionMs, c.analysisMs.median(), c.codegenMs.median(),
                        c.originalInstructions, c.specializedInstructions);
  if (!c.codegenPhaseMs.empty()) {
    text += "  t2 by phase (recompile medians, ms):";
    for (const auto &[phase, ms] : c.codegenPhaseMs)
      text += llvm::formatv(" {0} {1:f1};", phase, ms.median()).str();
    text.back() = '\n';
  }
  text += llvm::formatv("  startup {0:f1} ms by phase (ms): {1}\n", c.startupMs,
                        core::phasesText(c.startupPhases));
  if (!c.first.validationPhases.empty())
    text += "  shadow validation by phase (ms): " + core::phasesText(c.first.validationPhases) +
            "\n";
  text += "  injection by phase (ms): " + core::phasesText(c.first.injectionPhases) + "\n";
  for (const std::string &applied : c.applied)
    text += "    " + applied + "\n";
  for (const TraceResult &trace : result.traces) {
    text += llvm::formatv("\n  trace {0}: {1} packets, {2} flows, top-10 share {3:f3}; "
                          "{4} packets checked alike; control {5:f1} ns, empty alone "
                          "{6:f1} ns",
                          trace.name, trace.packets, trace.flows, trace.top10Share,
                          trace.checked, trace.controlNs.median(),
                          trace.emptyAloneNs.median());
    if (trace.resizedFrames)
      text += llvm::formatv("; {0} frames restored to their length after encapsulation",
                            trace.resizedFrames);
    if (!trace.mpps.values.empty())
      text += llvm::formatv("; baseline offered {0:f2} Mpps", trace.mpps.median());
    text += "\n";
    for (const std::string &line : trace.followed)
      text += "    morpheus " + line + "\n";
    text += "  variant                    net ns/pkt (min-max)        gross ns/pkt   speed-up net  gross\n";
    double baselineGross = trace.variants.front().gross.median();
    for (const VariantResult &v : trace.variants)
      text += llvm::formatv("  {0,-24} {1,8:f1} ({2,6:f1}-{3,6:f1})   {4,10:f1}   {5,10:f2}x "
                            "{6,5:f2}x\n",
                            v.name, v.net.median(), v.net.min(), v.net.max(), v.gross.median(),
                            v.speedup.median(), baselineGross / v.gross.median());
    text += formatPredictions(result, trace);
    if (trace.adaptation)
      text += formatAdaptation(*trace.adaptation);
  }
  return text;
}

} // namespace morpheus::bench
