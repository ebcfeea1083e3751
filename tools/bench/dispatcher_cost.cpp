// What a Morpheus trampoline in a dispatcher slot costs per packet
// (docs/benchmarks.md, "Adoption inside a dispatcher"). A dispatcher
// shaped as libxdp's, its slots tail calls (tests/kernel/
// slot_dispatcher.bpf.c: this kernel refuses libxdp's extensions), holds
// three slots: a counter, policy_fwd (the owner, loaded and configured by
// plain libbpf: policy on, default pass, 10.0.0.1:80/udp dropped), a
// counter. Morpheus adopts policy_fwd's slot (a new revision whose slot
// holds the trampoline) and installs a specialized version. Variants, each
// run by BPF_PROG_TEST_RUN on the dispatcher revision (`repeat` runs of a
// UDP packet that misses the policy, so it passes through all three
// slots), interleaved round by round on one CPU:
//   owner        the first revision: policy_fwd in its slot
//   trampoline   the adopted revision, Morpheus's array serving the
//                owner's own program: the trampoline's one tail call is
//                all that differs from `owner` (what a version pays)
//   fallback     the adopted revision, Morpheus's array empty (as after a
//                kill -9): a tail call that fails, then the owner array's
//   specialized  the adopted revision serving the specialized version
//   empty        a revision whose middle slot holds nothing (the slot's
//                call answers "go on"): the dispatcher's own cost
// Prints per variant the median and the range of the kernel's mean ns per
// run over the rounds. Needs root.
//   morpheus-dispatcher-cost [ROUNDS [REPEAT]]   (default 15, 1000000)
#include "KernelSupport.h"
#include "SlotDispatcher.h"
#include "backend/bpf/Adoption.h"
#include "backend/bpf/TestRun.h"
#include "netns/VethPair.h"
#include "policy_fwd.h"
#include "runtime/Optimizer.h"

#include <arpa/inet.h>
#include <sched.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>

extern "C" const unsigned char policy_fwd_bench_start[], policy_fwd_bench_end[];
extern "C" const unsigned char slot_counters_bench_start[], slot_counters_bench_end[];

namespace {

using namespace morpheus;

bpf_object *openAndLoad(const unsigned char *start, const unsigned char *end, const char *name) {
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = name);
  bpf_object *object = bpf_object__open_mem(start, end - start, &opts);
  if (!object || bpf_object__load(object)) {
    std::fprintf(stderr, "%s did not load\n", name);
    std::exit(1);
  }
  return object;
}

int programFd(bpf_object *object, const char *name) {
  return bpf_program__fd(bpf_object__find_program_by_name(object, name));
}

[[noreturn]] void fail(Error err) {
  std::fprintf(stderr, "%s\n", llvm::toString(std::move(err)).c_str());
  std::exit(1);
}
template <typename T> T check(Expected<T> value) {
  if (!value)
    fail(value.takeError());
  return std::move(*value);
}

uint32_t idOf(int fd) { return check(bpf::liveProgram(fd)).id; }

} // namespace

int main(int argc, char **argv) {
  unsigned rounds = argc > 1 ? std::atoi(argv[1]) : 15;
  uint32_t repeat = argc > 2 ? std::atoi(argv[2]) : 1000000;
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  CPU_SET(sysconf(_SC_NPROCESSORS_ONLN) - 1, &cpus);
  sched_setaffinity(0, sizeof(cpus), &cpus);

  testing::VethPair::sweepStale("dispcost");
  testing::VethPair veth("dispcost");
  std::string pins = "/sys/fs/bpf/morpheus-dispcost-" + std::to_string(getpid());
  std::filesystem::create_directories(pins);
  auto binding = std::make_shared<testing::TailCallSlots>(pins + "/xdp");

  bpf_object *owner = openAndLoad(policy_fwd_bench_start, policy_fwd_bench_end, "lb_owner");
  bpf_object *counters =
      openAndLoad(slot_counters_bench_start, slot_counters_bench_end, "slot_counters");
  uint32_t zero = 0;
  config settings = {CFG_POLICY_ENABLED, ACTION_PASS};
  bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(owner, "config")), &zero, &settings,
                      BPF_ANY);
  policy_key dropped = {htonl(0x0a000001), htons(80), IPPROTO_UDP, 0};
  policy_value drop = {ACTION_DROP, {}, {}};
  bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(owner, "policy")), &dropped, &drop,
                      BPF_ANY);
  int ownerProgram = programFd(owner, "policy_fwd");
  std::vector<testing::SlotSpec> slots = {{programFd(counters, "count_in"), 10},
                                          {ownerProgram, 20},
                                          {programFd(counters, "count_out"), 30}};
  FileDescriptor first =
      check(testing::attachFirstRevision(*binding, slots, veth.ifB(), veth.nsB()));
  // The revisions measured after they leave the hook keep their slots: the
  // binding holds every revision's program array.
  bpf::DispatcherConfig emptyConfig = check(bpf::dispatcherConfigOf(idOf(first.get()))).value();
  FileDescriptor empty = check(binding->loadDispatcher(emptyConfig));
  for (unsigned slot : {0u, 2u})
    check(binding->bind(empty.get(), emptyConfig, slot, slots[slot].program));

  std::unique_ptr<bpf::Adoption> adoption = check(bpf::Adoption::adoptSlot(
      std::make_unique<bpf::DispatcherHook>(binding, veth.ifB(), veth.nsB()), idOf(ownerProgram),
      pins + "/adopt"));
  runtime::OptimizerOptions options;
  options.pinDir = pins + "/adopt";
  options.adoption = adoption.get();
  std::unique_ptr<runtime::Optimizer> opt =
      check(runtime::Optimizer::create(MORPHEUS_SOURCE_DIR "/examples/policy_fwd.bpf.c", options));
  if (Error err = adoption->takeHook(opt->originalFd()))
    fail(std::move(err));
  opt->install = [&](int fd) { return adoption->serve(fd); };
  core::CycleReport report = opt->runCycle(/*force=*/true);
  if (!report.installed()) {
    std::fprintf(stderr, "no version installed: %s\n", report.describe().c_str());
    return 1;
  }
  int specialized = opt->activeFd();
  auto adoptedRevision = check(bpf::DispatcherHook(binding, veth.ifB(), veth.nsB()).read());
  int adopted = adoptedRevision->program.get();

  testing::PacketSpec missing;
  missing.daddr = 0x0a000002; // no policy: passes, and goes on to the last slot
  testing::Bytes packet = testing::buildPacket(missing);
  struct Variant {
    const char *name;
    int revision;
    int served; // what Morpheus's array holds (-1: nothing)
    std::vector<double> ns;
  };
  std::vector<Variant> variants = {{"owner", first.get(), -1, {}},
                                   {"trampoline", adopted, ownerProgram, {}},
                                   {"fallback", adopted, -1, {}},
                                   {"specialized", adopted, specialized, {}},
                                   {"empty", empty.get(), -1, {}}};
  testing::PacketSpec hit; // the policy drops it
  testing::Bytes droppedPacket = testing::buildPacket(hit);
  for (Variant &variant : variants) { // the packets' paths, checked once
    if (Error err = adoption->serve(variant.served))
      fail(std::move(err));
    uint32_t passed = check(bpf::testRun(variant.revision, {.packet = packet})).verdict;
    uint32_t dropped = check(bpf::testRun(variant.revision, {.packet = droppedPacket})).verdict;
    if (passed != XDP_PASS || dropped != (variant.revision == empty.get() ? XDP_PASS : XDP_DROP))
      std::fprintf(stderr, "%s: verdicts %u and %u\n", variant.name, passed, dropped);
  }
  for (unsigned round = 0; round < rounds; ++round)
    for (Variant &variant : variants) {
      if (Error err = adoption->serve(variant.served))
        fail(std::move(err));
      auto run = check(bpf::testRun(variant.revision, {.packet = packet, .repeat = repeat}));
      variant.ns.push_back(run.meanNs);
    }
  std::printf("variant      median  min  max   (ns per packet, %u rounds x %u runs)\n", rounds,
              repeat);
  for (Variant &variant : variants) {
    std::sort(variant.ns.begin(), variant.ns.end());
    std::printf("%-12s %6.0f %4.0f %4.0f\n", variant.name, variant.ns[variant.ns.size() / 2],
                variant.ns.front(), variant.ns.back());
  }
  if (Error err = adoption->serve(specialized))
    fail(std::move(err));
  if (Error err = adoption->restore())
    fail(std::move(err));
  opt.reset();
  adoption.reset();
  std::filesystem::remove_all(pins);
  bpf_object__close(counters);
  bpf_object__close(owner);
  return 0;
}
