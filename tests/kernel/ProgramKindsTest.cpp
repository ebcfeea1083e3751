// Program types and what becomes of the data plane: sections from before
// libbpf 1.0 need --prog-type; TC programs are specialized, guarded (their
// drop verdict when the original cannot be reached is TC_ACT_SHOT),
// attached through tcx and swapped with bpf_link_update; `morpheus run`
// leaves the original attached on exit, a restart takes the pinned link
// over, and --detach-on-exit (OnExit::Detach) takes everything away,
// pins by name included; a tracepoint attached by its section stays
// attached with the entry and is taken over alike.
#include "ChildProcess.h"
#include "Corpus.h"
#include "KernelSupport.h"
#include "TcClassifier.h"
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramSpec.h"
#include "netns/VethPair.h"
#include "runtime/Daemon.h"
#include "runtime/PacketSamples.h"
#include "trafficgen/LiveFrames.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/pkt_cls.h>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <llvm/Testing/Support/Error.h>
#include <arpa/inet.h>
#include <signal.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

uint64_t perCpuSum(int mapFd, uint32_t index) {
  return perCpuCounters(mapFd, index + 1)[index];
}

// A daemon on the veth's B side in SKB mode whose data plane outlives it
// (OnExit::KeepServing), pinning in `pinDir`.
runtime::DaemonOptions keptServingOn(const VethPair &veth, std::string pinDir) {
  runtime::DaemonOptions options;
  options.optimizer.pinDir = std::move(pinDir);
  options.ifaces = {veth.ifB()};
  options.netns = veth.nsB();
  options.mode = bpf::XdpMode::Generic;
  options.onExit = runtime::OnExit::KeepServing;
  return options;
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
  core::CycleReport report = legacy.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(CorpusProgram::decision(report, "legacy_config", true), nullptr)
      << report.log.toText();
  for (uint32_t saddr : {0x0a000064u, 0x0a000065u}) {
    Bytes packet = buildPacket({.saddr = saddr});
    EXPECT_EQ(legacy.active(packet), legacy.original(packet)) << saddr;
  }
  EXPECT_EQ(legacy.active(buildPacket({})).verdict, uint32_t(XDP_DROP));

  std::string inner = "/tmp/morpheus-legacy-inner-" + std::to_string(getpid()) + ".bpf.c";
  std::ofstream(inner) << "#define LEGACY_INNER\n#include \"" << corpusPath("legacy_maps.bpf.c")
                       << "\"\n";
  auto refused = bpf::ProgramSpec::load(inner, {});
  unlink(inner.c_str());
  ASSERT_FALSE(bool(refused));
  std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("map 'legacy_counters'"), std::string::npos) << message;
  EXPECT_NE(message.find("legacy field 7 to 1"), std::string::npos) << message;
}

// The error loading a variant of `file`: the corpus program with `define`
// set before it.
std::string variantRefusal(const std::string &file, const std::string &define) {
  std::string variant = "/tmp/morpheus-variant-" + std::to_string(getpid()) + ".bpf.c";
  std::ofstream(variant) << "#define " << define << "\n#include \"" << corpusPath(file) << "\"\n";
  auto loaded = bpf::ProgramSpec::load(variant, {});
  unlink(variant.c_str());
  if (loaded)
    return "";
  return llvm::toString(loaded.takeError());
}

// How many tail calls a program attempts at most, read from the code the
// kernel runs (the kernel counts each attempt against its limit, whether
// or not the slot holds a program): none for a program that makes none,
// the sites for straight-line code, no bound for a tail call in a loop;
// and what that leaves before a stage they reach (bpf::tailCallsBefore).
TEST(ProgramKinds, TailCallAttemptsAreBoundedFromTheCodeTheKernelRuns) {
  auto spec = bpf::ProgramSpec::load(corpusPath("tail_call_attempts.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  auto original = bpf::LoadedObject::load((*spec)->originalElf(), (*spec)->objectName(), {});
  ASSERT_THAT_EXPECTED(original, llvm::Succeeded());
  std::map<std::string, bpf::LoadedObject::Code> code;
  for (const std::string &name : {"attempts_loop", "attempts_two", "attempts_leaf"}) {
    auto read = original->programCode(name);
    ASSERT_THAT_EXPECTED(read, llvm::Succeeded()) << name;
    code[name] = std::move(*read);
  }
  EXPECT_FALSE(code["attempts_leaf"].tailCalls());
  EXPECT_EQ(code["attempts_leaf"].mostTailCalls, 0u);
  EXPECT_TRUE(code["attempts_two"].tailCalls());
  EXPECT_EQ(code["attempts_two"].mostTailCalls, 2u);
  EXPECT_TRUE(code["attempts_loop"].tailCalls());
  EXPECT_EQ(code["attempts_loop"].mostTailCalls, std::nullopt) << "a tail call in a loop";

  bpf::ProgramSlots stages = {{"stages", {{3, "attempts_leaf"}}}};
  std::map<std::string, uint32_t> expected = {{"attempts_leaf", 2}};
  EXPECT_EQ(bpf::tailCallsBefore("attempts_two", 0, code, stages), expected);
  EXPECT_TRUE(bpf::tailCallsBefore("attempts_loop", 0, code, stages).empty());
}

// An object written for iproute2's loader, as Cilium's datapath is
// (tests/programs/iproute2_tail_calls.bpf.c): libbpf 1.1 refuses it (legacy
// maps with an id and pinning, "ID/KEY" sections, a static program), and
// Morpheus loads it as iproute2 and Cilium's loader do: each "ID/KEY"
// program in slot KEY of the array of that id (a static one too), the map
// pinned PIN_GLOBAL_NS and the BTF map pinned by name under
// <root>/tc/globals and nowhere else, the one of another pinning value not
// pinned by name, the ".rodata.config" setting read as its value. The
// verdicts show the tail calls landed (only the last stage drops or sends
// back); after a cycle the specialized entry tail-calls a stage array of
// its own holding the specialized stage, and answers as the original.
TEST(ProgramKinds, Iproute2ObjectsLoadWithTheirTailCallsInTheirSlotsAndTheirPins) {
  PinDir root("iproute2");
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.pinRoot = root.path();
  options.program = "iproute2_entry";
  CorpusProgram program("iproute2_tail_calls.bpf.c", options);
  ASSERT_TRUE(program.ok());
  const bpf::ProgramSpec &spec = program.opt().spec();
  bpf::ProgramSlots expected = {{"iproute2_calls", {{1, "stage_one"}, {0x10, "stage_two"}}}};
  EXPECT_EQ(spec.staticProgramSlots(), expected);
  EXPECT_EQ(spec.programType("stage_two"), bpf::ProgramType::Xdp) << "static, in '2/0x10'";
  EXPECT_EQ(spec.programType("stage_one"), bpf::ProgramType::Xdp);

  uint32_t guard = mapIdOf(program.opt().mapFd(bpf::GuardMapName));
  int calls = program.opt().mapFd("iproute2_calls");
  std::map<std::string, HeldProgram> live = programsHeld(calls, guard, 32);
  ASSERT_EQ(live.size(), 2u);
  for (auto [slot, name] : expected["iproute2_calls"]) {
    uint32_t held = 0;
    ASSERT_EQ(bpf_map_lookup_elem(calls, &slot, &held), 0) << "slot " << slot << " is empty";
    EXPECT_EQ(held, live[name].id) << name << " is not in slot " << slot;
  }

  std::string globals = root.path() + "/tc/globals/";
  EXPECT_EQ(access((globals + "iproute2_config").c_str(), F_OK), 0) << "PIN_GLOBAL_NS";
  EXPECT_EQ(access((globals + "iproute2_seen").c_str(), F_OK), 0) << "LIBBPF_PIN_BY_NAME";
  EXPECT_NE(access((globals + "iproute2_calls").c_str(), F_OK), 0) << "pinning 16";
  EXPECT_NE(access((root.path() + "/iproute2_config").c_str(), F_OK), 0);
  EXPECT_NE(access((root.path() + "/iproute2_seen").c_str(), F_OK), 0);

  struct {
    uint16_t blockedPort, pad;
  } config = {htons(53), 0};
  program.set("iproute2_config", uint32_t(0), config);
  Bytes blocked = buildPacket({.dport = 53});
  Bytes trusted = buildPacket({.saddr = 0x0a0000fe, .dport = 53});
  Bytes other = buildPacket({.dport = 80});
  Bytes notIpv4 = buildPacket({.etherType = 0x86dd});
  EXPECT_EQ(program.original(blocked).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(program.original(trusted).verdict, uint32_t(XDP_TX)) << "the setting's value";
  EXPECT_EQ(program.original(other).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(program.original(notIpv4).verdict, uint32_t(XDP_PASS));

  core::CycleReport report = program.cycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  EXPECT_NE(CorpusProgram::decision(report, "iproute2_config", true), nullptr)
      << report.log.toText();
  for (const Bytes &packet : {blocked, trusted, other, notIpv4})
    EXPECT_EQ(program.active(packet), program.original(packet));
  EXPECT_EQ(program.active(blocked).verdict, uint32_t(XDP_DROP));
  uint32_t own = mapIdByName(program.opt().activeFd(), "iproute2_calls");
  ASSERT_NE(own, 0u);
  EXPECT_NE(own, mapIdOf(calls)) << "the version has a stage array of its own";
  std::map<std::string, HeldProgram> used =
      programsHeld(Fd(bpf_map_get_fd_by_id(own)).fd, guard, 32);
  ASSERT_EQ(used.size(), 2u);
  EXPECT_TRUE(used["stage_two"].checksTheGuard) << "the specialized stage, in slot 0x10";
  EXPECT_NE(used["stage_two"].id, live["stage_two"].id);

  std::string objectNs = variantRefusal("iproute2_tail_calls.bpf.c", "CONFIG_PINNING 1");
  EXPECT_NE(objectNs.find("map 'iproute2_config' is pinned in iproute2's object namespace"),
            std::string::npos)
      << objectNs;
  std::string unknownId = variantRefusal("iproute2_tail_calls.bpf.c", "UNKNOWN_ID");
  EXPECT_NE(unknownId.find("program 'nowhere' is in section '7/1'"), std::string::npos)
      << unknownId;
  EXPECT_NE(unknownId.find("no map in section \"maps\" has that id"), std::string::npos)
      << unknownId;
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

// What `morpheus specialize --guard-version` writes for an object whose
// programs are of two kinds (`file`; `other` is the second program), as
// its user loads it: with libbpf, the maps shared with the original's,
// the guard set to the version, the original's XDP program in its slot of
// the fallback array. A program array takes programs of one kind only, so
// the XDP program (the first) falls back by tail call and `other` in the
// program; the object loads (one array for both, it did not), and after a
// change behind a bump both answer from the live maps.
struct GuardedObject {
  std::unique_ptr<bpf::ProgramSpec> spec;
  std::optional<bpf::LoadedObject> original, specialized;
  core::SpecializationLog log;
  int dropAll = -1, guard = -1;
};

constexpr uint64_t OfflineVersion = 7;

void loadGuardedObject(const std::string &file, const std::string &other, GuardedObject &built) {
  auto spec = bpf::ProgramSpec::load(corpusPath(file), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  built.spec = std::move(*spec);
  auto original = bpf::LoadedObject::load(built.spec->originalElf(), built.spec->objectName(), {});
  ASSERT_THAT_EXPECTED(original, llvm::Succeeded());
  built.original.emplace(std::move(*original));
  built.dropAll = built.original->mapFd("drop_all");
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(built.dropAll, &zero, &zero, BPF_ANY), 0);
  std::map<std::string, int> maps;
  for (const auto &[name, fd] : built.original->maps())
    if (!bpf::isFrozenSection(name))
      maps[name] = fd;
  auto snapshot = bpf::readSnapshot(built.spec->readPlan(64), built.spec->catalog(), maps);
  ASSERT_THAT_EXPECTED(snapshot, llvm::Succeeded());

  bpf::SpecializeRequest request; // as `specialize --guard-version 7` asks
  request.guardVersion = OfflineVersion;
  auto object = built.spec->specialize(*snapshot, request);
  ASSERT_THAT_EXPECTED(object, llvm::Succeeded());
  built.log = std::move(object->log);
  ASSERT_EQ(built.log.guards.size(), 2u);
  for (const core::GuardDecision &guard : built.log.guards)
    if (guard.function == "xdp_side") {
      EXPECT_EQ(guard.fallback, core::Fallback::TailCall) << guard.detail;
      EXPECT_EQ(guard.slot, 0u);
    } else {
      EXPECT_EQ(guard.function, other);
      EXPECT_EQ(guard.fallback, core::Fallback::InProgram) << guard.detail;
      EXPECT_NE(guard.detail.find("cannot share the fallback program array with 'xdp_side'"),
                std::string::npos)
          << guard.detail;
    }

  bpf::LoadOptions sharing;
  sharing.maps = maps;
  auto specialized = bpf::LoadedObject::load(object->elf, built.spec->objectName(), sharing);
  ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded()) << "the kernel loads the object";
  built.specialized.emplace(std::move(*specialized));
  built.guard = built.specialized->mapFd(bpf::GuardMapName);
  uint64_t state[2] = {OfflineVersion, 0};
  ASSERT_EQ(bpf_map_update_elem(built.guard, &zero, state, BPF_ANY), 0);
  int fallback = built.specialized->mapFd(bpf::FallbackMapName);
  int xdp = built.original->programFd("xdp_side");
  ASSERT_EQ(bpf_map_update_elem(fallback, &zero, &xdp, BPF_ANY), 0);
}

// The switch turned on behind a bump of the guard, as a control plane
// following the guard protocol does.
void dropAllBehindABump(const GuardedObject &built) {
  uint32_t zero = 0, on = 1;
  uint64_t state[2] = {OfflineVersion + 1, 0};
  ASSERT_EQ(bpf_map_update_elem(built.guard, &zero, state, BPF_ANY), 0);
  ASSERT_EQ(bpf_map_update_elem(built.dropAll, &zero, &on, BPF_ANY), 0);
}

TEST(ProgramKinds, OfflineGuardsOfAnXdpAndATcProgramLoadAndFallBackEachByItsKind) {
  GuardedObject built;
  loadGuardedObject("xdp_and_tc.bpf.c", "tc_side", built);
  ASSERT_TRUE(built.specialized);
  int xdp = built.specialized->programFd("xdp_side");
  int tc = built.specialized->programFd("tc_side");
  auto tcVerdict = [](int fd) {
    auto result = runtime::runPacket(fd, bpf::ProgramType::Tc, {.packet = buildPacket({})});
    EXPECT_THAT_EXPECTED(result, llvm::Succeeded());
    return result ? result->verdict : ~0u;
  };
  EXPECT_EQ(runOnce(xdp, buildPacket({})).verdict, uint32_t(XDP_PASS));
  EXPECT_EQ(tcVerdict(tc), uint32_t(TC_ACT_OK));
  dropAllBehindABump(built);
  EXPECT_EQ(runOnce(xdp, buildPacket({})).verdict, uint32_t(XDP_DROP))
      << "stale: the original, by tail call";
  EXPECT_EQ(tcVerdict(tc), uint32_t(TC_ACT_SHOT)) << "stale: the generic copy in the program";
}

// A tracepoint program beside the XDP one: it loads (BPF_PROG_TEST_RUN
// cannot run a tracepoint program; its guard falls back in the program).
TEST(ProgramKinds, OfflineGuardsOfAnXdpAndATracepointProgramLoad) {
  GuardedObject built;
  loadGuardedObject("xdp_and_tracepoint.bpf.c", "count_exceptions", built);
  ASSERT_TRUE(built.specialized);
  EXPECT_GE(built.specialized->programFd("count_exceptions"), 0);
  int xdp = built.specialized->programFd("xdp_side");
  EXPECT_EQ(runOnce(xdp, buildPacket({})).verdict, uint32_t(XDP_PASS));
  dropAllBehindABump(built);
  EXPECT_EQ(runOnce(xdp, buildPacket({})).verdict, uint32_t(XDP_DROP))
      << "stale: the original, by tail call";
}

// tracepoint_feeds_xdp's tracepoint counts only this process's test runs
// (its counted_tgid map), so a count is exact whatever else runs test runs
// on the machine (other tests, a daemon's validation).
void countOnlyOurTestRuns(int countedTgidMap) {
  uint32_t zero = 0, us = uint32_t(getpid());
  ASSERT_EQ(bpf_map_update_elem(countedTgidMap, &zero, &us, BPF_ANY), 0);
}

uint64_t testRunsCounted(int finishedMap) {
  uint32_t zero = 0;
  uint64_t value = 0;
  EXPECT_EQ(bpf_map_lookup_elem(finishedMap, &zero, &value), 0);
  return value;
}

// Three BPF_PROG_TEST_RUNs of tracepoint_feeds_xdp's XDP program, loaded
// apart (its own maps): each ends in the tracepoint the runs attached.
void threeTestRuns() {
  auto spec = bpf::ProgramSpec::load(corpusPath("tracepoint_feeds_xdp.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  auto other = bpf::LoadedObject::load((*spec)->originalElf(), "tp_runs", {});
  ASSERT_THAT_EXPECTED(other, llvm::Succeeded());
  for (int i = 0; i < 3; ++i)
    runOnce(other->programFd("gate"), buildPacket({}));
}

// An XDP program beside the tracepoint that feeds it (tracepoint first in
// the object): the daemon runs the XDP program, attaches the tracepoint
// where its section says, as the object's loader would, and says so; the
// counter the tracepoint keeps moves while the run lasts, and, the entry
// kept serving (KeepServing), after it: the tracepoint's link is pinned
// beside the entry's (said in the last line).
TEST(ProgramKinds, TheDaemonAttachesTheObjectsTracepointWhereItsSectionSays) {
  struct statfs before = {};
  bool tracefsMounted = statfs("/sys/kernel/tracing", &before) == 0 &&
                        before.f_type == TRACEFS_MAGIC;
  VethPair::sweepStale("progtp");
  VethPair veth("progtp");
  PinDir pins("progtp");
  runtime::DaemonOptions options = keptServingOn(veth, pins.path() + "/tracepoint_feeds_xdp");
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  FileDescriptor finished;
  std::string last;
  {
    auto started = runtime::Daemon::start(corpusPath("tracepoint_feeds_xdp.bpf.c"), options,
                                          out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Optimizer &opt = (*started)->optimizer();
    EXPECT_EQ(opt.entryName(), "gate") << "the XDP program runs, not the tracepoint before it";
    EXPECT_NE(printed.find("program 'count_test_runs' (tracepoint) attached where its section "
                           "says, running its original code on the shared maps while the "
                           "program is attached (its link pinned at " +
                           options.optimizer.pinDir + "/link_by_section_count_test_runs)"),
              std::string::npos)
        << printed;
    finished.reset(dup(opt.mapFd("finished")));
    countOnlyOurTestRuns(opt.mapFd("counted_tgid"));
    uint64_t counted = testRunsCounted(finished.get());
    for (int i = 0; i < 3; ++i)
      runOnce(opt.activeFd(), buildPacket({}));
    EXPECT_EQ(testRunsCounted(finished.get()), counted + 3)
        << "each test run's end reached the tracepoint once";
    last = (*started)->exitNote().text;
  }
  EXPECT_NE(last.find("count_test_runs, attached where its section says, stays attached beside "
                      "it (pinned in " + options.optimizer.pinDir + ")"),
            std::string::npos)
      << last;
  uint64_t after = testRunsCounted(finished.get());
  threeTestRuns();
  EXPECT_EQ(testRunsCounted(finished.get()), after + 3)
      << "the tracepoint stopped while the entry it feeds stays attached";
  if (!tracefsMounted)
    umount2("/sys/kernel/tracing", MNT_DETACH); // mounted for the tracepoint's id
}

// kill -9 of `morpheus run`: the tracepoint attached by its section goes on
// counting (its link pinned); the next run takes its link over rather than
// attach a second (each event counted once), and, detaching on exit,
// removes link and pin.
TEST(ProgramKinds, ATracepointAttachedBySectionOutlivesKillNineAndIsTakenOverOnce) {
  struct statfs before = {};
  bool tracefsMounted = statfs("/sys/kernel/tracing", &before) == 0 &&
                        before.f_type == TRACEFS_MAGIC;
  VethPair::sweepStale("progtpkill");
  VethPair veth("progtpkill");
  PinDir pins("progtpkill");
  std::string pinDir = pins.path() + "/tracepoint_feeds_xdp";
  std::string socket = "/tmp/morpheus-test-progtpkill-" + std::to_string(getpid()) + ".sock";
  std::string tracepointPin = pinDir + "/link_by_section_count_test_runs";
  {
    ChildProcess run("progtpkill",
                     {binPath("morpheus"), "run", corpusPath("tracepoint_feeds_xdp.bpf.c"),
                      "--iface", veth.ifB(), "--netns", veth.nsB(), "--xdp-mode", "generic",
                      "--pin-dir", pinDir, "--period", "200ms", "--socket", socket});
    ASSERT_TRUE(waitFor([&] { return access(socket.c_str(), F_OK) == 0; }, 30s)) << run.log();
    ASSERT_EQ(access(tracepointPin.c_str(), F_OK), 0) << "the tracepoint's link is pinned\n"
                                                      << run.log();
    kill(run.pid(), SIGKILL);
    EXPECT_FALSE(run.wait(10s)) << "killed, not exited";
  }
  unlink(socket.c_str());
  unlink((socket + ".lock").c_str());
  FileDescriptor finished(bpf_obj_get((pinDir + "/finished").c_str()));
  FileDescriptor countedTgid(bpf_obj_get((pinDir + "/counted_tgid").c_str()));
  ASSERT_TRUE(finished.valid() && countedTgid.valid()) << "maps pinned in " << pinDir;
  countOnlyOurTestRuns(countedTgid.get());
  uint64_t counted = testRunsCounted(finished.get());
  threeTestRuns();
  EXPECT_EQ(testRunsCounted(finished.get()), counted + 3)
      << "after kill -9 the tracepoint still counts, once per run";

  runtime::DaemonOptions options = keptServingOn(veth, pinDir);
  options.onExit = runtime::OnExit::Detach;
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  {
    auto started = runtime::Daemon::start(corpusPath("tracepoint_feeds_xdp.bpf.c"), options,
                                          out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    EXPECT_NE(printed.find("program 'count_test_runs' (tracepoint): took over the link an "
                           "earlier run left at " + tracepointPin),
              std::string::npos)
        << printed;
    EXPECT_EQ(printed.find("attached where its section says"), std::string::npos)
        << "attached a second time: " << printed;
    EXPECT_EQ(access(tracepointPin.c_str(), F_OK), -1)
        << "a run that detaches on exit keeps no pin of what it took over";
    counted = testRunsCounted(finished.get());
    threeTestRuns();
    EXPECT_EQ(testRunsCounted(finished.get()), counted + 3)
        << "taken over: each run counted once, not by two links";
  }
  counted = testRunsCounted(finished.get());
  threeTestRuns();
  EXPECT_EQ(testRunsCounted(finished.get()), counted)
      << "the run that detached on exit left the tracepoint attached";
  EXPECT_EQ(access(tracepointPin.c_str(), F_OK), -1);
  if (!tracefsMounted)
    umount2("/sys/kernel/tracing", MNT_DETACH);
}

// A tracepoint link an earlier run pinned that runs on other maps (their
// pins were removed, so this run made maps of its own) is not taken over:
// it is detached, then this run's attached; no event is counted by both.
TEST(ProgramKinds, ATracepointLinkOnOtherMapsIsReplacedNotDoubled) {
  struct statfs before = {};
  bool tracefsMounted = statfs("/sys/kernel/tracing", &before) == 0 &&
                        before.f_type == TRACEFS_MAGIC;
  VethPair::sweepStale("progtprep");
  VethPair veth("progtprep");
  PinDir pins("progtprep");
  runtime::DaemonOptions options = keptServingOn(veth, pins.path() + "/tracepoint_feeds_xdp");
  std::string tracepointPin = options.optimizer.pinDir + "/link_by_section_count_test_runs";
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  FileDescriptor earlierFinished;
  {
    auto started = runtime::Daemon::start(corpusPath("tracepoint_feeds_xdp.bpf.c"), options,
                                          out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    earlierFinished.reset(dup((*started)->optimizer().mapFd("finished")));
    countOnlyOurTestRuns((*started)->optimizer().mapFd("counted_tgid"));
  }
  for (const char *map : {"/finished", "/counted_tgid"})
    ASSERT_EQ(unlink((options.optimizer.pinDir + map).c_str()), 0) << map;
  options.onExit = runtime::OnExit::Detach;
  printed.clear();
  {
    auto started = runtime::Daemon::start(corpusPath("tracepoint_feeds_xdp.bpf.c"), options,
                                          out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Optimizer &opt = (*started)->optimizer();
    EXPECT_NE(printed.find("program 'count_test_runs' (tracepoint): the link an earlier run "
                           "left at " + tracepointPin + " ran other code or other maps: "
                           "detached, this run's attached"),
              std::string::npos)
        << printed;
    EXPECT_NE(printed.find("program 'count_test_runs' (tracepoint) attached where its section "
                           "says"),
              std::string::npos)
        << printed;
    countOnlyOurTestRuns(opt.mapFd("counted_tgid"));
    uint64_t earlier = testRunsCounted(earlierFinished.get());
    uint64_t ours = testRunsCounted(opt.mapFd("finished"));
    threeTestRuns();
    EXPECT_EQ(testRunsCounted(earlierFinished.get()), earlier) << "the earlier link still runs";
    EXPECT_EQ(testRunsCounted(opt.mapFd("finished")), ours + 3);
  }
  EXPECT_EQ(access(tracepointPin.c_str(), F_OK), -1);
  if (!tracefsMounted)
    umount2("/sys/kernel/tracing", MNT_DETACH);
}

// What `morpheus map dump` prints, `morpheus specialize --snapshot` takes:
// a map whose name is longer than the kernel keeps is dumped under its
// whole name (its pin's), which the program's source declares.
TEST(ProgramKinds, MapDumpIsASnapshotSpecializeTakes) {
  PinDir pins("dumpnames");
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.pinDir = pins.path() + "/long_map_names";
  CorpusProgram program("long_map_names.bpf.c", options);
  ASSERT_TRUE(program.ok());
  uint32_t source = htonl(0xc0000201), drop = XDP_DROP;
  program.set("blocked_source_addresses", source, drop);
  auto shell = [](const std::string &command, std::string &said) {
    FILE *pipe = popen((command + " 2>&1").c_str(), "r");
    char buffer[4096];
    while (size_t got = fread(buffer, 1, sizeof(buffer), pipe))
      said.append(buffer, got);
    return WEXITSTATUS(pclose(pipe));
  };
  std::string scratch = "/tmp/morpheus-dumpnames-" + std::to_string(getpid());
  std::string snapshot = scratch + ".json";
  std::string dumped;
  ASSERT_EQ(shell(binPath("morpheus") + " map dump " + options.pinDir +
                      "/blocked_source_addresses > " + snapshot,
                  dumped),
            0)
      << dumped;
  std::ifstream file(snapshot);
  nlohmann::json document = nlohmann::json::parse(file, nullptr, false);
  ASSERT_TRUE(document.contains("maps")) << document.dump();
  EXPECT_TRUE(document["maps"].contains("blocked_source_addresses"))
      << "the whole name, not the kernel's 'blocked_source_' : " << document.dump();
  std::string object = scratch + ".o", said;
  EXPECT_EQ(shell(binPath("morpheus") + " specialize " + corpusPath("long_map_names.bpf.c") +
                      " --snapshot " + snapshot + " -o " + object,
                  said),
            0)
      << said;
  EXPECT_NE(said.find("blocked_source_addresses"), std::string::npos) << said;
  std::remove(snapshot.c_str());
  std::remove(object.c_str());
}

// What a command says, and its exit status.
int shell(const std::string &command, std::string &said) {
  FILE *pipe = popen((command + " 2>&1").c_str(), "r");
  char buffer[4096];
  while (size_t got = fread(buffer, 1, sizeof(buffer), pipe))
    said.append(buffer, got);
  return WEXITSTATUS(pclose(pipe));
}

nlohmann::json readJson(const std::string &path) {
  std::ifstream file(path);
  return nlohmann::json::parse(file, nullptr, false);
}

// The live cycle's log as `specialize --report` words it: per site its
// decision, per root its guard, per folded global its bytes.
nlohmann::json decisionsOf(const core::SpecializationLog &log) {
  nlohmann::json sites = nlohmann::json::array(), guards = nlohmann::json::array(),
                 globals = nlohmann::json::array();
  for (const core::SiteDecision &decision : log.decisions)
    sites.push_back({{"site", decision.site}, {"map", decision.table},
                     {"function", decision.function}, {"location", decision.location},
                     {"pass", decision.pass}, {"applied", decision.applied},
                     {"detail", decision.detail}});
  for (const core::GuardDecision &guard : log.guards) {
    nlohmann::json json = {{"function", guard.function}, {"callback", guard.callback},
                           {"fallback", core::fallbackName(guard.fallback)},
                           {"detail", guard.detail}};
    if (guard.fallback == core::Fallback::TailCall)
      json["slot"] = guard.slot;
    guards.push_back(json);
  }
  for (const core::GlobalCheck &check : log.globalChecks)
    globals.push_back(
        {{"global", check.global}, {"offset", check.offset}, {"bytes", toHex(check.bytes)}});
  return {{"sites", sites}, {"guards", guards}, {"globals", globals}};
}

// `morpheus map dump` of a running program's pin directory is a snapshot
// on which `specialize --guard-version` and `explain` decide what the live
// cycle decided for the same maps: the 256-slot array holding two classes
// inlined (its other slots zero, as the cycle's read by content gives
// them), the callback's threshold lookup inlined under a guard of its own
// (the entry falls back in the program, as the kernel's verifier count
// allows), the .data setting folded with the dumped bytes; a new setting
// dumped again is the one folded.
TEST(ProgramKinds, ADumpOfARunningProgramIsDecidedOfflineAsTheCycleDecided) {
  PinDir pins("parity");
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.pinDir = pins.path() + "/snapshot_parity";
  CorpusProgram program("snapshot_parity.bpf.c", options);
  ASSERT_TRUE(program.ok());
  program.set("class_by_id", uint32_t(7), uint32_t(3));
  program.set("class_by_id", uint32_t(9), uint32_t(1));
  program.set("stale_below", uint32_t(0), uint32_t(64));
  std::string section;
  for (const core::GlobalSlice &slice : program.opt().spec().globals())
    if (slice.global == "drop_class")
      section = slice.sectionTable;
  ASSERT_FALSE(section.empty());

  std::string scratch = "/tmp/morpheus-parity-" + std::to_string(getpid());
  std::string morpheus = binPath("morpheus"), source = corpusPath("snapshot_parity.bpf.c");
  auto offlineMatches = [&](const std::string &folded) {
    core::CycleReport live = program.opt().runCycle(/*force=*/true);
    ASSERT_TRUE(live.installed()) << live.describe();
    nlohmann::json decided = decisionsOf(live.log);
    // What the cycle decided, so that agreeing with it means something.
    auto site = [&](const nlohmann::json &report, const std::string &map) {
      for (const nlohmann::json &one : report["sites"])
        if (one["map"] == map && one["applied"] == true)
          return one["pass"].get<std::string>();
      return std::string("none applied");
    };
    EXPECT_EQ(site(decided, "class_by_id"), "inline-small-table") << decided.dump(1);
    EXPECT_EQ(site(decided, "stale_below"), "constant-key-lookup") << decided.dump(1);
    nlohmann::json callbackGuard;
    for (const nlohmann::json &guard : decided["guards"])
      if (guard["function"] == "count_stale")
        callbackGuard = guard;
    EXPECT_EQ(callbackGuard["fallback"], "in-program") << decided.dump(1);
    nlohmann::json foldedBytes = {{{"global", "drop_class"}, {"offset", 0}, {"bytes", folded}}};
    EXPECT_EQ(decided["globals"], foldedBytes);

    std::string snapshot = scratch + ".json", said;
    ASSERT_EQ(shell(morpheus + " map dump " + options.pinDir + " > " + snapshot, said), 0)
        << said;
    nlohmann::json dump = readJson(snapshot);
    ASSERT_TRUE(dump.contains("maps")) << dump.dump();
    EXPECT_EQ(dump["maps"][section],
              nlohmann::json::parse(R"([{"key": "00 00 00 00", "value": ")" + folded + R"("}])"))
        << "the globals' section under its whole name";
    EXPECT_TRUE(dump["programs"].contains("snapshot_parity")) << dump["programs"].dump();

    std::string report = scratch + ".report.json";
    said.clear();
    ASSERT_EQ(shell(morpheus + " specialize " + source + " --snapshot " + snapshot + " -o " +
                        scratch + ".o --guard-version " + std::to_string(live.version) +
                        " --report " + report,
                    said),
              0)
        << said;
    nlohmann::json offline = readJson(report);
    EXPECT_EQ(offline["sites"], decided["sites"]);
    EXPECT_EQ(offline["guards"], decided["guards"]);
    EXPECT_EQ(offline["globals"], decided["globals"]);
    EXPECT_EQ(offline["inlined"].size(), live.log.inlined.size()) << offline["inlined"].dump();

    std::string explained = scratch + ".explain.json";
    said.clear();
    ASSERT_EQ(shell(morpheus + " explain " + source + " --json --snapshot " + snapshot + " > " +
                        explained,
                    said),
              0)
        << said;
    nlohmann::json explanation = readJson(explained);
    for (const nlohmann::json &map : explanation["maps"])
      if (map["name"] == "class_by_id" || map["name"] == "stale_below")
        for (const nlohmann::json &one : map["sites"])
          EXPECT_EQ(one["action"], "specialized") << one.dump();
    for (const nlohmann::json &guard : explanation["guards"])
      if (guard["function"] == "count_stale")
        EXPECT_EQ(guard["fallback"], "in-program") << guard.dump();
    bool foldedSaid = false;
    for (const nlohmann::json &global : explanation["globals"])
      if (global["name"] == "drop_class")
        foldedSaid = global.contains("this_cycle") && global["this_cycle"]["applied"] == true;
    EXPECT_TRUE(foldedSaid) << explanation["globals"].dump();
    for (const std::string &file : {snapshot, report, explained, scratch + ".o"})
      std::remove(file.c_str());
  };
  offlineMatches("03 00 00 00");
  // A new setting through the section's pin, as an operator writes it.
  std::string said;
  std::string sectionPin = section; // bpffs takes no '.' in a name
  std::replace(sectionPin.begin(), sectionPin.end(), '.', '_');
  ASSERT_EQ(shell(morpheus + " map update " + options.pinDir + "/" + sectionPin +
                      " 00000000 05000000",
                  said),
            0)
      << said;
  offlineMatches("05 00 00 00");
}

// A map its loader sizes before load (declared with one entry): sized by
// --max-entries, the kernel creates it with 64, Morpheus specializes for
// 64 (a DSCP beyond the declared entry keeps its verdict), and a name the
// program does not declare is refused.
TEST(ProgramKinds, MaxEntriesSizesAMapAsItsLoaderDoes) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.maxEntries = {{"verdict_by_dscp", 64}};
  CorpusProgram sized("loader_sized.bpf.c", options);
  ASSERT_TRUE(sized.ok());
  EXPECT_EQ(sized.opt().spec().catalog().at("verdict_by_dscp").maxEntries, 64u);
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  ASSERT_EQ(bpf_obj_get_info_by_fd(sized.opt().mapFd("verdict_by_dscp"), &info, &length), 0);
  EXPECT_EQ(info.max_entries, 64u) << "created as its loader creates it";
  sized.set("verdict_by_dscp", uint32_t(10), uint32_t(XDP_DROP));
  ASSERT_TRUE(sized.cycle().installed());
  EXPECT_NE(sized.opt().activeFd(), sized.opt().originalFd());
  Bytes marked = buildPacket({.tos = 10 << 2}), plain = buildPacket({});
  EXPECT_EQ(sized.active(marked).verdict, uint32_t(XDP_DROP)) << "DSCP 10, entry 10 of 64";
  EXPECT_EQ(sized.original(marked).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(sized.active(plain).verdict, uint32_t(XDP_PASS));

  runtime::OptimizerOptions unknown = CorpusProgram::noShadow();
  unknown.frontend.maxEntries = {{"no_such_map", 8}};
  auto refused = runtime::Optimizer::create(corpusPath("loader_sized.bpf.c"), unknown);
  ASSERT_FALSE(bool(refused));
  std::string message = llvm::toString(refused.takeError());
  EXPECT_NE(message.find("--max-entries no_such_map=8: the program declares no map "
                         "'no_such_map'"),
            std::string::npos)
      << message;
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
  std::optional<core::CycleReport> cycle =
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
  runtime::DaemonOptions options = keptServingOn(veth, pins.path() + "/policy_fwd");
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
    std::optional<core::CycleReport> cycle =
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

// What the last line of a run that keeps serving says stays behind is
// checked, not assumed: a guard pin removed is named; with the bpffs under
// the pin directory unmounted, the links (held then by the process alone)
// detach as it exits, and the line says so before it happens.
TEST(ProgramKinds, ExitSaysWhatIsStillPinned) {
  VethPair::sweepStale("progpins");
  VethPair veth("progpins");
  PinDir pins("progpins");
  std::string mount = pins.path() + "/mnt";
  ASSERT_EQ(mkdir(mount.c_str(), 0700), 0) << strerror(errno);
  ASSERT_EQ(::mount("bpf", mount.c_str(), "bpf", 0, nullptr), 0) << strerror(errno);
  struct Unmount {
    std::string path;
    bool mounted = true;
    void now() {
      if (std::exchange(mounted, false))
        umount2(path.c_str(), MNT_DETACH);
    }
    ~Unmount() { now(); }
  } unmount{mount};
  runtime::DaemonOptions options = keptServingOn(veth, mount + "/policy_fwd");
  const std::string &dir = options.optimizer.pinDir;
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto xdpAttached = [&] {
    std::string show = "ip -n " + veth.nsB() + " link show " + veth.ifB() + " | grep -q xdp";
    return std::system(show.c_str()) == 0;
  };
  {
    auto started =
        runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Daemon &daemon = **started;
    std::optional<core::CycleReport> cycle =
        daemon.step(runtime::Daemon::Clock::now() + std::chrono::hours(1));
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    EXPECT_EQ(daemon.exitNote().text, "stopping: the original program stays attached (links, "
                                      "maps and guard pinned in " + dir + ")\n");

    // A link pin is no map: 'morpheus map' says what it holds.
    std::string linkPin = dir + "/link_xdp_" + veth.ifB();
    auto running = bpf::liveProgram(daemon.optimizer().activeFd());
    ASSERT_THAT_EXPECTED(running, llvm::Succeeded());
    std::string program = running->name;
    for (const std::string &verb : {"update", "dump"}) {
      std::string command = binPath("morpheus") + " map " + verb + " " + linkPin +
                            (verb == "update" ? " 00000000 00000000" : "") + " 2>&1";
      std::string said;
      FILE *pipe = popen(command.c_str(), "r");
      char buffer[4096];
      while (size_t got = fread(buffer, 1, sizeof(buffer), pipe))
        said.append(buffer, got);
      EXPECT_EQ(WEXITSTATUS(pclose(pipe)), 1) << said;
      EXPECT_EQ(said, "morpheus: map '" + linkPin + "': a pinned link, attaching program '" +
                          program + "' (id " +
                          std::to_string(programIdOf(daemon.optimizer().activeFd())) +
                          "), not a map ('morpheus map' changes the maps a run pins beside "
                          "it)\n");
    }

    ASSERT_EQ(unlink((dir + "/morpheus_guard").c_str()), 0);
    EXPECT_EQ(daemon.exitNote().text,
              "stopping: the original program stays attached; no longer pinned in " + dir +
                  " (no control plane reaches them there): the guard\n");

    unmount.now();
    runtime::Daemon::ExitNote note = daemon.exitNote();
    EXPECT_EQ(note.text, "stopping: the program detaches from " + veth.ifB() +
                             " as this process exits: its link pin in " + dir +
                             " is gone (removed, or the bpffs under it unmounted); no longer "
                             "pinned in " + dir + " (no control plane reaches them there): "
                             "map 'config', map 'policy', map 'stats', the guard\n");
    EXPECT_EQ(note.fields["links_unpinned"], nlohmann::json({veth.ifB()}));
    EXPECT_TRUE(xdpAttached()) << "attached while the process runs";
  }
  EXPECT_TRUE(waitFor([&] { return !xdpAttached(); }, 2000ms))
      << "the note said the program detaches at exit";
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
  unlink((socket + ".lock").c_str());
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
  runtime::DaemonOptions options = keptServingOn(veth, pins.path() + "/policy_fwd");
  options.ifaces = {veth.ifB(), "mphnosuchif"};
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
