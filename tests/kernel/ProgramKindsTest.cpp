// Program types and what becomes of the data plane: sections from before
// libbpf 1.0 need --prog-type; TC programs are specialized, guarded (their
// drop verdict when the original cannot be reached is TC_ACT_SHOT),
// attached through tcx and swapped with bpf_link_update; `morpheus run`
// leaves the original attached on exit, a restart takes the pinned link
// over, and --detach-on-exit (OnExit::Detach) takes everything away,
// pins by name included.
#include "ChildProcess.h"
#include "Corpus.h"
#include "KernelSupport.h"
#include "TcClassifier.h"
#include "backend/bpf/MapIO.h"
#include "netns/VethPair.h"
#include "runtime/Daemon.h"
#include "runtime/PacketSamples.h"
#include "trafficgen/LiveFrames.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/pkt_cls.h>

#include <gtest/gtest.h>
#include <arpa/inet.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

uint64_t perCpuSum(int mapFd, uint32_t index) {
  return perCpuCounters(mapFd, index + 1)[index];
}

TEST(ProgramKinds, SectionLibbpfCannotPlaceNeedsProgType) {
  std::string path = corpusPath("build_legacy_section.bpf.c");
  auto refused = bpf::ProgramSpec::load(path, {});
  ASSERT_FALSE(bool(refused));
  std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("'xdp_prog'"), std::string::npos) << message;
  EXPECT_NE(message.find("--prog-type xdp"), std::string::npos) << message;

  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.programType = bpf::ProgramType::Xdp;
  CorpusProgram legacy("build_legacy_section.bpf.c", options);
  ASSERT_TRUE(legacy.ok());
  EXPECT_EQ(legacy.opt().spec().programType("legacy_entry"), bpf::ProgramType::Xdp);
  legacy.set("legacy_actions", uint32_t(1), uint32_t(XDP_DROP)); // ICMP
  ASSERT_TRUE(legacy.cycle().installed());
  EXPECT_NE(legacy.opt().activeFd(), legacy.opt().originalFd());
  for (uint8_t protocol : {1, 6, 17}) {
    Bytes packet = buildPacket({.protocol = protocol});
    EXPECT_EQ(legacy.active(packet), legacy.original(packet)) << int(protocol);
  }
  EXPECT_EQ(legacy.active(buildPacket({.protocol = 1})).verdict, uint32_t(XDP_DROP));
}

// Maps defined as before libbpf 1.0 (section "maps", libbpf's struct
// bpf_map_def and iproute2's struct bpf_elf_map), which libbpf 1.x refuses:
// they load as BTF maps with the same type, sizes and flags, are analysed
// and specialized like any map, and the program answers as the original. A
// definition that sets a field only the legacy loaders knew (iproute2's
// pinning) is refused naming the map and the field.
TEST(ProgramKinds, LegacyMapDefinitionsLoadAsBtfMapsAndAreSpecialized) {
  CorpusProgram legacy("legacy_maps.bpf.c");
  ASSERT_TRUE(legacy.ok());
  auto blocked = bpf::layoutOf(legacy.opt().mapFd("legacy_blocked"), "legacy_blocked");
  ASSERT_TRUE(bool(blocked)) << llvm::toString(blocked.takeError());
  EXPECT_EQ(blocked->type, uint32_t(BPF_MAP_TYPE_HASH));
  EXPECT_EQ(blocked->keySize, 4u);
  EXPECT_EQ(blocked->valueSize, 4u);
  EXPECT_EQ(blocked->maxEntries, 64u);
  EXPECT_EQ(blocked->flags, uint32_t(BPF_F_NO_PREALLOC));
  auto counters = bpf::layoutOf(legacy.opt().mapFd("legacy_counters"), "legacy_counters");
  ASSERT_TRUE(bool(counters)) << llvm::toString(counters.takeError());
  EXPECT_EQ(counters->type, uint32_t(BPF_MAP_TYPE_PERCPU_ARRAY));
  EXPECT_EQ(counters->maxEntries, 2u);
  const core::TableAccessInfo &analysis = legacy.opt().spec().analysis();
  EXPECT_TRUE(analysis.isReadOnly("legacy_config"));
  EXPECT_FALSE(analysis.isReadOnly("legacy_counters"));

  struct {
    uint32_t enabled, verdict;
  } config = {1, XDP_DROP};
  legacy.set("legacy_config", uint32_t(0), config);
  legacy.set("legacy_blocked", htonl(0x0a000064), uint32_t(1));
  runtime::CycleReport report = legacy.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(CorpusProgram::decision(report, "legacy_config", true), nullptr)
      << report.log.toText();
  for (uint32_t saddr : {0x0a000064u, 0x0a000065u}) {
    Bytes packet = buildPacket({.saddr = saddr});
    EXPECT_EQ(legacy.active(packet), legacy.original(packet)) << saddr;
  }
  EXPECT_EQ(legacy.active(buildPacket({})).verdict, uint32_t(XDP_DROP));

  std::string pinned = "/tmp/morpheus-legacy-pinned-" + std::to_string(getpid()) + ".bpf.c";
  std::ofstream(pinned) << "#define LEGACY_PINNED\n#include \"" << corpusPath("legacy_maps.bpf.c")
                        << "\"\n";
  auto refused = bpf::ProgramSpec::load(pinned, {});
  unlink(pinned.c_str());
  ASSERT_FALSE(bool(refused));
  std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("map 'legacy_counters'"), std::string::npos) << message;
  EXPECT_NE(message.find("legacy field 6 to 2"), std::string::npos) << message;
}

// The guard of a TC program that falls back by tail call: while the
// version holds, the specialized code; once stale, the original through
// the fallback array; and when the original cannot be reached (an empty
// slot), TC_ACT_SHOT, never the stale code nor a pass.
TEST(ProgramKinds, TcGuardFallsBackToTheOriginalOrDrops) {
  auto spec = bpf::ProgramSpec::load(corpusPath("tc_classifier.bpf.c"), {});
  ASSERT_TRUE(bool(spec)) << llvm::toString(spec.takeError());
  ASSERT_EQ((*spec)->programType("tc_classify"), bpf::ProgramType::Tc);
  auto original = bpf::LoadedObject::load((*spec)->originalElf(), (*spec)->objectName(), {});
  ASSERT_TRUE(bool(original)) << llvm::toString(original.takeError());
  int configFd = original->mapFd("tc_config"), blockedFd = original->mapFd("blocked_sources");
  uint32_t zero = 0, source = htonl(0x0a000064), reason = 5;
  TcConfig config{1, 0, 0, {}};
  ASSERT_EQ(bpf_map_update_elem(configFd, &zero, &config, 0), 0);
  ASSERT_EQ(bpf_map_update_elem(blockedFd, &source, &reason, 0), 0);

  auto guard = bpf::GuardWord::create();
  ASSERT_TRUE(bool(guard)) << llvm::toString(guard.takeError());
  Fd fallback(bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "morpheus_fallbk", 4, 4,
                             bpf::MaxPrograms, nullptr));
  ASSERT_GE(fallback.fd, 0);
  std::map<std::string, int> maps;
  for (const auto &[name, fd] : original->maps())
    if (!bpf::isFrozenSection(name))
      maps[name] = fd;
  auto snapshot = bpf::readSnapshot((*spec)->readPlan(64), (*spec)->catalog(), maps);
  ASSERT_TRUE(bool(snapshot)) << llvm::toString(snapshot.takeError());
  maps[bpf::GuardMapName] = guard->fd();
  maps[bpf::FallbackMapName] = fallback.fd;

  // No facts from the kernel: the entry falls back by tail call (slot 0).
  bpf::SpecializeRequest request;
  request.guardVersion = guard->version();
  auto built = (*spec)->specialize(*snapshot, request);
  ASSERT_TRUE(bool(built)) << llvm::toString(built.takeError());
  ASSERT_EQ(built->log.guards.size(), 1u);
  EXPECT_EQ(built->log.guards[0].fallback, core::Fallback::TailCall);
  EXPECT_EQ(built->log.guards[0].failureVerdict, uint32_t(TC_ACT_SHOT));
  bpf::LoadOptions sharing;
  sharing.maps = maps;
  auto specialized = bpf::LoadedObject::load(built->elf, (*spec)->objectName(), sharing);
  ASSERT_TRUE(bool(specialized)) << llvm::toString(specialized.takeError());
  int specializedFd = specialized->programFd("tc_classify");
  int originalFd = original->programFd("tc_classify");

  Bytes blocked = buildPacket({}), other = buildPacket({.saddr = 0x0a000065});
  auto run = [](int fd, const Bytes &packet) {
    auto result = runtime::runPacket(fd, bpf::ProgramType::Tc, {.packet = packet});
    EXPECT_TRUE(bool(result)) << llvm::toString(result.takeError());
    return result ? result->verdict : ~0u;
  };
  EXPECT_EQ(run(originalFd, blocked), uint32_t(TC_ACT_SHOT));
  EXPECT_EQ(run(originalFd, other), uint32_t(TC_ACT_OK));
  EXPECT_EQ(run(specializedFd, blocked), uint32_t(TC_ACT_SHOT));
  EXPECT_EQ(run(specializedFd, other), uint32_t(TC_ACT_OK));

  // A change: the blocklist is emptied behind a bump.
  guard->bump();
  ASSERT_EQ(bpf_map_delete_elem(blockedFd, &source), 0);
  // Stale, and the original unreachable: dropped, although both the stale
  // code and the original would now pass `other`.
  EXPECT_EQ(run(specializedFd, other), uint32_t(TC_ACT_SHOT));
  // Stale, the original in its slot: the original's verdict on live maps.
  uint32_t slot = 0;
  ASSERT_EQ(bpf_map_update_elem(fallback.fd, &slot, &originalFd, 0), 0);
  EXPECT_EQ(run(specializedFd, blocked), uint32_t(TC_ACT_OK));
  EXPECT_EQ(run(specializedFd, other), uint32_t(TC_ACT_OK));
}

// `morpheus run`'s daemon on a TC program: attached through tcx on the
// veth's ingress, specialized and swapped through the link; real frames
// across the veth meet the specialized version's verdicts and counters.
TEST(ProgramKinds, TcProgramRunsUnderTheDaemonThroughTcx) {
  VethPair::sweepStale("progtc");
  VethPair veth("progtc");
  PinDir pins("progtc");
  runtime::DaemonOptions options;
  options.optimizer.pinDir = pins.path() + "/tc_classifier";
  options.ifaces = {veth.ifB()};
  options.netns = veth.nsB();
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto started =
      runtime::Daemon::start(corpusPath("tc_classifier.bpf.c"), options, out, errors);
  ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
  runtime::Daemon &daemon = **started;
  runtime::Optimizer &opt = daemon.optimizer();
  EXPECT_NE(daemon.attachedTo().find("tcx ingress on " + veth.ifB()), std::string::npos)
      << daemon.attachedTo();
  // What each map's updates are guaranteed: the counters the program
  // writes are live; the configuration it only reads may be specialized.
  std::vector<std::string> guarantees = daemon.updateGuarantees();
  ASSERT_EQ(guarantees.size(), 3u);
  for (const std::string &line : guarantees)
    EXPECT_NE(line.find(line.starts_with("map 'tc_counters'") ? "never specialized"
                                                               : "reach the next packet"),
              std::string::npos)
        << line;
  auto xdpPass = attachXdpPass(veth);
  ASSERT_TRUE(bool(xdpPass)) << llvm::toString(xdpPass.takeError());

  std::vector<trafficgen::Flow> flows = {{0x0a0000c8, 0x0a000001, 1000, 80, IPPROTO_UDP}};
  auto updater = bpf::MapUpdater::forMap(opt.mapFd("tc_config"), "tc_config", &opt.guard());
  ASSERT_TRUE(bool(updater));
  TcConfig config{1, 0, 0, {}};
  ASSERT_FALSE(bool(updater->update(bytesOf(uint32_t(0)), bytesOf(config))));
  auto blocked =
      bpf::MapUpdater::forMap(opt.mapFd("blocked_sources"), "blocked_sources", &opt.guard());
  ASSERT_TRUE(bool(blocked));
  ASSERT_FALSE(bool(blocked->update(bytesOf(htonl(flows[0].saddr)), bytesOf(uint32_t(1)))));
  std::optional<runtime::CycleReport> cycle =
      daemon.step(runtime::Daemon::Clock::now() + std::chrono::hours(1));
  ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
  uint32_t specializedId = programIdOf(opt.activeFd());
  EXPECT_NE(specializedId, programIdOf(opt.originalFd()));

  int counters = opt.mapFd("tc_counters");
  trafficgen::LiveFramesGenerator traffic =
      trafficgen::LiveFramesGenerator::create(trafficgen::acrossVeth(veth, flows));
  uint64_t droppedBefore = perCpuSum(counters, 3);
  const uint64_t packets = 200;
  ASSERT_EQ(traffic.send(packets).packetsSent, packets);
  EXPECT_TRUE(waitFor([&] { return perCpuSum(counters, 3) >= droppedBefore + packets; }, 2000ms))
      << "blocked frames counted as dropped: " << perCpuSum(counters, 3) - droppedBefore;
  auto stats = bpf::programRunStats(opt.activeFd());
  EXPECT_EQ(stats.programId, specializedId);
}

// The program the link pinned at `pin` runs (0: no such link).
uint32_t attachedProgram(const std::string &pin) {
  Fd link(bpf_obj_get(pin.c_str()));
  if (link.fd < 0)
    return 0;
  bpf_link_info info = {};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(link.fd, &info, &length) ? 0 : info.prog_id;
}

// Under OnExit::KeepServing the data plane outlives the daemon: the link is
// pinned, the original swapped back in, maps and guard stay pinned; the
// next daemon takes the link over (no second program); one that detaches
// on exit takes the link and the pins it made away.
TEST(ProgramKinds, OriginalKeepsServingAfterExitAndARestartTakesItOver) {
  VethPair::sweepStale("progexit");
  VethPair veth("progexit");
  PinDir pins("progexit");
  runtime::DaemonOptions options;
  options.optimizer.pinDir = pins.path() + "/policy_fwd";
  options.ifaces = {veth.ifB()};
  options.netns = veth.nsB();
  options.mode = bpf::XdpMode::Generic;
  options.onExit = runtime::OnExit::KeepServing;
  std::string linkPin = options.optimizer.pinDir + "/link_xdp_" + veth.ifB();
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  uint32_t firstOriginal = 0;
  {
    auto started =
        runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Optimizer &opt = (*started)->optimizer();
    firstOriginal = programIdOf(opt.originalFd());
    EXPECT_EQ(attachedProgram(linkPin), firstOriginal) << "the link is pinned from the start";
    std::optional<runtime::CycleReport> cycle =
        (*started)->step(runtime::Daemon::Clock::now() + std::chrono::hours(1));
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    EXPECT_EQ(attachedProgram(linkPin), programIdOf(opt.activeFd()));
  }
  EXPECT_EQ(attachedProgram(linkPin), firstOriginal)
      << "after exit the original serves\n" << printed << problems;
  for (const char *pin : {"/policy", "/config", "/morpheus_guard"})
    EXPECT_EQ(access((options.optimizer.pinDir + pin).c_str(), F_OK), 0) << pin;

  // A restart that detaches on exit: it takes the link over (XDP allows one
  // program per interface: attaching anew would fail with EBUSY).
  options.onExit = runtime::OnExit::Detach;
  {
    auto started =
        runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError()) << "\n" << printed;
    EXPECT_NE(printed.find("took over the link"), std::string::npos) << printed;
    uint32_t second = programIdOf((*started)->optimizer().originalFd());
    EXPECT_NE(second, firstOriginal);
    EXPECT_EQ(access(linkPin.c_str(), F_OK), -1) << "a detaching run keeps no link pin";
    std::string xdp = "ip -n " + veth.nsB() + " link show " + veth.ifB() + " | grep -q xdp";
    EXPECT_EQ(std::system(xdp.c_str()), 0) << "attached while it runs";
  }
  std::string xdp = "ip -n " + veth.nsB() + " link show " + veth.ifB() + " | grep -q xdp";
  EXPECT_NE(std::system(xdp.c_str()), 0) << "detached on exit";
  EXPECT_NE(access(linkPin.c_str(), F_OK), 0) << "link pin left behind";
  EXPECT_NE(access((options.optimizer.pinDir + "/morpheus_guard").c_str(), F_OK), 0)
      << "the guard this run pinned was left behind";
  // The maps it found pinned (by the first run) are not its to remove.
  EXPECT_EQ(access((options.optimizer.pinDir + "/policy").c_str(), F_OK), 0);
}

// kill -9 of `morpheus run`: nothing runs its exit, and the pinned link
// keeps the program attached and handling packets.
TEST(ProgramKinds, KillNineLeavesTheProgramAttached) {
  VethPair::sweepStale("progkill");
  VethPair veth("progkill");
  PinDir pins("progkill");
  std::string pinDir = pins.path() + "/policy_fwd";
  std::string socket = "/tmp/morpheus-test-progkill-" + std::to_string(getpid()) + ".sock";
  ChildProcess run("progkill",
                   {binPath("morpheus"), "run", sourcePath("examples/policy_fwd.bpf.c"),
                    "--iface", veth.ifB(), "--netns", veth.nsB(), "--pin-dir", pinDir,
                    "--period", "200ms", "--socket", socket});
  ASSERT_TRUE(waitFor([&] { return access(socket.c_str(), F_OK) == 0; }, 20s)) << run.log();
  std::string linkPin = pinDir + "/link_xdp_" + veth.ifB();
  ASSERT_NE(attachedProgram(linkPin), 0u) << run.log();
  kill(run.pid(), SIGKILL);
  EXPECT_FALSE(run.wait(10s)) << "killed, not exited";
  unlink(socket.c_str());
  uint32_t serving = attachedProgram(linkPin);
  EXPECT_NE(serving, 0u) << "the link went with the process";
  std::string xdp = "ip -n " + veth.nsB() + " link show " + veth.ifB() + " | grep -q xdp";
  EXPECT_EQ(std::system(xdp.c_str()), 0) << "no program on the interface after kill -9";
  // Frames still reach a program: its run count grows.
  Fd program(bpf_prog_get_fd_by_id(serving));
  ASSERT_GE(program.fd, 0);
  Fd stats(bpf_enable_stats(BPF_STATS_RUN_TIME));
  uint64_t before = bpf::programRunStats(program.fd).runCount;
  trafficgen::LiveFramesGenerator traffic = trafficgen::LiveFramesGenerator::create(
      trafficgen::acrossVeth(veth, {{0x0a0000c8, 0x0a000001, 1000, 80, IPPROTO_UDP}}));
  ASSERT_EQ(traffic.send(100).packetsSent, 100u);
  EXPECT_TRUE(waitFor([&] { return bpf::programRunStats(program.fd).runCount >= before + 100; },
                      2000ms));
}

// Pins by name: a run that detaches removes those its load made, and keeps
// those it found; one that keeps serving keeps them all.
TEST(ProgramKinds, PinsByNameMadeByADetachingRunGoWithIt) {
  PinDir root("pinsbyname");
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.pinRoot = root.path();
  for (bool keep : {false, true}) {
    {
      CorpusProgram pinned("maps_pinned.bpf.c", options);
      ASSERT_TRUE(pinned.ok());
      if (keep)
        pinned.opt().keepPins();
      EXPECT_EQ(access((root.path() + "/pinned_flows").c_str(), F_OK), 0);
    }
    EXPECT_EQ(access((root.path() + "/pinned_flows").c_str(), F_OK), keep ? 0 : -1)
        << (keep ? "kept for the program that stays" : "left behind");
  }
  // Found pinned (by the run above): a detaching run leaves it.
  { CorpusProgram again("maps_pinned.bpf.c", options); }
  EXPECT_EQ(access((root.path() + "/pinned_flows").c_str(), F_OK), 0)
      << "another loader's pin was removed";
}

} // namespace
} // namespace morpheus::testing

namespace morpheus::testing {
namespace {

// A daemon that fails to start (its second port does not exist) leaves
// nothing attached and no link pinned, although it keeps serving on exit.
TEST(ProgramKinds, ADaemonThatDidNotStartLeavesNothingAttached) {
  VethPair::sweepStale("progfail");
  VethPair veth("progfail");
  PinDir pins("progfail");
  runtime::DaemonOptions options;
  options.optimizer.pinDir = pins.path() + "/policy_fwd";
  options.ifaces = {veth.ifB(), "mphnosuchif"};
  options.netns = veth.nsB();
  options.mode = bpf::XdpMode::Generic;
  options.onExit = runtime::OnExit::KeepServing;
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto started =
      runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
  ASSERT_FALSE(bool(started));
  std::string message = llvm::toString(started.takeError());
  EXPECT_NE(message.find("mphnosuchif"), std::string::npos) << message;
  std::string xdp = "ip -n " + veth.nsB() + " link show " + veth.ifB() + " | grep -q xdp";
  EXPECT_NE(std::system(xdp.c_str()), 0) << "the first port kept the program";
  EXPECT_NE(access((options.optimizer.pinDir + "/link_xdp_" + veth.ifB()).c_str(), F_OK), 0);
  EXPECT_NE(access(options.optimizer.pinDir.c_str(), F_OK), 0) << "pins left behind";
}

} // namespace
} // namespace morpheus::testing
