// morpheus-demo: Morpheus on a live program, end to end, in ~30 seconds.
//
// Two network namespaces joined by a veth pair; examples/policy_fwd.bpf.c
// attached natively on the receiving end under Morpheus; live-frames traffic
// over 16 flows from the other end. The attached program rotates between
// the original (generic), Morpheus's specialized version and an empty
// control program, one second each, and the cost per packet of each is read
// from the kernel's bpf_stats. Everything is removed on exit, Ctrl-C
// included.
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapUpdater.h"
#include "backend/bpf/ProgramLink.h"
#include "netns/VethPair.h"
#include "runtime/Optimizer.h"
#include "support/Bytes.h"
#include "support/CommandLine.h"
#include "trafficgen/LiveFrames.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/in.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <thread>

extern "C" {
#include "policy_fwd.h"
}

extern "C" const unsigned char demo_empty_start[], demo_empty_end[];

using namespace morpheus;

namespace {

std::atomic<bool> interrupted{false};

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  size_t n = values.size();
  return n == 0 ? 0 : n % 2 ? values[n / 2] : (values[n / 2 - 1] + values[n / 2]) / 2;
}


void sleepInterruptibly(std::chrono::milliseconds total) {
  auto until = std::chrono::steady_clock::now() + total;
  while (!interrupted && std::chrono::steady_clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
}

int fail(const std::string &message) {
  std::fprintf(stderr, "morpheus-demo: %s\n", message.c_str());
  return 1;
}

int runDemo(int rounds) {
  using testing::VethPair;
  VethPair::sweepStale("demo");
  VethPair veth("demo");
  std::printf("demo: namespaces %s -> %s, veth %s -> %s\n", veth.nsA().c_str(),
              veth.nsB().c_str(), veth.ifA().c_str(), veth.ifB().c_str());

  runtime::OptimizerOptions options;
  options.pinDir = "/sys/fs/bpf/morpheus-demo-" + std::to_string(getpid());
  auto created = runtime::Optimizer::create(
      std::string(MORPHEUS_SOURCE_DIR) + "/examples/policy_fwd.bpf.c", options);
  if (!created)
    return fail(llvm::toString(created.takeError()));
  runtime::Optimizer &opt = **created;

  // The operator's configuration: policy on, TTL and fragment checks on,
  // 16 destinations with a policy; everything else passes.
  auto update = [&](const char *map, const core::Bytes &key, const core::Bytes &value) {
    auto updater = bpf::MapUpdater::forMap(opt.mapFd(map), map, &opt.guard());
    if (!updater)
      return updater.takeError();
    return updater->update(key, value);
  };
  config cfg = {CFG_POLICY_ENABLED | CFG_TTL_CHECK | CFG_DROP_FRAGMENTS, ACTION_PASS};
  uint32_t zero = 0;
  if (llvm::Error err = update("config", bytesOf(zero), bytesOf(cfg)))
    return fail(llvm::toString(std::move(err)));
  std::vector<trafficgen::Flow> flows;
  for (uint32_t i = 0; i < 16; ++i) {
    policy_key key = {htonl(0x0a000001 + i), htons(uint16_t(5000 + i)), IPPROTO_UDP, 0};
    policy_value value = {ACTION_DROP, {}, {}};
    if (llvm::Error err = update("policy", bytesOf(key), bytesOf(value)))
      return fail(llvm::toString(std::move(err)));
    flows.push_back({0x0a0000fe, 0x0a000001 + i, 40000, uint16_t(5000 + i), IPPROTO_UDP});
  }

  auto empty = bpf::LoadedObject::load(
      llvm::ArrayRef<char>(reinterpret_cast<const char *>(demo_empty_start),
                           demo_empty_end - demo_empty_start),
      "empty", {});
  if (!empty)
    return fail(llvm::toString(empty.takeError()));
  auto link = bpf::ProgramLink::attach(
      opt.originalFd(), bpf::AttachPoint{bpf::ProgramType::Xdp, veth.ifB(), veth.nsB()});
  if (!link)
    return fail(llvm::toString(link.takeError()));
  std::printf("demo: policy_fwd attached natively to %s; maps pinned in %s\n",
              veth.ifB().c_str(), options.pinDir.c_str());

  core::CycleReport report = opt.runCycle();
  if (!report.installed())
    return fail("specialization failed: " + report.describe());
  std::printf("demo: Morpheus specialized policy_fwd in %.1f ms (t1 %.2f ms map reads, "
              "t2 %.1f ms compile, %.2f ms load)\n",
              report.times.analysisMs + report.times.codegenMs + report.times.injectionMs,
              report.times.analysisMs, report.times.codegenMs, report.times.injectionMs);
  for (const core::SiteDecision &decision : report.log.decisions)
    if (decision.applied)
      std::printf("      %s: %s (%s)\n", decision.table.c_str(), decision.detail.c_str(),
                  decision.location.c_str());
  std::printf("      original %u instructions -> specialized %zu\n",
              [&] {
                bpf_prog_info info = {};
                uint32_t length = sizeof(info);
                bpf_obj_get_info_by_fd(opt.originalFd(), &info, &length);
                return info.xlated_prog_len / 8;
              }(),
              report.instructions);

  int statsFd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (statsFd < 0)
    return fail("cannot enable bpf_stats: " + std::string(strerror(errno)));

  trafficgen::LiveFramesOptions traffic = trafficgen::acrossVeth(veth, flows);
  trafficgen::LiveFramesGenerator generator = trafficgen::LiveFramesGenerator::create(traffic);
  std::atomic<bool> stopTraffic{false};
  std::thread sender([&] {
    while (!stopTraffic)
      generator.send(1000000);
  });

  struct Variant {
    const char *name;
    int fd;
    std::vector<double> nsPerPacket;
  };
  Variant variants[] = {{"generic", opt.originalFd(), {}},
                        {"specialized", opt.activeFd(), {}},
                        {"empty (control)", empty->programFd("empty"), {}}};
  std::printf("demo: rotating generic / specialized / empty, 1 s each, %d rounds\n", rounds);
  for (int round = 0; round < rounds && !interrupted; ++round)
    for (Variant &variant : variants) {
      if (llvm::Error err = link->replace(variant.fd))
        return fail(llvm::toString(std::move(err)));
      bpf::ProgramRunStats before = bpf::programRunStats(variant.fd);
      auto start = std::chrono::steady_clock::now();
      sleepInterruptibly(std::chrono::milliseconds(1000));
      bpf::ProgramRunStats after = bpf::programRunStats(variant.fd);
      double seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
      uint64_t packets = after.runCount - before.runCount;
      if (!packets)
        continue;
      double ns = double(after.runTimeNs - before.runTimeNs) / packets;
      variant.nsPerPacket.push_back(ns);
      std::printf("  round %d  %-16s %6.1f ns/packet  %5.2f Mpps offered\n", round + 1,
                  variant.name, ns, packets / seconds / 1e6);
      std::fflush(stdout);
    }

  // A control-plane update: the guard trips at once, the next cycle
  // re-specializes for the new contents.
  if (llvm::Error err = link->replace(opt.activeFd()))
    return fail(llvm::toString(std::move(err)));
  policy_key key = {htonl(0x0a000001), htons(5000), IPPROTO_UDP, 0};
  policy_value pass = {ACTION_PASS, {}, {}};
  if (llvm::Error err = update("policy", bytesOf(key), bytesOf(pass)))
    return fail(llvm::toString(std::move(err)));
  std::printf("demo: control plane changed one policy entry; guard version now %llu, "
              "packets take the generic path\n",
              (unsigned long long)opt.guard().version());
  opt.install = [&](int fd) { return link->replace(fd); };
  core::CycleReport again = opt.runCycle();
  std::printf("demo: re-specialized for version %llu: %s in %.1f ms\n",
              (unsigned long long)again.version, again.describe().c_str(),
              again.times.analysisMs + again.times.codegenMs + again.times.injectionMs);

  stopTraffic = true;
  sender.join();
  close(statsFd);

  double generic = median(variants[0].nsPerPacket);
  double specialized = median(variants[1].nsPerPacket);
  double control = median(variants[2].nsPerPacket);
  std::printf("\nresult (median of %zu rounds, bpf_stats, this machine):\n",
              variants[0].nsPerPacket.size());
  std::printf("  gross ns/packet: generic %.1f, specialized %.1f  -> %.2fx\n", generic,
              specialized, specialized > 0 ? generic / specialized : 0);
  std::printf("  net ns/packet (minus the empty program's %.1f): generic %.1f, "
              "specialized %.1f  -> %.2fx\n",
              control, generic - control, specialized - control,
              specialized - control > 0 ? (generic - control) / (specialized - control) : 0);
  std::printf("demo: cleaning up (detach, unpin, delete namespaces)\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  int rounds = 5;
  auto app = morpheus::commandline::makeApp(
      "morpheus-demo", "Morpheus on a veth pair under live traffic.",
      "Runs examples/policy_fwd.bpf.c on a veth pair under live traffic and\n"
      "compares the original with Morpheus's specialized version, ROUNDS\n"
      "rotations of 1 s each (default 5). Needs root.",
      [&rounds](const CLI::App &) {
        std::signal(SIGINT, [](int) { interrupted = true; });
        std::signal(SIGTERM, [](int) { interrupted = true; });
        try {
          return runDemo(rounds);
        } catch (const std::exception &error) {
          return fail(error.what());
        }
      });
  app->add_option("ROUNDS", rounds, "measurement rotations of 1 s each (default 5)")
      ->check(CLI::Range(1, 1000000).description(""))
      ->type_name("");
  return morpheus::commandline::run(*app, argc, argv);
}
