// The node agent (runtime::Agent, `morpheus daemon --config`) driven in
// process, with the test's own output streams and a clock of the test's
// choosing: one loop serving programs of every kind at once (loaded by
// Morpheus, loaded by xdp-loader and adopted, two classifiers of one tcx
// chain adopted each by its program id, an adopted chain of tail calls, a
// program in a slot of a dispatcher shaped as libxdp's),
// each answering as its original; apply() and a reload through the socket
// touching exactly what changed; a restart after kill -9 taking the
// trampolines over; a crashing or throwing cycle, or a missing interface,
// costing only its own program; one control socket whose requests reach
// the program they name; under a CPU budget, changes first and no program
// starved.
#include "runtime/Agent.h"
#include "AdoptionOwners.h"
#include "Corpus.h"
#include "PolicyFwd.h"
#include "SlotCounters.h"
#include "SlotDispatcher.h"

#include <linux/bpf.h>
#include <llvm/ADT/ScopeExit.h>
#include <llvm/Testing/Support/Error.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <fstream>
#include <future>
#include <stdexcept>
#include <thread>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;
using runtime::AgentProgram;
using runtime::AgentProgramState;
using State = AgentProgramState::State;

// policy_fwd run by Morpheus on the veth's B side (generic XDP), its pins
// in pins/NAME; `fingerprint` stands for what the configuration said.
AgentProgram policyFwdOn(const std::string &name, const VethPair &veth, const PinDir &pins,
                         const std::string &fingerprint = "1") {
  AgentProgram program;
  program.name = name;
  program.path = sourcePath("examples/policy_fwd.bpf.c");
  program.options.ifaces = {veth.ifB()};
  program.options.netns = veth.nsB();
  program.options.mode = bpf::XdpMode::Generic;
  program.options.optimizer.pinDir = pins.path() + "/" + name;
  program.options.quiet = true;
  program.fingerprint = name + ":" + fingerprint;
  return program;
}

// `source` adopted at `target` (an interface's XDP hook in the veth's B
// namespace, or a program id), its owner array pinned in pins/NAME.
AgentProgram adoptedAt(const std::string &name, const std::string &source,
                       const std::string &target, const VethPair &veth, const PinDir &pins) {
  AgentProgram program;
  program.name = name;
  program.path = source;
  program.options = adoptOptions(veth, pins);
  program.options.adopt = target;
  program.options.optimizer.pinDir = pins.path() + "/" + name;
  program.fingerprint = name + ":1";
  return program;
}

// The programs of the veth's B-side tcx ingress chain, first to last
// (BPF_PROG_QUERY on the hook).
std::vector<uint32_t> tcxIngressChain(const VethPair &veth) {
  std::vector<uint32_t> chain;
  llvm::consumeError(netns::runInNetns(veth.nsB(), [&]() -> Error {
    std::array<uint32_t, 16> ids{};
    LIBBPF_OPTS(bpf_prog_query_opts, query, .prog_ids = ids.data(), .prog_cnt = ids.size());
    if (bpf_prog_query_opts(if_nametoindex(veth.ifB().c_str()),
                            bpf_attach_type(bpf::tcxAttachType(bpf::TcDirection::Ingress)),
                            &query) == 0)
      chain.assign(ids.begin(), ids.begin() + query.prog_cnt);
    return Error::success();
  }));
  return chain;
}

// A test's scene: two veth pairs and a pin directory named `tag` (what a
// killed run of the same test left is swept first).
struct TwoVeths {
  explicit TwoVeths(std::string_view tag)
      : one(sweptFirst(tag)), two(tag), pins(std::string(tag)) {}
  VethPair one, two;
  PinDir pins;
};

// Two classifiers, one libbpf owner each, attached in this order to the
// veth's tcx ingress chain; the second marks where the first drops.
struct TwoClassifiers {
  TwoClassifiers(const VethPair &veth, const PinDir &pins) {
    second.configure(2, 0x100, 12);
    first.attachTcx(veth, pins.path() + "/first_link");
    second.attachTcx(veth, pins.path() + "/second_link");
  }
  TcOwner first, second;
  const uint32_t firstId = programIdOf(first.program), secondId = programIdOf(second.program);
};

// An update through Morpheus (the guard bumped first) of a map of `daemon`'s
// program, as `morpheus map` makes it.
void updateThroughMorpheus(runtime::Daemon &daemon, const std::string &map, const Bytes &key,
                           const Bytes &value) {
  runtime::Optimizer &opt = daemon.optimizer();
  auto updater = bpf::MapUpdater::forMap(opt.mapFd(map), map, &opt.guard());
  ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
  llvm::Error err = updater->update(key, value);
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded()) << map;
}

// policy_fwd's configuration: the policy consulted, `defaultAction` when
// no rule matches, and a rule dropping UDP to 10.0.0.1:80.
void configurePolicyFwd(runtime::Daemon &daemon, uint32_t defaultAction) {
  uint32_t zero = 0;
  updateThroughMorpheus(daemon, "config", bytesOf(zero),
                        bytesOf(config{CFG_POLICY_ENABLED, defaultAction}));
  updateThroughMorpheus(daemon, "policy", bytesOf(policyKey(0x0a000001, 80, IPPROTO_UDP)),
                        bytesOf(policyValue(ACTION_DROP)));
}

// A packet no rule matches: what it gets is the default action.
Bytes unmatchedPacket() { return buildPacket(PacketSpec{.daddr = 0x0a000105, .dport = 80}); }

// The program an XDP hook runs, opened.
Fd hookFd(const VethPair &veth) { return Fd(bpf_prog_get_fd_by_id(hookProgram(veth))); }

// policy_fwd's owner in the middle slot of a dispatcher of three (count,
// the owner's program, count: its passed packets go on), attached to the
// veth's B side as a loader following libxdp's protocol attaches it; the
// slots are tail calls (TailCallSlots: this kernel refuses libxdp's
// extensions), so an agent adopting it is given that binding.
struct SlottedOwner {
  SlottedOwner(const VethPair &veth, const PinDir &pins)
      : binding(std::make_shared<TailCallSlots>(pins.path() + "/xdp")),
        hook(binding, veth.ifB(), veth.nsB()) {
    auto attached =
        attachFirstRevision(*binding, {{counters.in, 10}, {owner.program, 20}, {counters.out, 30}},
                            veth.ifB(), veth.nsB());
    if (!attached) {
      ADD_FAILURE() << llvm::toString(attached.takeError());
      return;
    }
    firstRevision = std::move(*attached);
    for (const Bytes &packet : samplePackets())
      before.push_back(runOnce(firstRevision.get(), packet));
  }

  // policy_fwd adopted at `target` (IFACE/NAME or the owner's program id),
  // its owner array pinned in pins/NAME.
  AgentProgram adoptedAt(const std::string &name, const std::string &target, const VethPair &veth,
                         const PinDir &pins) const {
    AgentProgram program =
        testing::adoptedAt(name, sourcePath("examples/policy_fwd.bpf.c"), target, veth, pins);
    program.options.dispatcherSlots = binding;
    return program;
  }
  // The programs of the dispatcher's slots, in order.
  std::vector<uint32_t> slotPrograms() const {
    auto read = hook.read();
    if (!read || !*read) {
      ADD_FAILURE() << "no dispatcher to read"
                    << (read ? "" : ": " + llvm::toString(read.takeError()));
      return {};
    }
    std::vector<uint32_t> ids;
    for (const bpf::DispatcherSlot &slot : (*read)->slots)
      ids.push_back(slot.programId);
    return ids;
  }
  // What the slots ran when the owner attached them.
  std::vector<uint32_t> ownersSlots() const {
    return {programIdOf(counters.in), ownerId, programIdOf(counters.out)};
  }
  // The dispatcher on the hook answers every sample as the first revision
  // did, before anything was adopted.
  void expectAnswersAsBefore(uint32_t hookId, const std::string &when) const {
    Fd hook(bpf_prog_get_fd_by_id(hookId));
    ASSERT_GE(hook.fd, 0) << when;
    std::vector<Bytes> packets = samplePackets();
    ASSERT_EQ(packets.size(), before.size());
    for (size_t i = 0; i < packets.size(); ++i)
      EXPECT_EQ(runOnce(hook.fd, packets[i]), before[i]) << when << ": sample " << i;
  }

  std::shared_ptr<TailCallSlots> binding;
  Owner owner;
  SlotCounters counters;
  const uint32_t ownerId = programIdOf(owner.program);
  FileDescriptor firstRevision;
  std::vector<RunResult> before;
  bpf::DispatcherHook hook;
};

// An agent on the test's own streams, stepped with a clock the test moves.
class AgentUnderTest {
public:
  ~AgentUnderTest() { stop(); }

  ::testing::AssertionResult start(std::vector<AgentProgram> programs,
                                   runtime::AgentOptions options = {}) {
    auto started = runtime::Agent::start(std::move(options), std::move(programs), out, errors);
    if (!started)
      return ::testing::AssertionFailure() << llvm::toString(started.takeError());
    agent = std::move(*started);
    return ::testing::AssertionSuccess();
  }
  // Every program stopped as `run` stops (hooks given back, originals
  // swapped in).
  void stop() { agent.reset(); }

  runtime::Agent &operator*() { return *agent; }
  runtime::Agent *operator->() { return agent.get(); }
  runtime::Daemon &daemon(const std::string &name) {
    runtime::Daemon *found = agent->daemon(name);
    EXPECT_NE(found, nullptr) << "no daemon serves '" << name << "'\n" << log();
    if (!found)
      throw std::runtime_error("no daemon for '" + name + "'");
    return *found;
  }
  AgentProgramState state(const std::string &name) const {
    for (AgentProgramState &state : agent->states())
      if (state.name == name)
        return state;
    ADD_FAILURE() << "no program '" << name << "' in the agent's states";
    return {};
  }
  // Steps `later` after the last step: what is due then runs.
  unsigned step(runtime::Agent::Clock::duration later) { return agent->step(now += later); }
  runtime::Agent::Clock::time_point now = runtime::Agent::Clock::now();

  std::string log() const { return printed + problems; }

private:
  std::string printed, problems;
  llvm::raw_string_ostream out{printed}, errors{problems};
  std::unique_ptr<runtime::Agent> agent; // goes before the streams it writes to
};

// Whether the program's last cycle installed a version (it serves it).
bool lastCycleInstalled(const AgentProgramState &state) {
  return state.lastCycle && state.lastCycle->installed() && state.installedVersion != 0;
}

// One agent, six programs of five kinds: (a) policy_fwd loaded and
// attached by Morpheus, (b) policy_fwd loaded by xdp-loader and adopted by
// its interface, (c) two classifiers one libbpf owner each attached to the
// same tcx ingress chain, each adopted by its program id (the hook's name
// would not say which), (d) a chain of tail calls at the kernel's limit,
// adopted accepting one stage fewer, (e) policy_fwd in the middle slot of
// a dispatcher shaped as libxdp's (its slots tail calls: this kernel
// refuses libxdp's extensions; the agent is given that slot binding),
// adopted by IFACE/NAME. Every program installs a version in the same
// steps, and each hook answers every sample as its original; the tcx chain
// keeps its order, the dispatcher its other slots, and stopping the agent
// gives every hook back.
TEST(Agent, ServesProgramsOfEveryKindInOneLoopEachAsItsOriginal) {
  std::string tag(sweptFirst("agentkinds"));
  VethPair mine(tag), loaded(tag), chained(tag), slotted(tag);
  PinDir pins(tag);

  // (b) xdp-loader's program: this kernel refuses its dispatcher
  // (freplace), so it attaches the program alone through netlink.
  std::string object = "/tmp/morpheus-test-agentkinds-" + std::to_string(getpid()) + ".o";
  auto removeObject = llvm::make_scope_exit([&] { unlink(object.c_str()); });
  {
    std::ofstream file(object, std::ios::binary);
    file.write(reinterpret_cast<const char *>(policy_fwd_owner_start),
               policy_fwd_owner_end - policy_fwd_owner_start);
  }
  std::string load = "ip netns exec " + loaded.nsB() + " xdp-loader load -m skb " + loaded.ifB() +
                     " " + object + " 2>&1";
  ASSERT_EQ(std::system(load.c_str()), 0) << load;
  uint32_t loaderId = hookProgram(loaded);
  ASSERT_NE(loaderId, 0u) << "xdp-loader attached nothing";
  Fd loaderProgram(bpf_prog_get_fd_by_id(loaderId));
  ASSERT_GE(loaderProgram.fd, 0);
  bpf_prog_info loaderInfo = {};
  uint32_t infoLength = sizeof(loaderInfo);
  ASSERT_EQ(bpf_obj_get_info_by_fd(loaderProgram.fd, &loaderInfo, &infoLength), 0);
  ASSERT_STREQ(loaderInfo.name, "policy_fwd") << "premise: xdp-loader attached the program "
                                                 "itself, not its dispatcher";

  // (c) two classifiers in one tcx chain.
  TwoClassifiers classifiers(mine, pins);
  auto &[first, second, firstId, secondId] = classifiers;
  ASSERT_EQ(tcxIngressChain(mine), (std::vector<uint32_t>{firstId, secondId}))
      << "premise: a tcx link attached without a position goes last";

  // (d) the chain of tail calls, as long as the kernel allows.
  ChainOwner chain(chained);
  ASSERT_GE(chain.entry, 0);
  chain.closeTheChain();

  // (e) policy_fwd in the middle slot of a dispatcher.
  SlottedOwner slot(slotted, pins);
  ASSERT_TRUE(slot.firstRevision.valid());

  AgentProgram chainProgram = adoptedAt("chain", sourcePath("tests/programs/tail_call_chain.bpf.c"),
                                        chained.ifB(), chained, pins);
  chainProgram.options.acceptOneTailCallFewer = true;
  AgentUnderTest agent;
  ASSERT_TRUE(agent.start({
      policyFwdOn("fwd", mine, pins),
      adoptedAt("loaded", sourcePath("examples/policy_fwd.bpf.c"), loaded.ifB(), loaded, pins),
      adoptedAt("tc_first", corpusPath("tc_classifier.bpf.c"), std::to_string(firstId), mine, pins),
      adoptedAt("tc_second", corpusPath("tc_classifier.bpf.c"), std::to_string(secondId), mine,
                pins),
      chainProgram,
      slot.adoptedAt("slot", slotted.ifB() + "/policy_fwd", slotted, pins),
  }));
  for (const AgentProgramState &state : agent->states())
    EXPECT_EQ(state.state, State::Serving) << state.name << ": " << state.detail << agent.log();
  ASSERT_EQ(agent->states().size(), 6u);

  uint32_t firstTrampoline = first.linkProgram(), secondTrampoline = second.linkProgram();
  EXPECT_NE(firstTrampoline, firstId) << "the first link runs a trampoline";
  EXPECT_NE(secondTrampoline, secondId) << "the second link runs a trampoline";
  EXPECT_EQ(tcxIngressChain(mine), (std::vector<uint32_t>{firstTrampoline, secondTrampoline}))
      << "each trampoline where its owner's program was";
  EXPECT_NE(agent.daemon("tc_first").attachedTo().find("(id " + std::to_string(firstId) + ")"),
            std::string::npos)
      << agent.daemon("tc_first").attachedTo();

  // Configured through Morpheus: the policy of both policy_fwd programs
  // (the adopted one's maps are xdp-loader's).
  configurePolicyFwd(agent.daemon("fwd"), ACTION_PASS);
  configurePolicyFwd(agent.daemon("loaded"), ACTION_TX);
  uint32_t chainTrampoline = hookProgram(chained);
  ASSERT_NE(chainTrampoline, programIdOf(chain.entry));
  Fd chainHook(bpf_prog_get_fd_by_id(chainTrampoline));
  std::vector<RunResult> chainBefore;
  for (const Bytes &packet : samplePackets())
    chainBefore.push_back(runOnce(chainHook.fd, packet));

  agent.step(1h);
  for (const AgentProgramState &state : agent->states())
    EXPECT_TRUE(lastCycleInstalled(state))
        << state.name << ": " << (state.lastCycle ? state.lastCycle->describe() : "no cycle")
        << "\n"
        << agent.log();

  // (a) The hook runs the installed version, which answers as the original.
  runtime::Optimizer &fwd = agent.daemon("fwd").optimizer();
  EXPECT_EQ(hookProgram(mine), programIdOf(fwd.activeFd()));
  expectServesAsTheOwner(hookProgram(mine), fwd.originalFd(), "fwd");
  // (b) xdp-loader's program, through the trampoline and alone.
  uint32_t loadedTrampoline = hookProgram(loaded);
  EXPECT_NE(loadedTrampoline, loaderId);
  std::string loadedPin = pins.path() + "/loaded/owner_program";
  EXPECT_EQ(servedThrough(loadedTrampoline, loadedPin),
            programIdOf(agent.daemon("loaded").optimizer().activeFd()));
  expectServesAsTheOwner(loadedTrampoline, loaderProgram.fd, "loaded");
  expectSpecializedServes(loadedTrampoline, loaderProgram.fd, loadedPin);
  // (c) Each classifier as its own owner's program.
  for (auto [name, owner, trampoline] : {std::tuple{"tc_first", &first, firstTrampoline},
                                         std::tuple{"tc_second", &second, secondTrampoline}}) {
    std::string ownerPin = pins.path() + "/" + name + "/owner_program";
    EXPECT_EQ(servedThrough(trampoline, ownerPin),
              programIdOf(agent.daemon(name).optimizer().activeFd()))
        << name;
    auto servesAsTheOwner = [&, owner = owner](uint32_t hook, const std::string &when) {
      expectTcServesAsTheOwner(hook, owner->program, std::string(name) + ", " + when);
    };
    servesAsTheOwner(trampoline, "specialized");
    expectSpecializedServes(servesAsTheOwner, trampoline, owner->program, ownerPin);
  }
  // (d) The chain answers as it did through the trampoline before any
  // version: one stage fewer than the owner's, as accepted.
  auto chainAnswersAsBefore = [&](uint32_t hook, const std::string &when) {
    Fd fd(bpf_prog_get_fd_by_id(hook));
    std::vector<Bytes> packets = samplePackets();
    for (size_t i = 0; i < packets.size(); ++i)
      EXPECT_EQ(runOnce(fd.fd, packets[i]), chainBefore[i]) << when << ": sample " << i;
  };
  EXPECT_EQ(servedThrough(chainTrampoline, pins.path() + "/chain/owner_program"),
            programIdOf(agent.daemon("chain").optimizer().activeFd()));
  chainAnswersAsBefore(chainTrampoline, "chain, specialized");
  expectSpecializedServes(chainAnswersAsBefore, chainTrampoline, chain.entry,
                          pins.path() + "/chain/owner_program");
  EXPECT_EQ(ChainOwner::stagesRun(chainHook.fd), 33);
  // (e) The slot runs the trampoline, the slots around it carried over;
  // the dispatcher answers as before, the trampoline as the owner's
  // program, through the installed version alone too.
  std::vector<uint32_t> adoptedSlots = slot.slotPrograms();
  ASSERT_EQ(adoptedSlots.size(), 3u);
  uint32_t slotTrampoline = adoptedSlots[1];
  EXPECT_NE(slotTrampoline, slot.ownerId) << "the slot runs a trampoline";
  EXPECT_EQ(adoptedSlots[0], slot.ownersSlots()[0]);
  EXPECT_EQ(adoptedSlots[2], slot.ownersSlots()[2]);
  EXPECT_NE(agent.daemon("slot").attachedTo().find("slot 1 (priority 20) of the XDP dispatcher"),
            std::string::npos)
      << agent.daemon("slot").attachedTo();
  std::string slotPin = pins.path() + "/slot/owner_program";
  EXPECT_EQ(servedThrough(slotTrampoline, slotPin),
            programIdOf(agent.daemon("slot").optimizer().activeFd()));
  expectServesAsTheOwner(slotTrampoline, slot.owner.program, "slot");
  expectSpecializedServes(slotTrampoline, slot.owner.program, slotPin);
  slot.expectAnswersAsBefore(hookProgram(slotted), "slot, specialized");

  agent.stop();
  EXPECT_EQ(hookProgram(mine), 0u) << "Morpheus's own program detached";
  EXPECT_EQ(hookProgram(loaded), loaderId) << "xdp-loader's program is back on its hook";
  EXPECT_EQ(tcxIngressChain(mine), (std::vector<uint32_t>{firstId, secondId}))
      << "both classifiers back, in their order";
  EXPECT_EQ(hookProgram(chained), programIdOf(chain.entry));
  EXPECT_EQ(ChainOwner::stagesRun(chain.entry), 34);
  EXPECT_EQ(slot.slotPrograms(), slot.ownersSlots())
      << "the owner's program back in its slot, the others kept";
  slot.expectAnswersAsBefore(hookProgram(slotted), "slot, handed back");
}

// apply() with one program removed, one added and one changed: the
// unchanged one keeps its Daemon (its links, its trampoline), the removed
// adopted classifier's link goes back to its owner's program while the
// other classifier of the chain keeps its trampoline, the changed one
// starts again, the added one serves.
TEST(Agent, ApplyTouchesExactlyTheProgramsWhoseEntryChanged) {
  TwoVeths scene("agentapply");
  auto &[one, two, pins] = scene;
  TwoClassifiers classifiers(one, pins);
  auto &[first, second, firstId, secondId] = classifiers;
  ASSERT_EQ(tcxIngressChain(one), (std::vector<uint32_t>{firstId, secondId}));
  std::string tc = corpusPath("tc_classifier.bpf.c");

  AgentUnderTest agent;
  ASSERT_TRUE(agent.start({policyFwdOn("fwd", one, pins),
                           adoptedAt("tc_first", tc, std::to_string(firstId), one, pins),
                           adoptedAt("tc_second", tc, std::to_string(secondId), one, pins)}));
  configurePolicyFwd(agent.daemon("fwd"), ACTION_PASS);
  agent.step(1h);
  for (const AgentProgramState &state : agent->states())
    ASSERT_TRUE(lastCycleInstalled(state)) << state.name << "\n" << agent.log();
  runtime::Daemon *kept = &agent.daemon("tc_first");
  uint32_t firstTrampoline = first.linkProgram();
  ASSERT_EQ(tcxIngressChain(one), (std::vector<uint32_t>{firstTrampoline, second.linkProgram()}));

  runtime::AgentChanges changes =
      agent->apply({policyFwdOn("fwd", one, pins, "2"),
                    adoptedAt("tc_first", tc, std::to_string(firstId), one, pins),
                    policyFwdOn("fwd_two", two, pins)});
  EXPECT_EQ(changes.started, std::vector<std::string>{"fwd_two"}) << changes.describe();
  EXPECT_EQ(changes.restarted, std::vector<std::string>{"fwd"}) << changes.describe();
  EXPECT_EQ(changes.stopped, std::vector<std::string>{"tc_second"}) << changes.describe();
  EXPECT_EQ(changes.unchanged, std::vector<std::string>{"tc_first"}) << changes.describe();
  EXPECT_TRUE(changes.failed.empty()) << changes.describe();

  EXPECT_EQ(agent->daemon("tc_first"), kept) << "the unchanged program keeps its daemon";
  EXPECT_EQ(agent->daemon("tc_second"), nullptr);
  EXPECT_EQ(agent->states().size(), 3u);
  EXPECT_EQ(second.linkProgram(), secondId) << "the removed program's link is its owner's again";
  EXPECT_EQ(tcxIngressChain(one), (std::vector<uint32_t>{firstTrampoline, secondId}))
      << "the other classifier keeps its trampoline, the chain its order";
  EXPECT_EQ(agent.state("tc_first").starts, 1u);
  EXPECT_EQ(agent.state("fwd").starts, 2u) << "the changed program started again";
  EXPECT_EQ(agent.state("fwd").state, State::Serving);
  EXPECT_EQ(hookProgram(one), programIdOf(agent.daemon("fwd").optimizer().activeFd()))
      << "the changed program is attached again";

  configurePolicyFwd(agent.daemon("fwd_two"), ACTION_DROP);
  agent.step(1h);
  for (const std::string &name : {"fwd", "fwd_two"})
    EXPECT_TRUE(lastCycleInstalled(agent.state(name))) << name << "\n" << agent.log();
  EXPECT_NE(agent.state("tc_first").installedVersion, 0u);
  runtime::Optimizer &added = agent.daemon("fwd_two").optimizer();
  EXPECT_EQ(hookProgram(two), programIdOf(added.activeFd()));
  expectServesAsTheOwner(hookProgram(two), added.originalFd(), "the added program");
  EXPECT_EQ(runOnce(hookFd(two).fd, unmatchedPacket()).verdict, uint32_t(XDP_DROP));
  runtime::Optimizer &restarted = agent.daemon("fwd").optimizer();
  expectServesAsTheOwner(hookProgram(one), restarted.originalFd(), "the changed program");
  expectTcServesAsTheOwner(first.linkProgram(), first.program, "the unchanged classifier");
  EXPECT_EQ(first.linkProgram(), firstTrampoline);
}

// `morpheus daemon` adopting both classifiers of one tcx chain by program
// id, killed with -9: each link keeps its trampoline, the owner's program
// serving through it. The agent started again with the same entries takes
// both trampolines over (the program ids name the owners' programs, which
// the links no longer run), each serves as its owner's program, and its
// stop gives both links back in their order.
TEST(Agent, ARestartAfterKillNineReadoptsProgramsAdoptedById) {
  std::string tag(sweptFirst("agentkill"));
  VethPair veth(tag);
  PinDir pins(tag);
  TwoClassifiers classifiers(veth, pins);
  auto &[first, second, firstId, secondId] = classifiers;
  ASSERT_EQ(tcxIngressChain(veth), (std::vector<uint32_t>{firstId, secondId}));
  std::string tc = corpusPath("tc_classifier.bpf.c");
  std::vector<AgentProgram> programs = {
      adoptedAt("tc_first", tc, std::to_string(firstId), veth, pins),
      adoptedAt("tc_second", tc, std::to_string(secondId), veth, pins)};

  std::string base = "/tmp/morpheus-test-agentkill-" + std::to_string(getpid());
  auto removeFiles = llvm::make_scope_exit([&] {
    for (const char *suffix : {".yaml", ".sock", ".sock.lock"})
      unlink((base + suffix).c_str());
  });
  {
    std::ofstream config(base + ".yaml");
    config << "socket: " << base << ".sock\nprograms:\n";
    for (const AgentProgram &program : programs)
      config << "  - name: " << program.name << "\n    source: " << tc << "\n    adopt: \""
             << program.options.adopt << "\"\n    pin_dir: " << program.options.optimizer.pinDir
             << "\n    period: 100ms\n";
  }
  {
    ChildProcess daemon(tag, {binPath("morpheus"), "daemon", "--config", base + ".yaml"});
    ASSERT_TRUE(
        waitFor(
            [&] {
              return !daemon.alive() ||
                     (servedThrough(first.linkProgram(), pins.path() + "/tc_first/owner_program") &&
                      servedThrough(second.linkProgram(),
                                    pins.path() + "/tc_second/owner_program"));
            },
            30s) &&
        daemon.alive())
        << daemon.log();
    kill(daemon.pid(), SIGKILL);
    EXPECT_FALSE(daemon.wait(10s)) << "killed, not exited";
  }
  uint32_t firstTrampoline = first.linkProgram(), secondTrampoline = second.linkProgram();
  ASSERT_NE(firstTrampoline, firstId) << "premise: kill -9 leaves the trampoline";
  ASSERT_NE(secondTrampoline, secondId) << "premise: kill -9 leaves the trampoline";
  expectTcServesAsTheOwner(firstTrampoline, first.program, "first, after kill -9");

  {
    AgentUnderTest agent;
    ASSERT_TRUE(agent.start(programs));
    for (const AgentProgramState &state : agent->states())
      ASSERT_EQ(state.state, State::Serving) << state.name << ": " << state.detail;
    EXPECT_NE(agent.log().find("[tc_first] took over the trampoline"), std::string::npos)
        << agent.log();
    agent.step(1h);
    EXPECT_EQ(tcxIngressChain(veth), (std::vector<uint32_t>{firstTrampoline, secondTrampoline}))
        << "the same trampolines, re-adopted";
    for (auto [name, owner, trampoline] : {std::tuple{"tc_first", &first, firstTrampoline},
                                           std::tuple{"tc_second", &second, secondTrampoline}}) {
      ASSERT_TRUE(lastCycleInstalled(agent.state(name))) << name << "\n" << agent.log();
      EXPECT_EQ(servedThrough(trampoline, pins.path() + "/" + name + "/owner_program"),
                programIdOf(agent.daemon(name).optimizer().activeFd()));
      expectTcServesAsTheOwner(trampoline, owner->program, std::string(name) + ", re-adopted");
    }
  }
  EXPECT_EQ(tcxIngressChain(veth), (std::vector<uint32_t>{firstId, secondId}))
      << "both links back to their owners' programs, in their order";
}

// An agent serving policy_fwd adopted by its program id from the middle
// slot of a dispatcher, killed with -9 under traffic: the slot keeps the
// trampoline, the owner's program serving through it; the next agent,
// given the same entry, finds the slot by the trampoline it left and takes
// it over, serves a version of its own, and its stop gives the slot back.
// Every packet sent meanwhile entered the dispatcher, was answered by the
// adopted slot and, exactly when passed, went on (SlotCounters.h).
TEST(Agent, AKillNineLeavesADispatcherSlotServingAndTheNextAgentReadoptsIt) {
  std::string tag(sweptFirst("agentslotkill"));
  VethPair veth(tag);
  PinDir pins(tag);
  SlottedOwner slot(veth, pins);
  ASSERT_TRUE(slot.firstRevision.valid());
  AgentProgram program = slot.adoptedAt("slot", std::to_string(slot.ownerId), veth, pins);
  std::string ownerPin = pins.path() + "/slot/owner_program";

  // The first agent runs in a child process, forked before any thread of
  // the test's runs: it installs a version, says so, and waits to be killed.
  int ready[2];
  ASSERT_EQ(pipe(ready), 0);
  pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // No gtest assertions here: they would report in the wrong process.
    close(ready[0]);
    std::string printed;
    llvm::raw_string_ostream out(printed);
    auto agent = runtime::Agent::start({}, {program}, out, out);
    char installed = '0';
    if (agent) {
      (*agent)->step(runtime::Agent::Clock::now() + 1h);
      for (const AgentProgramState &state : (*agent)->states())
        installed = lastCycleInstalled(state) ? '1' : '0';
    } else {
      out << llvm::toString(agent.takeError()) << "\n";
    }
    if (installed != '1') // what the agent said, for the test's log
      llvm::errs() << printed;
    if (write(ready[1], &installed, 1) != 1 || installed != '1')
      _exit(1);
    for (;;)
      pause();
  }
  close(ready[1]);
  auto reap = llvm::make_scope_exit([&] {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  });
  char installed = 0;
  ASSERT_EQ(read(ready[0], &installed, 1), 1) << "the first agent died";
  close(ready[0]);
  ASSERT_EQ(installed, '1') << "the first agent installed no version";
  std::vector<uint32_t> adopted = slot.slotPrograms();
  ASSERT_EQ(adopted.size(), 3u);
  uint32_t trampoline = adopted[1];
  ASSERT_NE(trampoline, slot.ownerId) << "premise: the slot runs the trampoline";
  ASSERT_NE(servedThrough(trampoline, ownerPin), 0u) << "premise: a version serves";

  // Under traffic: the kill, the next agent's start and first version.
  AgentUnderTest agent;
  Counted start = countedBy(slot.counters, slot.owner);
  {
    DispatcherTraffic traffic(veth, halfDroppedFlows());
    std::this_thread::sleep_for(100ms);
    ASSERT_EQ(kill(child, SIGKILL), 0);
    ASSERT_EQ(waitpid(child, nullptr, 0), child);
    reap.release();
    // The kernel empties the killed agent's array: the owner serves.
    EXPECT_TRUE(waitFor([&] { return servedThrough(trampoline, ownerPin) == 0; }, 2000ms))
        << "the killed agent's version still serves";
    EXPECT_EQ(slot.slotPrograms(), adopted) << "the slot keeps the trampoline after kill -9";
    std::this_thread::sleep_for(100ms);
    ASSERT_TRUE(agent.start({program}));
    ASSERT_EQ(agent.state("slot").state, State::Serving) << agent.log();
    EXPECT_NE(agent.log().find("[slot] took over the trampoline"), std::string::npos)
        << agent.log();
    agent.step(1h);
    ASSERT_TRUE(lastCycleInstalled(agent.state("slot"))) << agent.log();
    std::this_thread::sleep_for(100ms);
    uint64_t sent = traffic.stop();
    std::printf("killed and re-adopted: %llu packets\n", (unsigned long long)sent);
    expectEveryPacketCounted(slot.counters, slot.owner, start, sent, "killed and re-adopted");
  }
  // (Runs of samples count in the owner's stats: not under traffic.)
  EXPECT_EQ(slot.slotPrograms(), adopted) << "the same trampoline, re-adopted";
  EXPECT_EQ(servedThrough(trampoline, ownerPin),
            programIdOf(agent.daemon("slot").optimizer().activeFd()));
  expectServesAsTheOwner(trampoline, slot.owner.program, "re-adopted");

  // Under traffic: the next agent stops and gives the slot back.
  start = countedBy(slot.counters, slot.owner);
  {
    DispatcherTraffic traffic(veth, halfDroppedFlows());
    std::this_thread::sleep_for(100ms);
    agent.stop();
    std::this_thread::sleep_for(200ms);
    uint64_t sent = traffic.stop();
    std::printf("handed back: %llu packets\n", (unsigned long long)sent);
    expectEveryPacketCounted(slot.counters, slot.owner, start, sent, "handed back");
  }
  EXPECT_EQ(slot.slotPrograms(), slot.ownersSlots())
      << "the owner's program back in its slot, the others kept";
  slot.expectAnswersAsBefore(hookProgram(veth), "handed back");
  EXPECT_NE(access(ownerPin.c_str(), F_OK), 0) << "the owner array's pin is removed";
}

// A cycle that crashes (a real SIGSEGV inside the compiler, recovered)
// fails that program's cycle and backs it off; the other program installs
// after each of its own updates, the status lists both as serving, and
// the crashing one installs again once the pass is mended.
TEST(Agent, ACrashingCycleCostsOnlyItsOwnProgram) {
  TwoVeths scene("agentcrash");
  auto &[one, two, pins] = scene;
  AgentUnderTest agent;
  ASSERT_TRUE(agent.start({policyFwdOn("crashing", one, pins), policyFwdOn("healthy", two, pins)}));
  runtime::Daemon &crashing = agent.daemon("crashing");
  runtime::Daemon &healthy = agent.daemon("healthy");
  configurePolicyFwd(crashing, ACTION_PASS);
  configurePolicyFwd(healthy, ACTION_PASS);
  agent.step(1h);
  ASSERT_TRUE(lastCycleInstalled(agent.state("crashing"))) << agent.log();
  ASSERT_TRUE(lastCycleInstalled(agent.state("healthy"))) << agent.log();

  crashing.optimizer().injectFaults({.crashAfterTablePasses = core::FaultInjection::Crash::Segv});
  uint32_t zero = 0;
  auto setDefault = [&](runtime::Daemon &daemon, uint32_t action) {
    updateThroughMorpheus(daemon, "config", bytesOf(zero),
                          bytesOf(config{CFG_POLICY_ENABLED, action}));
    daemon.notifyChange();
  };
  setDefault(crashing, ACTION_DROP);
  setDefault(healthy, ACTION_DROP);
  uint64_t healthyVersion = agent.state("healthy").installedVersion;
  EXPECT_EQ(agent.step(1ms), 2u) << "both changes ran a cycle";
  AgentProgramState failed = agent.state("crashing");
  ASSERT_TRUE(failed.lastCycle);
  EXPECT_EQ(failed.lastCycle->outcome, core::CycleOutcome::Failed) << failed.lastCycle->describe();
  EXPECT_NE(failed.lastCycle->detail.find("specialization crashed"), std::string::npos)
      << failed.lastCycle->detail;
  EXPECT_EQ(failed.cyclesByOutcome[core::CycleOutcome::Failed], 1u);
  EXPECT_EQ(failed.state, State::Serving) << "a failed cycle is not a failed program";
  EXPECT_EQ(crashing.consecutiveFailures(), 1u);
  EXPECT_GT(crashing.nextCycleAt(), agent.now) << "it backs off";
  EXPECT_TRUE(lastCycleInstalled(agent.state("healthy")));
  EXPECT_GT(agent.state("healthy").installedVersion, healthyVersion);
  // The crashing program's running version defers to the original, which
  // reads the new configuration.
  EXPECT_EQ(runOnce(hookFd(one).fd, unmatchedPacket()).verdict, uint32_t(XDP_DROP));

  // While it backs off, a change of its own runs no cycle; the other's does.
  setDefault(crashing, ACTION_PASS);
  setDefault(healthy, ACTION_PASS);
  healthyVersion = agent.state("healthy").installedVersion;
  uint64_t crashingCycle = agent.state("crashing").lastCycle->cycle;
  EXPECT_EQ(agent.step(1ms), 1u);
  EXPECT_EQ(agent.state("crashing").lastCycle->cycle, crashingCycle) << "backing off";
  EXPECT_GT(agent.state("healthy").installedVersion, healthyVersion);
  expectServesAsTheOwner(hookProgram(two), healthy.optimizer().originalFd(), "healthy");
  expectServesAsTheOwner(hookProgram(one), crashing.optimizer().originalFd(), "crashing");

  nlohmann::json status = agent->status();
  ASSERT_EQ(status["programs"].size(), 2u) << status.dump();
  for (const nlohmann::json &program : status["programs"])
    EXPECT_EQ(program["state"], "serving") << program.dump();
  EXPECT_EQ(status["programs"][0]["name"], "crashing");
  EXPECT_EQ(status["programs"][0]["last_cycle"]["outcome"],
            core::outcomeName(core::CycleOutcome::Failed));

  // The pass mended, the end of the back-off installs.
  crashing.optimizer().injectFaults({});
  agent.now = std::max(agent.now, crashing.nextCycleAt());
  agent.step(0s);
  EXPECT_TRUE(lastCycleInstalled(agent.state("crashing"))) << agent.log();
  EXPECT_EQ(crashing.consecutiveFailures(), 0u);
  EXPECT_EQ(agent->daemon("crashing"), &crashing) << "the same daemon throughout";
}

// {"op":"reload"} through the socket is answered once the loop has applied
// the configuration as it reads then: the removed program, kept serving
// on exit, leaves its original attached and its maps pinned; the added one
// serves. A configuration that does not read changes nothing, and the
// reply says why.
TEST(Agent, AReloadThroughTheSocketAppliesTheConfigurationAsItReadsThen) {
  TwoVeths scene("agentreload");
  auto &[one, two, pins] = scene;
  AgentProgram kept = policyFwdOn("kept", one, pins);
  kept.options.onExit = runtime::OnExit::KeepServing;
  std::vector<AgentProgram> configured = {kept};
  std::optional<std::string> unreadable;
  runtime::AgentOptions options;
  options.socketPath = "/tmp/morpheus-test-agentreload-" + std::to_string(getpid()) + ".sock";
  auto removeSocket = llvm::make_scope_exit([&] {
    unlink(options.socketPath.c_str());
    unlink((options.socketPath + ".lock").c_str());
  });
  options.loadConfiguration = [&]() -> Expected<std::vector<AgentProgram>> {
    if (unreadable)
      return makeError("{0}", *unreadable);
    return configured;
  };
  AgentUnderTest agent;
  ASSERT_TRUE(agent.start(configured, options));
  configurePolicyFwd(agent.daemon("kept"), ACTION_DROP);
  agent.step(1h);
  ASSERT_TRUE(lastCycleInstalled(agent.state("kept"))) << agent.log();
  uint32_t original = programIdOf(agent.daemon("kept").optimizer().originalFd());
  // The reply comes once the loop (this thread) has stepped.
  auto reload = [&] {
    std::future<nlohmann::json> reply = std::async(std::launch::async, [&] {
      return askControlSocket(options.socketPath, {{"op", "reload"}});
    });
    for (int i = 0; i < 1000 && reply.wait_for(10ms) != std::future_status::ready; ++i)
      agent.step(1ms);
    return reply.get();
  };

  configured = {policyFwdOn("added", two, pins)};
  nlohmann::json reply = reload();
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(reply["changes"]["stopped"], nlohmann::json::array({"kept"})) << reply.dump();
  EXPECT_EQ(reply["changes"]["started"], nlohmann::json::array({"added"})) << reply.dump();
  EXPECT_EQ(agent->daemon("kept"), nullptr);
  EXPECT_EQ(hookProgram(one), original) << "the removed program's original stays attached";
  EXPECT_EQ(runOnce(hookFd(one).fd, unmatchedPacket()).verdict, uint32_t(XDP_DROP));
  EXPECT_EQ(access((pins.path() + "/kept/config").c_str(), F_OK), 0) << "its maps stay pinned";
  configurePolicyFwd(agent.daemon("added"), ACTION_PASS);
  agent.step(1h);
  EXPECT_TRUE(lastCycleInstalled(agent.state("added"))) << agent.log();
  EXPECT_EQ(hookProgram(two), programIdOf(agent.daemon("added").optimizer().activeFd()));

  unreadable = "agent.yaml:3:7: not a mapping";
  configured = {};
  reply = reload();
  EXPECT_FALSE(reply.value("ok", true)) << reply.dump();
  EXPECT_NE(reply.value("error", "").find("reload refused, nothing changed"), std::string::npos)
      << reply.dump();
  EXPECT_NE(reply.value("error", "").find(*unreadable), std::string::npos) << reply.dump();
  EXPECT_EQ(agent.state("added").state, State::Serving) << "nothing changed";
}

// Under a CPU budget that pays for one cycle a step, the program an update
// waits for goes first, also when the other program's period is due and
// its turn is older (it was added later and never ran).
TEST(Agent, UnderTheCpuBudgetTheProgramAChangeWaitsForGoesFirst) {
  TwoVeths scene("agentbudget");
  auto &[one, two, pins] = scene;
  runtime::AgentOptions options;
  options.cpuBudget = 0.001; // a millisecond of CPU a second: one cycle, then none
  AgentUnderTest agent;
  ASSERT_TRUE(agent.start({policyFwdOn("early", one, pins)}, options));
  EXPECT_EQ(agent.step(1h), 1u) << "the budget pays for one cycle";
  ASSERT_TRUE(lastCycleInstalled(agent.state("early"))) << agent.log();
  runtime::AgentChanges added =
      agent->apply({policyFwdOn("early", one, pins), policyFwdOn("late", two, pins)});
  ASSERT_EQ(added.started, std::vector<std::string>{"late"}) << added.describe();

  // Due both: "late" with its first (costly) cycle and no turn yet,
  // "early" with an update.
  configurePolicyFwd(agent.daemon("early"), ACTION_DROP);
  agent.daemon("early").notifyChange();
  uint64_t earlyCycles = agent.state("early").lastCycle->cycle;
  EXPECT_EQ(agent.step(1h), 1u);
  EXPECT_GT(agent.state("early").lastCycle->cycle, earlyCycles)
      << "the update's program ran first\n"
      << agent.log();
  EXPECT_FALSE(agent.state("late").lastCycle.has_value());
  EXPECT_EQ(agent.state("late").cyclesDeferred, 1u);
}

// A busy program with a change waiting at every step (updates through
// Morpheus) shares the same budget with a quiet one (its period's work
// only): changes go first, but a program the budget deferred goes before
// any that was not, so the quiet one waits one step at most, every time.
TEST(Agent, UnderATightCpuBudgetABusyProgramDoesNotStarveAQuietOne) {
  TwoVeths scene("agentstarve");
  auto &[one, two, pins] = scene;
  runtime::AgentOptions options;
  options.cpuBudget = 0.001;
  AgentUnderTest agent;
  ASSERT_TRUE(
      agent.start({policyFwdOn("busy", one, pins), policyFwdOn("quiet", two, pins)}, options));
  uint32_t rule = 0x0a000300;
  std::string ran; // per step: q when the quiet program had a cycle, - when not
  uint64_t quietCycles = 0;
  for (int round = 0; round < 8; ++round) {
    updateThroughMorpheus(agent.daemon("busy"), "policy",
                          bytesOf(policyKey(rule++, 80, IPPROTO_UDP)),
                          bytesOf(policyValue(ACTION_DROP)));
    agent.daemon("busy").notifyChange();
    ASSERT_GE(agent.step(1h), 1u) << "round " << round << "\n" << agent.log();
    uint64_t quiet = agent.state("quiet").lastCycle ? agent.state("quiet").lastCycle->cycle : 0;
    ran += quiet != quietCycles ? 'q' : '-';
    quietCycles = quiet;
  }
  EXPECT_EQ(ran.find("--"), std::string::npos)
      << "the quiet program waited more than one step: " << ran;
  EXPECT_GE(std::count(ran.begin(), ran.end(), 'q'), 4) << ran;
  EXPECT_GE(agent.state("busy").cyclesByOutcome[core::CycleOutcome::Installed], 4u)
      << "the busy program's changes were followed too\n"
      << agent.log();
}

// Under the same budget, two programs alike (no change waiting, as busy
// as each other) whose cycles are costly take turns: the one the budget
// deferred goes first next time, instead of the first by name every time.
TEST(Agent, UnderTheCpuBudgetProgramsAlikeTakeTurns) {
  TwoVeths scene("agentturns");
  auto &[one, two, pins] = scene;
  runtime::AgentOptions options;
  options.cpuBudget = 0.001;
  AgentUnderTest agent;
  ASSERT_TRUE(
      agent.start({policyFwdOn("early", one, pins), policyFwdOn("late", two, pins)}, options));
  // Each round, a rule never seen before is written into both programs'
  // policy by another writer: every periodic cycle rebuilds.
  uint32_t rule = 0x0a000200;
  auto costlyCycles = [&] {
    policy_key key = policyKey(rule++, 80, IPPROTO_UDP);
    policy_value value = policyValue(ACTION_DROP);
    for (const char *name : {"early", "late"})
      ASSERT_EQ(bpf_map_update_elem(agent.daemon(name).optimizer().mapFd("policy"), &key, &value,
                                    BPF_ANY),
                0);
  };
  std::vector<std::string> ran;
  for (int round = 0; round < 4; ++round) {
    costlyCycles();
    std::map<std::string, uint64_t> before;
    for (const char *name : {"early", "late"})
      before[name] = agent.state(name).lastCycle ? agent.state(name).lastCycle->cycle : 0;
    EXPECT_EQ(agent.step(1h), 1u) << "round " << round << ": the budget pays for one cycle";
    for (const char *name : {"early", "late"})
      if (agent.state(name).lastCycle && agent.state(name).lastCycle->cycle != before[name])
        ran.push_back(name);
  }
  EXPECT_EQ(ran, (std::vector<std::string>{"early", "late", "early", "late"}));
}

// A cycle that throws (here the install step) leaves its daemon untrusted:
// the agent stops that program as `run` stops and starts it afresh at the
// next step, which serves again; the other program's daemon is untouched.
TEST(Agent, ACycleThatThrowsRestartsOnlyItsProgram) {
  TwoVeths scene("agentthrow");
  auto &[one, two, pins] = scene;
  AgentUnderTest agent;
  ASSERT_TRUE(agent.start({policyFwdOn("throwing", one, pins), policyFwdOn("steady", two, pins)}));
  runtime::Daemon *steady = &agent.daemon("steady");
  configurePolicyFwd(agent.daemon("throwing"), ACTION_PASS);
  agent.daemon("throwing").optimizer().install = [](int) -> Error {
    throw std::runtime_error("install exploded");
  };
  agent.step(1h);
  AgentProgramState thrown = agent.state("throwing");
  EXPECT_EQ(thrown.state, State::Failed);
  EXPECT_NE(thrown.detail.find("unexpected error in a cycle: install exploded"), std::string::npos)
      << thrown.detail;
  EXPECT_EQ(agent->daemon("throwing"), nullptr) << "the untrusted daemon is gone";
  EXPECT_EQ(hookProgram(one), 0u) << "stopped as `run --detach-on-exit` stops";
  EXPECT_TRUE(lastCycleInstalled(agent.state("steady"))) << agent.log();

  EXPECT_NE(agent.log().find("[throwing] unexpected error in a cycle: install exploded"),
            std::string::npos)
      << "the log says why the program stopped\n"
      << agent.log();

  // Started again at once, its first cycle due in the same step.
  agent.step(1ms);
  EXPECT_EQ(agent.state("throwing").state, State::Serving) << agent.state("throwing").detail;
  EXPECT_EQ(agent.state("throwing").starts, 2u);
  EXPECT_EQ(agent->daemon("steady"), steady);
  runtime::Optimizer &restarted = agent.daemon("throwing").optimizer();
  EXPECT_TRUE(lastCycleInstalled(agent.state("throwing"))) << agent.log();
  EXPECT_EQ(hookProgram(one), programIdOf(restarted.activeFd()));
  expectServesAsTheOwner(hookProgram(one), restarted.originalFd(), "restarted");
}

// A program whose interface does not exist yet is failed (and says why)
// while the other serves; once the interface exists, the first retry after
// the back-off starts it.
TEST(Agent, AProgramWhoseInterfaceIsMissingStartsOnARetryOnceItExists) {
  std::string tag(sweptFirst("agentlate"));
  VethPair veth(tag);
  PinDir pins(tag);
  std::string late = "mpl" + std::to_string(getpid() % 1000000);
  AgentProgram waiting = policyFwdOn("waiting", veth, pins);
  waiting.options.ifaces = {late};
  AgentUnderTest agent;
  ASSERT_TRUE(agent.start({policyFwdOn("serving", veth, pins), waiting}));
  AgentProgramState failed = agent.state("waiting");
  EXPECT_EQ(failed.state, State::Failed);
  EXPECT_NE(failed.detail.find(late), std::string::npos) << failed.detail;
  EXPECT_EQ(failed.starts, 0u);
  EXPECT_EQ(agent->daemon("waiting"), nullptr);
  EXPECT_EQ(agent.state("serving").state, State::Serving);
  nlohmann::json status = agent->status();
  ASSERT_EQ(status["programs"].size(), 2u);
  EXPECT_EQ(status["programs"][1]["name"], "waiting");
  EXPECT_EQ(status["programs"][1]["state"], "failed");

  std::string add = "ip -n " + veth.nsB() + " link add " + late + " type veth peer name " + late +
                    "p && ip -n " + veth.nsB() + " link set " + late + " up";
  ASSERT_EQ(std::system(add.c_str()), 0);
  agent.step(0s);
  EXPECT_EQ(agent.state("waiting").state, State::Failed) << "not before its retry";
  agent.step(3s);
  EXPECT_EQ(agent.state("waiting").state, State::Serving)
      << agent.state("waiting").detail << agent.log();
  EXPECT_EQ(agent.state("waiting").starts, 1u);
  ASSERT_NE(agent->daemon("waiting"), nullptr);
  EXPECT_NE(agent.state("waiting").attachedTo.find(late), std::string::npos)
      << agent.state("waiting").attachedTo;
  agent.step(1h);
  for (const std::string &name : {"waiting", "serving"})
    EXPECT_GE(agent.state(name).cyclesByOutcome[core::CycleOutcome::Installed], 1u) << name << "\n"
                                                                                    << agent.log();
}

// One socket for every program: an update names its program and reaches
// that program's next packet only; an update naming none, or one the agent
// does not run, is refused naming the programs it runs; status lists every
// program with its state.
TEST(Agent, TheControlSocketRoutesRequestsByProgramName) {
  TwoVeths scene("agentsocket");
  auto &[one, two, pins] = scene;
  runtime::AgentOptions options;
  options.socketPath = "/tmp/morpheus-test-agentsocket-" + std::to_string(getpid()) + ".sock";
  auto removeSocket = llvm::make_scope_exit([&] {
    unlink(options.socketPath.c_str());
    unlink((options.socketPath + ".lock").c_str());
  });
  AgentProgram absent = policyFwdOn("absent", one, pins);
  absent.options.ifaces = {"mpnone" + std::to_string(getpid() % 100000)};
  AgentUnderTest agent;
  ASSERT_TRUE(agent.start(
      {policyFwdOn("first", one, pins), policyFwdOn("second", two, pins), absent}, options));
  configurePolicyFwd(agent.daemon("first"), ACTION_PASS);
  configurePolicyFwd(agent.daemon("second"), ACTION_PASS);
  agent.step(1h);
  ASSERT_TRUE(lastCycleInstalled(agent.state("first"))) << agent.log();
  ASSERT_TRUE(lastCycleInstalled(agent.state("second"))) << agent.log();
  uint64_t secondCycle = agent.state("second").lastCycle->cycle;
  auto ask = [&](const nlohmann::json &request) {
    return askControlSocket(options.socketPath, request);
  };
  nlohmann::json dropByDefault = {
      {"op", "update"}, {"map", "config"}, {"key", "00000000"}, {"value", "02000000 01000000"}};

  nlohmann::json request = dropByDefault;
  request["program"] = "first";
  nlohmann::json reply = ask(request);
  ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_EQ(reply["version"], agent.daemon("first").optimizer().guard().version());
  EXPECT_EQ(runOnce(hookFd(one).fd, unmatchedPacket()).verdict, uint32_t(XDP_DROP))
      << "the next packet of the program named sees the update";
  EXPECT_EQ(runOnce(hookFd(two).fd, unmatchedPacket()).verdict, uint32_t(XDP_PASS))
      << "the other program's does not";
  EXPECT_EQ(agent.step(1ms), 1u) << "the update asked for a cycle of its program only";
  EXPECT_TRUE(lastCycleInstalled(agent.state("first")));
  EXPECT_EQ(agent.state("second").lastCycle->cycle, secondCycle);
  EXPECT_EQ(runOnce(hookFd(one).fd, unmatchedPacket()).verdict, uint32_t(XDP_DROP));

  auto expectRefusedNamingThePrograms = [&](const nlohmann::json &request, const char *why) {
    nlohmann::json refused = ask(request);
    EXPECT_FALSE(refused.value("ok", true)) << why << ": " << refused.dump();
    std::string error = refused.value("error", "");
    EXPECT_NE(error.find("first, second"), std::string::npos) << why << ": " << error;
    return error;
  };
  EXPECT_NE(expectRefusedNamingThePrograms(dropByDefault, "no program named")
                .find("\"program\": missing"),
            std::string::npos);
  request["program"] = "third";
  EXPECT_NE(
      expectRefusedNamingThePrograms(request, "an unknown program").find("no program 'third'"),
      std::string::npos);
  request["program"] = "absent";
  nlohmann::json toFailed = ask(request);
  EXPECT_FALSE(toFailed.value("ok", true)) << toFailed.dump();
  EXPECT_NE(toFailed.value("error", "").find("program 'absent' is failed"), std::string::npos)
      << toFailed.dump();
  EXPECT_EQ(runOnce(hookFd(two).fd, unmatchedPacket()).verdict, uint32_t(XDP_PASS))
      << "refused requests changed nothing";

  nlohmann::json status = ask({{"op", "status"}});
  ASSERT_TRUE(status.value("ok", false)) << status.dump();
  std::map<std::string, std::string> states;
  for (const nlohmann::json &program : status["status"]["programs"])
    states[program["name"].get<std::string>()] = program["state"].get<std::string>();
  EXPECT_EQ(states, (std::map<std::string, std::string>{
                        {"absent", "failed"}, {"first", "serving"}, {"second", "serving"}}))
      << status.dump();
  nlohmann::json secondStatus = ask({{"op", "status"}, {"program", "second"}});
  ASSERT_TRUE(secondStatus.value("ok", false)) << secondStatus.dump();
  EXPECT_EQ(secondStatus["status"]["name"], "second");
  EXPECT_EQ(secondStatus["status"]["state"], "serving");
}

} // namespace
} // namespace morpheus::testing
