// Adopting a program another loader attached (bpf::Adoption, `morpheus run
// --adopt`). The owner here is a small libbpf loader in the test itself: it
// loads examples/policy_fwd.bpf.c (XDP) or tests/programs/tc_classifier.bpf.c
// (TC), compiled by the build and embedded, fills its maps and attaches it
// (netlink, a pinned XDP link, or a pinned tcx link) before Morpheus is
// started. What must hold: the specialized version serves through the
// trampoline and answers every packet as the owner's program does; the
// owner's own map updates are followed (the guard bumped first), a map the
// owner changes every cycle is not inlined, maps kept generic by policy
// make the owner's write hold from the very next packet; a clean exit
// gives the hook back to the owner's program; kill -9 leaves the owner's
// program serving; a restart re-adopts; a source whose maps do not fit is
// refused naming the map and the field; an owner that moves on makes
// Morpheus exit untouched;
// a chain of tail calls that can reach the kernel's limit, which the
// trampoline's tail call would cut by one stage, is not adopted unless the
// operator accepts it, and then the log says so; one the owner makes later
// gets the owner its hook back.
#include "AdoptionOwners.h"
#include "Corpus.h"
#include "backend/bpf/Adoption.h"

#include <linux/pkt_cls.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/ScopeExit.h>
#include <signal.h>

#include <fstream>

extern "C" const unsigned char loader_constants_owner_start[], loader_constants_owner_end[];
extern "C" const unsigned char staged_policy_owner_start[], staged_policy_owner_end[];

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

// Each test's scene: a veth pair and a pin directory named `tag` (what a
// killed run of the same test left is swept first), the owner's program
// loaded and configured; each test attaches it its own way.
struct Scene {
  explicit Scene(std::string_view tag, Loader loader = Loader::Libbpf)
      : veth(sweptFirst(tag)), pins(std::string(tag)), owner(loader) {}
  VethPair veth;
  PinDir pins;
  Owner owner;
};

TEST(Adoption, SpecializedVersionServesFollowsTheOwnerAndGivesTheHookBack) {
  Scene scene("adoptnl");
  auto &[veth, pins, owner] = scene;
  ASSERT_GE(owner.program, 0);
  owner.attachNetlink(veth);
  uint32_t ownerId = programIdOf(owner.program);
  ASSERT_EQ(hookProgram(veth), ownerId);

  runtime::DaemonOptions options = adoptOptions(veth, pins);
  std::string ownerPin = options.optimizer.pinDir + "/owner_program";
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto now = runtime::Daemon::Clock::now();
  {
    auto started =
        runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Daemon &daemon = **started;
    uint32_t trampoline = hookProgram(veth);
    EXPECT_NE(trampoline, ownerId) << "the hook runs the trampoline";
    EXPECT_EQ(access(ownerPin.c_str(), F_OK), 0);
    EXPECT_EQ(servedThrough(trampoline, ownerPin), 0u);
    expectServesAsTheOwner(trampoline, owner.program, "before the first install");
    std::vector<std::string> guarantees = daemon.updateGuarantees();
    auto policy = llvm::find_if(guarantees, [](const std::string &line) {
      return line.find("'policy'") != std::string::npos;
    });
    ASSERT_NE(policy, guarantees.end()) << "a guarantee for the map 'policy'";
    EXPECT_NE(policy->find("polled"), std::string::npos) << *policy;

    std::optional<core::CycleReport> cycle = daemon.step(now += 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    EXPECT_EQ(servedThrough(trampoline, ownerPin), programIdOf(daemon.optimizer().activeFd()));
    expectServesAsTheOwner(trampoline, owner.program, "specialized");
    expectSpecializedServes(trampoline, owner.program, ownerPin);

    // The owner changes its policy behind Morpheus's back: the next cycle
    // bumps the guard before rebuilding, and the new version follows.
    uint64_t version = daemon.optimizer().guard().version();
    owner.policy(0x0a000001, 80, ACTION_TX);
    cycle = daemon.step(now += 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << cycle->describe() << printed << problems;
    EXPECT_GT(daemon.optimizer().guard().version(), version) << "the change bumped the guard";
    EXPECT_EQ(runOnce(owner.program, samplePackets()[0]).verdict, uint32_t(XDP_TX));
    expectServesAsTheOwner(trampoline, owner.program, "after the owner's update");
    expectSpecializedServes(trampoline, owner.program, ownerPin);

    // A map the owner changes in most cycles is left to the generic code.
    for (unsigned i = 0; i < runtime::Optimizer::UnstableWindow; ++i) {
      owner.config(CFG_POLICY_ENABLED, i % 2 ? ACTION_PASS : ACTION_DROP);
      cycle = daemon.step(now += 1h);
      ASSERT_TRUE(cycle) << printed << problems;
    }
    EXPECT_EQ(daemon.optimizer().unstableTables(), std::set<std::string>{"config"});
    cycle = daemon.step(now += 1h);
    expectServesAsTheOwner(trampoline, owner.program, "config unstable");
    expectSpecializedServes(trampoline, owner.program, ownerPin);
  }
  EXPECT_EQ(hookProgram(veth), ownerId) << "a clean exit gives the hook back\n" << problems;
  EXPECT_NE(access(ownerPin.c_str(), F_OK), 0) << "the owner array's pin is removed";
}

// An owner's write behind Morpheus's back: a deny rule its own CLI adds
// with bpf_map_update_elem. Run here right after the write, with no cycle
// in between (BPF_PROG_TEST_RUN on the hook, through the trampoline and the
// installed version). Kept generic (--other-writers keep-generic), the
// version never read the map: the very next packet is denied, and the
// next cycle has nothing to follow. Polled (the default), the version
// answers from what its cycle read until the next cycle compares, bumps
// the guard and rebuilds, as cli.md and equivalence.md say: up to a
// period plus a cycle late.
void ownerWriteSeen(std::string_view tag, bool keptGeneric) {
  SCOPED_TRACE(keptGeneric ? "kept generic" : "polled");
  Scene scene(tag);
  auto &[veth, pins, owner] = scene;
  ASSERT_GE(owner.program, 0);
  owner.attachNetlink(veth);
  runtime::DaemonOptions options = adoptOptions(veth, pins);
  options.optimizer.keptGeneric.everyMap = keptGeneric;
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto now = runtime::Daemon::Clock::now();
  auto started =
      runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
  ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
  runtime::Daemon &daemon = **started;
  uint32_t trampoline = hookProgram(veth);
  std::vector<std::string> guarantees = daemon.updateGuarantees();
  auto policyLine = llvm::find_if(guarantees, [](const std::string &line) {
    return line.find("'policy'") != std::string::npos;
  });
  ASSERT_NE(policyLine, guarantees.end());
  EXPECT_EQ(policyLine->find(core::KeptGenericReason) != std::string::npos, keptGeneric)
      << *policyLine;

  std::optional<core::CycleReport> cycle = daemon.step(now += 1h);
  ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
  std::string decisions = cycle->log.toText();
  EXPECT_EQ(decisions.find(core::KeptGenericReason) != std::string::npos, keptGeneric) << decisions;
  uint32_t version = programIdOf(daemon.optimizer().activeFd());
  ASSERT_EQ(servedThrough(trampoline, options.optimizer.pinDir + "/owner_program"), version)
      << "the installed version answers";
  EXPECT_EQ(daemon.optimizer().installedServesUnattended(), keptGeneric)
      << "kept generic, the version read no map";
  Fd hook(bpf_prog_get_fd_by_id(trampoline));
  PacketSpec toDeny;
  toDeny.daddr = 0x0a000002;
  Bytes packet = buildPacket(toDeny);
  ASSERT_EQ(runOnce(hook.fd, packet).verdict, uint32_t(XDP_PASS)) << "no rule yet";

  uint64_t guardBefore = daemon.optimizer().guard().version();
  owner.policy(0x0a000002, 80, ACTION_DROP);
  EXPECT_EQ(runOnce(owner.program, packet).verdict, uint32_t(XDP_DROP)) << "the owner's own";
  EXPECT_EQ(runOnce(hook.fd, packet).verdict, uint32_t(keptGeneric ? XDP_DROP : XDP_PASS))
      << (keptGeneric ? "the very next packet is denied"
                      : "polled: the version answers from what its cycle read");
  EXPECT_EQ(daemon.optimizer().guard().version(), guardBefore) << "nobody bumped the guard";

  cycle = daemon.step(now += 1h);
  ASSERT_TRUE(cycle) << printed << problems;
  EXPECT_EQ(runOnce(hook.fd, packet).verdict, uint32_t(XDP_DROP)) << "after the next cycle";
  if (keptGeneric) {
    EXPECT_EQ(cycle->outcome, core::CycleOutcome::Unchanged) << cycle->describe();
    EXPECT_EQ(daemon.optimizer().guard().version(), guardBefore);
  } else {
    EXPECT_TRUE(cycle->installed()) << cycle->describe();
    EXPECT_GT(daemon.optimizer().guard().version(), guardBefore) << "the poll bumped the guard";
  }
  expectServesAsTheOwner(trampoline, owner.program, "after the owner's write");
}

TEST(Adoption, AnOwnersWriteHoldsFromTheNextPacketWhenItsMapsAreKeptGeneric) {
  ownerWriteSeen("adoptkeep", /*keptGeneric=*/true);
}

TEST(Adoption, AnOwnersWriteIsFollowedAtTheNextCycleWhenItsMapsArePolled) {
  ownerWriteSeen("adoptpoll", /*keptGeneric=*/false);
}

// An owner loaded without an expected attach type (a raw loader): the
// trampoline and every version Morpheus loads take the owner's (none), or
// the program arrays between them would refuse the versions.
TEST(Adoption, AnOwnerLoadedWithoutAnAttachTypeIsServedByVersionsOfItsKind) {
  Scene scene("adoptraw", Loader::Raw);
  auto &[veth, pins, owner] = scene;
  ASSERT_GE(owner.program, 0);
  owner.attachNetlink(veth);
  uint32_t ownerId = programIdOf(owner.program);
  runtime::DaemonOptions options = adoptOptions(veth, pins);
  std::string ownerPin = options.optimizer.pinDir + "/owner_program";
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  {
    auto started =
        runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Daemon &daemon = **started;
    uint32_t trampoline = hookProgram(veth);
    EXPECT_NE(trampoline, ownerId);
    std::optional<core::CycleReport> cycle =
        daemon.step(runtime::Daemon::Clock::now() + 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << (cycle ? cycle->describe() : "") << printed
                                             << problems;
    EXPECT_EQ(servedThrough(trampoline, ownerPin), programIdOf(daemon.optimizer().activeFd()));
    expectServesAsTheOwner(trampoline, owner.program, "specialized");
    expectSpecializedServes(trampoline, owner.program, ownerPin);
  }
  EXPECT_EQ(hookProgram(veth), ownerId) << "a clean exit gives the hook back\n" << problems;
}

// An owner whose loader set .rodata constants before load (a port to
// drop, the verdict otherwise: XDP_TX instead of the source's XDP_PASS):
// the live bytes are the truth, so the original and the versions are built
// with them and answer as the owner's program.
TEST(Adoption, ConstantsTheOwnersLoaderSetAreWhatTheVersionsComputeWith) {
  std::string tag = std::string(sweptFirst("adoptrodata"));
  VethPair veth(tag);
  PinDir pins(tag);
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "const_owner");
  bpf_object *obj = bpf_object__open_mem(
      loader_constants_owner_start, loader_constants_owner_end - loader_constants_owner_start,
      &opts);
  ASSERT_TRUE(obj);
  auto closeObject = llvm::make_scope_exit([&] { bpf_object__close(obj); });
  bpf_map *map;
  bool set = false;
  bpf_object__for_each_map(map, obj) {
    if (!llvm::StringRef(bpf_map__name(map)).ends_with(".rodata"))
      continue;
    struct Constants {
      uint16_t blockedPort;
      uint16_t pad;
      uint32_t verdictOtherwise;
    } constants = {80, 0, XDP_TX};
    size_t size = 0;
    bpf_map__initial_value(map, &size);
    ASSERT_EQ(size, sizeof(Constants));
    ASSERT_EQ(bpf_map__set_initial_value(map, &constants, sizeof(constants)), 0);
    set = true;
  }
  ASSERT_TRUE(set) << "the owner's object has a .rodata";
  ASSERT_EQ(bpf_object__load(obj), 0);
  int program = bpf_program__fd(bpf_object__find_program_by_name(obj, "loader_constants"));
  struct {
    uint32_t enabled, ttlFloor;
  } settings = {1, 10};
  uint32_t zero = 0;
  ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(obj, "settings")), &zero,
                                &settings, BPF_ANY),
            0);
  NetlinkAttachment attached(veth, program);
  PacketSpec blocked;
  blocked.dport = 80;
  ASSERT_EQ(runOnce(program, buildPacket(blocked)).verdict, uint32_t(XDP_DROP))
      << "the loader's port is what the owner's program drops";
  ASSERT_EQ(runOnce(program, samplePackets()[2]).verdict, uint32_t(XDP_TX))
      << "the loader's verdict is what it answers otherwise";

  runtime::DaemonOptions options = adoptOptions(veth, pins);
  std::string ownerPin = options.optimizer.pinDir + "/owner_program";
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  {
    auto started = runtime::Daemon::start(sourcePath("tests/kernel/loader_constants.bpf.c"),
                                          options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Daemon &daemon = **started;
    uint32_t trampoline = hookProgram(veth);
    EXPECT_NE(trampoline, programIdOf(program));
    EXPECT_EQ(runOnce(daemon.optimizer().originalFd(), buildPacket(blocked)).verdict,
              uint32_t(XDP_DROP))
        << "the original is built with the owner's constants";
    std::optional<core::CycleReport> cycle =
        daemon.step(runtime::Daemon::Clock::now() + 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    EXPECT_EQ(servedThrough(trampoline, ownerPin), programIdOf(daemon.optimizer().activeFd()));
    std::vector<Bytes> packets = samplePackets();
    for (uint8_t ttl : {5, 64}) {
      PacketSpec spec = blocked;
      spec.ttl = ttl;
      packets.push_back(buildPacket(spec));
    }
    Fd hook(bpf_prog_get_fd_by_id(trampoline));
    auto answersAsTheOwner = [&](const std::string &when) {
      for (const Bytes &packet : packets)
        EXPECT_EQ(runOnce(hook.fd, packet), runOnce(program, packet))
            << when << ": packet of " << packet.size() << " bytes";
    };
    answersAsTheOwner("specialized");
    Fd owner(bpf_obj_get(ownerPin.c_str()));
    uint32_t slot = 0;
    ASSERT_EQ(bpf_map_delete_elem(owner.fd, &slot), 0);
    answersAsTheOwner("specialized version alone");
    ASSERT_EQ(bpf_map_update_elem(owner.fd, &slot, &program, BPF_ANY), 0);
  }
  EXPECT_EQ(hookProgram(veth), programIdOf(program)) << problems;
}

// An owner whose entry tail-calls stages (tests/programs/staged_policy.bpf.c,
// built by the build as its owner would and loaded by plain libbpf, which
// fills the stage array): the stages it loaded run the source's code on
// the shared maps, so each version gets a stage array of its own with its
// specialized stages and the owner's array keeps the owner's programs. A
// stage the owner replaces with a program of its own is no longer ours:
// the guard is bumped and the next version tail-calls the owner's array.
TEST(Adoption, StagesTheOwnerLoadedFromTheSourceAreSpecializedAndAReplacedStageIsTheOwners) {
  std::string tag = std::string(sweptFirst("adoptstages"));
  VethPair veth(tag);
  PinDir pins(tag);
  LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "staged_owner");
  bpf_object *obj = bpf_object__open_mem(
      staged_policy_owner_start, staged_policy_owner_end - staged_policy_owner_start, &opts);
  ASSERT_TRUE(obj);
  auto closeObject = llvm::make_scope_exit([&] { bpf_object__close(obj); });
  ASSERT_EQ(bpf_object__load(obj), 0);
  auto programFd = [&](const char *name) {
    return bpf_program__fd(bpf_object__find_program_by_name(obj, name));
  };
  auto mapFd = [&](const char *name) {
    return bpf_map__fd(bpf_object__find_map_by_name(obj, name));
  };
  int entry = programFd("staged_entry");
  uint32_t dropped = htonl(0x0a000001), verdict = XDP_DROP, zero = 0;
  ASSERT_EQ(bpf_map_update_elem(mapFd("udp_policy"), &dropped, &verdict, BPF_ANY), 0);
  struct {
    uint16_t blockedPort, pad;
    uint32_t verdict;
  } rule = {22, 0, XDP_DROP};
  ASSERT_EQ(bpf_map_update_elem(mapFd("tcp_config"), &zero, &rule, BPF_ANY), 0);
  NetlinkAttachment attached(veth, entry);
  std::vector<Bytes> packets;
  for (uint32_t daddr : {0x0a000001u, 0x0a000002u})
    for (uint8_t protocol : {IPPROTO_UDP, IPPROTO_TCP, IPPROTO_ICMP})
      for (uint16_t dport : {22, 80})
        packets.push_back(buildPacket({.protocol = protocol, .daddr = daddr, .dport = dport}));
  ASSERT_EQ(runOnce(entry, packets[0]).verdict, uint32_t(XDP_DROP)) << "UDP to 10.0.0.1";
  ASSERT_EQ(runOnce(entry, packets[2]).verdict, uint32_t(XDP_DROP)) << "TCP to port 22";

  runtime::DaemonOptions options = adoptOptions(veth, pins);
  options.optimizer.program = "staged_entry";
  std::string ownerPin = options.optimizer.pinDir + "/owner_program";
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  {
    auto started = runtime::Daemon::start(sourcePath("tests/programs/staged_policy.bpf.c"),
                                          options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Daemon &daemon = **started;
    runtime::Optimizer &optimizer = daemon.optimizer();
    uint32_t trampoline = hookProgram(veth);
    Fd hook(bpf_prog_get_fd_by_id(trampoline));
    auto answersAsTheOwner = [&](const std::string &when) {
      for (const Bytes &packet : packets)
        EXPECT_EQ(runOnce(hook.fd, packet), runOnce(entry, packet))
            << when << ": packet " << (&packet - packets.data());
    };
    auto now = runtime::Daemon::Clock::now();
    std::optional<core::CycleReport> cycle = daemon.step(now += 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    ASSERT_EQ(servedThrough(trampoline, ownerPin), programIdOf(optimizer.activeFd()));

    uint32_t guard = mapIdOf(optimizer.mapFd(bpf::GuardMapName));
    uint32_t ownerStages = mapIdOf(mapFd("stages"));
    std::map<std::string, HeldProgram> owners = programsHeld(mapFd("stages"), guard);
    ASSERT_EQ(owners.size(), 2u);
    EXPECT_EQ(owners["udp_stage"].id, programIdOf(programFd("udp_stage")));
    EXPECT_EQ(owners["tcp_stage"].id, programIdOf(programFd("tcp_stage")));
    uint32_t used = mapIdByName(optimizer.activeFd(), "stages");
    ASSERT_NE(used, 0u);
    EXPECT_NE(used, ownerStages) << "the version has a stage array of its own";
    std::map<std::string, HeldProgram> versions =
        programsHeld(Fd(bpf_map_get_fd_by_id(used)).fd, guard);
    ASSERT_EQ(versions.size(), 2u);
    for (const auto &[name, stage] : versions) {
      EXPECT_NE(stage.id, owners[name].id) << name << ": the specialized stage";
      EXPECT_TRUE(stage.checksTheGuard) << name;
      EXPECT_FALSE(owners[name].checksTheGuard) << name;
    }
    answersAsTheOwner("specialized stages");
    EXPECT_NE(printed.find("tail calls: at most 1 in a row (staged_entry -> "), std::string::npos)
        << "the chain's length, which the trampoline's tail call leaves below the limit\n"
        << printed;
    Fd ownerArray(bpf_obj_get(ownerPin.c_str()));
    ASSERT_EQ(bpf_map_delete_elem(ownerArray.fd, &zero), 0);
    answersAsTheOwner("specialized version alone");
    ASSERT_EQ(bpf_map_update_elem(ownerArray.fd, &zero, &entry, BPF_ANY), 0);

    // The owner replaces its TCP stage with a program of its own (drop
    // everything): not the source's code, so the stage is the owner's.
    bpf_insn dropAll[] = {
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = XDP_DROP},
        {.code = BPF_JMP | BPF_EXIT},
    };
    LIBBPF_OPTS(bpf_prog_load_opts, load, .expected_attach_type = BPF_XDP);
    Fd replacement(bpf_prog_load(BPF_PROG_TYPE_XDP, "owner_tcp", "GPL", dropAll, 2, &load));
    ASSERT_GE(replacement.fd, 0) << strerror(errno);
    uint32_t tcpSlot = 1;
    ASSERT_EQ(bpf_map_update_elem(mapFd("stages"), &tcpSlot, &replacement.fd, BPF_ANY), 0);
    ASSERT_EQ(runOnce(entry, packets[3]).verdict, uint32_t(XDP_DROP)) << "TCP to port 80";
    uint64_t version = optimizer.guard().version();
    cycle = daemon.step(now += 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << cycle->describe() << printed << problems;
    EXPECT_GT(optimizer.guard().version(), version) << "the replaced stage bumped the guard";
    EXPECT_EQ(mapIdByName(optimizer.activeFd(), "stages"), ownerStages)
        << "a stage array holding a program of the owner's is the owner's";
    answersAsTheOwner("after the owner replaced a stage");
  }
  EXPECT_EQ(hookProgram(veth), programIdOf(entry)) << problems;
}


// Adopted, the trampoline's tail call would be one of the chain's 33:
// refused, the hook untouched; accepted, the log says the last stage does
// not run, and it does not (what the hook answers counts one stage fewer).
TEST(Adoption, AChainThatCanReachTheTailCallLimitIsNotAdoptedUnlessAcceptedAndThenSaid) {
  std::string tag = std::string(sweptFirst("adoptchain"));
  VethPair veth(tag);
  PinDir pins(tag);
  ChainOwner owner(veth);
  ASSERT_GE(owner.entry, 0);
  owner.closeTheChain();
  ASSERT_EQ(ChainOwner::stagesRun(owner.entry), 34)
      << "premise: the entry and 33 tail calls, the kernel's limit";

  runtime::DaemonOptions options = adoptOptions(veth, pins);
  std::string ownerPin = options.optimizer.pinDir + "/owner_program";
  std::string source = sourcePath("tests/programs/tail_call_chain.bpf.c");
  {
    std::string printed, problems;
    llvm::raw_string_ostream out(printed), errors(problems);
    auto started = runtime::Daemon::start(source, options, out, errors);
    ASSERT_FALSE(bool(started)) << "adopted silently";
    std::string message = llvm::toString(started.takeError());
    EXPECT_NE(message.find("not adopted: program 'chain_entry' can make as many tail calls in "
                           "a row as the kernel allows (33): chain_entry -> chain_stage -> "
                           "chain_stage (a cycle)"),
              std::string::npos)
        << message;
  }
  EXPECT_EQ(hookProgram(veth), programIdOf(owner.entry)) << "refused: the hook is untouched";
  EXPECT_NE(access(ownerPin.c_str(), F_OK), 0) << "refused: nothing pinned";
  EXPECT_EQ(ChainOwner::stagesRun(owner.entry), 34);

  options.acceptOneTailCallFewer = true;
  {
    std::string printed, problems;
    llvm::raw_string_ostream out(printed), errors(problems);
    auto started = runtime::Daemon::start(source, options, out, errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    EXPECT_NE(printed.find("adopted although program 'chain_entry' can make as many tail calls "
                           "in a row as the kernel allows (33)"),
              std::string::npos)
        << printed;
    EXPECT_NE(printed.find("the last stage of such a chain does not run"), std::string::npos)
        << printed;
    uint32_t trampoline = hookProgram(veth);
    ASSERT_NE(trampoline, programIdOf(owner.entry));
    Fd hook(bpf_prog_get_fd_by_id(trampoline));
    EXPECT_EQ(ChainOwner::stagesRun(hook.fd), 33) << "as the log says: one stage fewer";
    std::optional<core::CycleReport> cycle =
        (*started)->step(runtime::Daemon::Clock::now() + 1h);
    EXPECT_TRUE(cycle) << "accepted: it keeps running\n" << printed << problems;
    EXPECT_FALSE((*started)->ownerMovedOn());
  }
  EXPECT_EQ(hookProgram(veth), programIdOf(owner.entry)) << "a clean exit gives the hook back";
  EXPECT_EQ(ChainOwner::stagesRun(owner.entry), 34);
}

// The chain closed only after the adoption (its array empty then: no tail
// call succeeds): the next period sees it, gives the hook back to the
// owner's program and stops, saying why; the chain runs whole again.
TEST(Adoption, AnOwnerWhoseArraysComeToHoldAChainAtTheLimitGetsItsHookBack) {
  std::string tag = std::string(sweptFirst("adoptlater"));
  VethPair veth(tag);
  PinDir pins(tag);
  ChainOwner owner(veth);
  ASSERT_GE(owner.entry, 0);
  ASSERT_EQ(ChainOwner::stagesRun(owner.entry), 1) << "premise: no stage behind the entry";
  runtime::DaemonOptions options = adoptOptions(veth, pins);
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto started = runtime::Daemon::start(sourcePath("tests/programs/tail_call_chain.bpf.c"),
                                        options, out, errors);
  ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
  runtime::Daemon &daemon = **started;
  uint32_t trampoline = hookProgram(veth);
  ASSERT_NE(trampoline, programIdOf(owner.entry));
  auto now = runtime::Daemon::Clock::now();
  std::optional<core::CycleReport> cycle = daemon.step(now += 1h);
  ASSERT_TRUE(cycle) << printed << problems;

  owner.closeTheChain();
  EXPECT_EQ(ChainOwner::stagesRun(Fd(bpf_prog_get_fd_by_id(trampoline)).fd), 33)
      << "premise: through the trampoline the chain now loses a stage";
  cycle = daemon.step(now += 1h);
  EXPECT_FALSE(cycle) << "no cycle once the chain can reach the limit";
  EXPECT_TRUE(daemon.ownerMovedOn()) << "the daemon stops";
  EXPECT_NE(printed.find("the owner's program arrays changed: program 'chain_entry' can make "
                         "as many tail calls in a row as the kernel allows (33)"),
            std::string::npos)
      << printed;
  EXPECT_EQ(hookProgram(veth), programIdOf(owner.entry)) << "the hook is the owner's again";
  EXPECT_EQ(ChainOwner::stagesRun(owner.entry), 34);
}

TEST(Adoption, AMapThatDoesNotFitIsRefusedByNameAndFieldAndNothingIsTouched) {
  Scene scene("adoptbad");
  auto &[veth, pins, owner] = scene;
  ASSERT_GE(owner.program, 0);
  owner.attachNetlink(veth);
  std::string source = "/tmp/morpheus-adopt-mismatch-" + std::to_string(getpid()) + ".bpf.c";
  {
    std::ofstream file(source);
    file << "#define POLICY_MAX_ENTRIES 512\n#include \""
         << sourcePath("examples/policy_fwd.bpf.c") << "\"\n";
  }
  runtime::DaemonOptions options = adoptOptions(veth, pins);
  std::string printed;
  llvm::raw_string_ostream out(printed);
  auto started = runtime::Daemon::start(source, options, out, out);
  unlink(source.c_str());
  ASSERT_FALSE(bool(started));
  std::string message = llvm::toString(started.takeError());
  EXPECT_NE(message.find("map 'policy'"), std::string::npos) << message;
  EXPECT_NE(message.find("max_entries: declared 512, the map has 1024"), std::string::npos)
      << message;
  EXPECT_EQ(hookProgram(veth), programIdOf(owner.program)) << "the hook was not touched";
  EXPECT_NE(access((options.optimizer.pinDir + "/owner_program").c_str(), F_OK), 0);
}

// An owner's program attached through a link pinned at `linkPin`, and what
// the process test does with it.
struct PinnedOwner {
  std::string source; // PROG.c
  std::string target; // --adopt TARGET
  std::string linkPin;
  int linkFd = -1, program = -1;
  ServesAsTheOwner servesAsTheOwner;
  int upgrade = -1; // another program of the owner's type, its next version
};

// `morpheus run --adopt TARGET` as a process: kill -9 leaves the owner's
// program serving, a restart adopts again, SIGTERM gives the link back; an
// owner replacing its program makes Morpheus exit untouched.
void killRestartAndMoveOn(const std::string &tag, const PinDir &pins, const PinnedOwner &owner) {
  uint32_t ownerId = programIdOf(owner.program);
  std::string pinDir = pins.path() + "/adopt";
  std::string ownerPin = pinDir + "/owner_program";
  std::string socket = "/tmp/morpheus-test-" + tag + "-" + std::to_string(getpid()) + ".sock";
  auto runArgs = [&] {
    return std::vector<std::string>{binPath("morpheus"), "run",     owner.source, "--adopt",
                                    owner.target,        "--pin-dir", pinDir,     "--period",
                                    "100ms",             "--socket", socket};
  };
  auto linkProgram = [&] {
    bpf_link_info info = {};
    uint32_t length = sizeof(info);
    return bpf_obj_get_info_by_fd(owner.linkFd, &info, &length) ? 0u : info.prog_id;
  };
  uint32_t trampoline = 0;
  {
    ChildProcess run(tag, runArgs());
    ASSERT_TRUE(waitFor([&] {
      trampoline = linkProgram();
      return !run.alive() || (trampoline != ownerId && servedThrough(trampoline, ownerPin) != 0);
    }, 30s) && run.alive()) << run.log();
    owner.servesAsTheOwner(trampoline, "adopted");
    expectSpecializedServes(owner.servesAsTheOwner, trampoline, owner.program, ownerPin);
    kill(run.pid(), SIGKILL);
    EXPECT_FALSE(run.wait(10s)) << "killed, not exited";
  }
  unlink(socket.c_str());
  EXPECT_EQ(linkProgram(), trampoline) << "the link still runs the trampoline";
  EXPECT_TRUE(waitFor([&] { return servedThrough(trampoline, ownerPin) == 0; }, 5s))
      << "the kernel emptied the Morpheus array";
  owner.servesAsTheOwner(trampoline, "after kill -9");

  {
    ChildProcess run(tag + "-again", runArgs());
    ASSERT_TRUE(waitFor([&] { return !run.alive() || servedThrough(trampoline, ownerPin) != 0; },
                        30s) &&
                run.alive())
        << run.log();
    EXPECT_EQ(linkProgram(), trampoline) << "the same trampoline, re-adopted";
    EXPECT_NE(run.log().find("took over the trampoline"), std::string::npos) << run.log();
    expectSpecializedServes(owner.servesAsTheOwner, trampoline, owner.program, ownerPin);
    EXPECT_TRUE(run.stop()) << run.log();
  }
  EXPECT_EQ(linkProgram(), ownerId) << "SIGTERM gives the link back to the owner";
  EXPECT_NE(access(ownerPin.c_str(), F_OK), 0);

  // The owner moves on while Morpheus runs: Morpheus exits, link untouched.
  {
    ChildProcess run(tag + "-moved", runArgs());
    ASSERT_TRUE(waitFor([&] {
      trampoline = linkProgram();
      return !run.alive() || (trampoline != ownerId && servedThrough(trampoline, ownerPin) != 0);
    }, 30s) && run.alive()) << run.log();
    ASSERT_EQ(bpf_link_update(owner.linkFd, owner.upgrade, nullptr), 0);
    std::optional<int> status = run.wait(15s);
    ASSERT_TRUE(status) << "Morpheus did not stop\n" << run.log();
    EXPECT_EQ(*status, 0) << run.log();
    EXPECT_NE(run.log().find("the owner replaced or detached its program"), std::string::npos)
        << run.log();
    EXPECT_EQ(linkProgram(), programIdOf(owner.upgrade)) << "the owner's upgrade stays";
  }
  unlink(socket.c_str());
}

// A program of `type` that answers `verdict` to everything: an owner's
// upgrade.
Fd constantProgram(bpf_prog_type type, bpf_attach_type attach, int32_t verdict) {
  const bpf_insn code[] = {
      {BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, 0, verdict},
      {BPF_JMP | BPF_EXIT, 0, 0, 0, 0},
  };
  LIBBPF_OPTS(bpf_prog_load_opts, options, .expected_attach_type = attach);
  return Fd(bpf_prog_load(type, "owner_v2", "GPL", code, 2, &options));
}

TEST(Adoption, KillNineLeavesTheOwnerServingARestartReadoptsAndTheOwnerMayMoveOn) {
  Scene scene("adoptkill");
  auto &[veth, pins, owner] = scene;
  ASSERT_GE(owner.program, 0);
  std::string linkPin = pins.path() + "/owner_link";
  owner.attachLink(veth, linkPin);
  Fd upgrade = constantProgram(BPF_PROG_TYPE_XDP, BPF_XDP, XDP_PASS);
  ASSERT_GE(upgrade.fd, 0);
  killRestartAndMoveOn("adoptkill", pins,
                       {sourcePath("examples/policy_fwd.bpf.c"), linkPin, linkPin, owner.linkFd,
                        owner.program,
                        [&](uint32_t hook, const std::string &when) {
                          expectServesAsTheOwner(hook, owner.program, when);
                        },
                        upgrade.fd});
}


// A TC classifier a libbpf loader attached through tcx: adopted by its
// hook (IFACE:ingress), the specialized version answers every sample as
// the owner's program (verdicts and bytes: the DSCP rewrite), real frames
// are counted alike before and after, the owner's change is followed, and
// a clean exit gives the tcx link back.
TEST(Adoption, TcProgramAttachedThroughTcxServesAsTheOwnerAndGetsItsLinkBack) {
  std::string tag = std::string(sweptFirst("adopttc"));
  VethPair veth(tag);
  PinDir pins(tag);
  TcOwner owner;
  ASSERT_GE(owner.program, 0);
  owner.attachTcx(veth, pins.path() + "/owner_link");
  uint32_t ownerId = programIdOf(owner.program);
  ASSERT_EQ(owner.linkProgram(), ownerId);
  auto xdpPass = attachXdpPass(veth);
  ASSERT_TRUE(bool(xdpPass)) << llvm::toString(xdpPass.takeError());
  std::vector<uint64_t> ownersCounts = countsOfRealFrames(veth, owner);
  EXPECT_GT(ownersCounts[3], 0u) << "the blocked flow's frames were dropped";
  EXPECT_GT(ownersCounts[1], 0u) << "the clean flow's frames passed";

  runtime::DaemonOptions options = adoptOptions(veth, pins);
  options.adopt = veth.ifB() + ":ingress";
  std::string ownerPin = options.optimizer.pinDir + "/owner_program";
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto now = runtime::Daemon::Clock::now();
  {
    auto started = runtime::Daemon::start(corpusPath("tc_classifier.bpf.c"), options, out,
                                          errors);
    ASSERT_TRUE(bool(started)) << llvm::toString(started.takeError());
    runtime::Daemon &daemon = **started;
    EXPECT_NE(daemon.attachedTo().find("tcx ingress link on " + veth.ifB()), std::string::npos)
        << daemon.attachedTo();
    uint32_t trampoline = owner.linkProgram();
    EXPECT_NE(trampoline, ownerId) << "the tcx link runs the trampoline";
    expectTcServesAsTheOwner(trampoline, owner.program, "before the first install");

    std::optional<core::CycleReport> cycle = daemon.step(now += 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    EXPECT_EQ(servedThrough(trampoline, ownerPin), programIdOf(daemon.optimizer().activeFd()));
    auto servesAsTheOwner = [&](uint32_t hook, const std::string &when) {
      expectTcServesAsTheOwner(hook, owner.program, when);
    };
    servesAsTheOwner(trampoline, "specialized");
    expectSpecializedServes(servesAsTheOwner, trampoline, owner.program, ownerPin);
    EXPECT_EQ(countsOfRealFrames(veth, owner), ownersCounts)
        << "real frames through the specialized version";

    // The owner turns dropping into marking behind Morpheus's back.
    uint64_t version = daemon.optimizer().guard().version();
    owner.configure(2, 0x100, 10);
    cycle = daemon.step(now += 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << cycle->describe() << printed << problems;
    EXPECT_GT(daemon.optimizer().guard().version(), version) << "the change bumped the guard";
    servesAsTheOwner(trampoline, "after the owner's change");
    expectSpecializedServes(servesAsTheOwner, trampoline, owner.program, ownerPin);
    std::vector<uint64_t> marking = countsOfRealFrames(veth, owner);
    EXPECT_EQ(marking[2], ownersCounts[3]) << "the blocked flow is marked now, not dropped";
    EXPECT_EQ(marking[3], 0u);
  }
  EXPECT_EQ(owner.linkProgram(), ownerId) << "a clean exit gives the link back\n" << problems;
  EXPECT_NE(access(ownerPin.c_str(), F_OK), 0) << "the owner array's pin is removed";
}

// `morpheus run --adopt PINNED_TCX_LINK` as a process: as for XDP.
TEST(Adoption, TcxKillNineLeavesTheOwnerServingARestartReadoptsAndTheOwnerMayMoveOn) {
  std::string tag = std::string(sweptFirst("adopttck"));
  VethPair veth(tag);
  PinDir pins(tag);
  TcOwner owner;
  ASSERT_GE(owner.program, 0);
  std::string linkPin = pins.path() + "/owner_link";
  owner.attachTcx(veth, linkPin);
  Fd upgrade = constantProgram(BPF_PROG_TYPE_SCHED_CLS, bpf_attach_type(0), TC_ACT_OK);
  ASSERT_GE(upgrade.fd, 0);
  killRestartAndMoveOn(tag, pins,
                       {corpusPath("tc_classifier.bpf.c"), linkPin, linkPin, owner.linkFd,
                        owner.program,
                        [&](uint32_t hook, const std::string &when) {
                          expectTcServesAsTheOwner(hook, owner.program, when);
                        },
                        upgrade.fd});
}

} // namespace
} // namespace morpheus::testing
