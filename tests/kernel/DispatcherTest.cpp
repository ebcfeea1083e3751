// Adopting a program that runs in a slot of a multi-program XDP dispatcher
// (libxdp's protocol: backend/bpf/XdpDispatcher, Adoption's slot hook),
// and giving back what xdp-loader attached.
//
// Every step the kernel allows runs here. libxdp's own dispatchers need
// extension programs, which some kernels refuse (this machine's: EPERM);
// so the revision machinery (reading a dispatcher's configuration and
// slots from its pins under the lock, a new revision with one slot's
// program replaced and every other carried over, the atomic swap, the old
// revision dismantled) runs on a dispatcher shaped as libxdp's whose slots
// are tail calls (slot_dispatcher.bpf.c, SlotDispatcher.h), under traffic,
// counting every packet. The test that needs extensions runs where the
// kernel loads them and otherwise skips naming the probe's errno; the
// probe's own test asserts why it is refused here, so nothing is skipped
// without the reason being checked.
#include "AdoptionOwners.h"
#include "SlotCounters.h"
#include "SlotDispatcher.h"
#include "backend/bpf/Adoption.h"
#include "backend/bpf/Extension.h"
#include "backend/bpf/XdpDispatcher.h"
#include "runtime/Optimizer.h"

#include <llvm/ADT/ScopeExit.h>
#include <llvm/Testing/Support/Error.h>

#include <atomic>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <thread>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

// The dispatcher revisions pinned under `state`: their directories.
std::vector<std::string> revisionsPinned(const std::string &state) {
  std::vector<std::string> found;
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(state, ec))
    if (entry.path().filename().string().starts_with("dispatch-"))
      found.push_back(entry.path().filename().string());
  return found;
}

TEST(Dispatcher, ASlotOfADispatcherIsAdoptedSwappedRebuiltAndGivenBackUnderTraffic) {
  std::string tag(sweptFirst("dispslot"));
  VethPair veth(tag);
  PinDir pins(tag);
  auto binding = std::make_shared<TailCallSlots>(pins.path() + "/xdp");
  Owner owner; // policy_fwd: passes by default, drops UDP to 10.0.0.1:80
  SlotCounters counters;
  ASSERT_GE(owner.program, 0);
  ASSERT_GE(counters.in, 0);
  uint32_t ownerId = programIdOf(owner.program);

  // Three slots as a loader following the protocol attaches them: count,
  // the owner's program (its passed packets go on), count.
  auto first =
      attachFirstRevision(*binding, {{counters.in, 10}, {owner.program, 20}, {counters.out, 30}},
                          veth.ifB(), veth.nsB());
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  std::set<uint32_t> revisions{programIdOf(first->get())};
  ASSERT_EQ(hookProgram(veth), programIdOf(first->get()));

  // What the dispatcher answers before anything is adopted.
  std::vector<Bytes> packets = samplePackets();
  std::vector<RunResult> before;
  for (const Bytes &packet : packets)
    before.push_back(runOnce(first->get(), packet));
  EXPECT_EQ(before[0].verdict, uint32_t(XDP_DROP)) << "premise: the owner drops the first";
  auto answersAsBefore = [&](const std::string &when) {
    Fd hook(bpf_prog_get_fd_by_id(hookProgram(veth)));
    ASSERT_GE(hook.fd, 0) << when;
    for (size_t i = 0; i < packets.size(); ++i)
      EXPECT_EQ(runOnce(hook.fd, packets[i]), before[i]) << when << ": sample " << i;
  };

  bpf::DispatcherHook hook(binding, veth.ifB(), veth.nsB());
  std::string adoptPins = pins.path() + "/adopt";
  std::unique_ptr<bpf::Adoption> adoption;
  std::unique_ptr<runtime::Optimizer> opt;
  unsigned installs = 0;
  auto cycles = [&](unsigned count) {
    for (unsigned i = 0; i < count; ++i) {
      // A policy no frame hits changes every other cycle: the guard trips
      // under traffic too.
      if (i % 2)
        owner.policy(0x0a000009, uint16_t(9000 + i), ACTION_DROP);
      core::CycleReport report = opt->runCycle(/*force=*/true);
      EXPECT_NE(report.outcome, core::CycleOutcome::Failed) << report.describe();
      installs += report.installed();
    }
  };

  // Phase 1, under traffic: adopt (a revision whose slot 1 holds the
  // trampoline), swap versions, swap in another revision, swap versions.
  Counted start = countedBy(counters, owner);
  {
    DispatcherTraffic traffic(veth, halfDroppedFlows());
    std::this_thread::sleep_for(100ms);
    auto adopted = bpf::Adoption::adoptSlot(
        std::make_unique<bpf::DispatcherHook>(binding, veth.ifB(), veth.nsB()), ownerId, adoptPins);
    ASSERT_THAT_EXPECTED(adopted, llvm::Succeeded());
    adoption = std::move(*adopted);
    EXPECT_NE(adoption->describe().find("slot 1 (priority 20) of the XDP dispatcher"),
              std::string::npos)
        << adoption->describe();
    runtime::OptimizerOptions options;
    options.pinDir = adoptPins;
    options.adoption = adoption.get();
    auto created = runtime::Optimizer::create(sourcePath("examples/policy_fwd.bpf.c"), options);
    ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
    opt = std::move(*created);
    ASSERT_THAT_ERROR(adoption->takeHook(opt->originalFd()), llvm::Succeeded());
    opt->install = [&](int fd) { return adoption->serve(fd); };
    revisions.insert(hookProgram(veth));
    cycles(4);
    ASSERT_THAT_ERROR(hook.replace(adoption->trampolineId(), adoption->trampolineFd()),
                      llvm::Succeeded());
    revisions.insert(hookProgram(veth));
    cycles(4);
    uint64_t sent = traffic.stop();
    std::printf("phase 1: %llu packets, %u versions installed, %zu revisions\n",
                (unsigned long long)sent, installs, revisions.size());
    expectEveryPacketCounted(counters, owner, start, sent, "adopted");
  }
  EXPECT_GE(installs, 3u) << "versions swapped while traffic flowed";
  EXPECT_EQ(revisions.size(), 3u) << "the first revision, the adopting one, the rebuilt one";
  auto read = hook.read();
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  ASSERT_TRUE(*read);
  ASSERT_EQ((*read)->slots.size(), 3u);
  EXPECT_EQ((*read)->slots[1].programId, adoption->trampolineId()) << "slot 1 runs the trampoline";
  EXPECT_EQ((*read)->slots[0].programId, programIdOf(counters.in)) << "slot 0 carried over";
  EXPECT_EQ((*read)->slots[2].programId, programIdOf(counters.out)) << "slot 2 carried over";
  EXPECT_EQ((*read)->config.runPriorities[1], 20u);
  EXPECT_EQ((*read)->config.chainCallActions[1],
            (1u << XDP_PASS) | (1u << bpf::DispatcherContinue));
  EXPECT_EQ(adoption->servedProgramId(), programIdOf(opt->activeFd()))
      << "the installed version serves";
  EXPECT_EQ(revisionsPinned(binding->stateDirectory()).size(), 1u)
      << "the replaced revisions are unpinned";
  answersAsBefore("adopted, specialized");

  // Phase 2, under traffic: give the slot back.
  start = countedBy(counters, owner);
  {
    DispatcherTraffic traffic(veth, halfDroppedFlows());
    std::this_thread::sleep_for(100ms);
    cycles(1);
    ASSERT_THAT_ERROR(adoption->restore(), llvm::Succeeded());
    revisions.insert(hookProgram(veth));
    std::this_thread::sleep_for(200ms);
    expectEveryPacketCounted(counters, owner, start, traffic.stop(), "handed back");
  }
  EXPECT_EQ(revisions.size(), 4u);
  read = hook.read();
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  ASSERT_TRUE(*read);
  EXPECT_EQ((*read)->slots[1].programId, ownerId) << "the owner's program is back in its slot";
  EXPECT_EQ(revisionsPinned(binding->stateDirectory()).size(), 1u);
  EXPECT_NE(access((adoptPins + "/owner_program").c_str(), F_OK), 0)
      << "the owner array's pin is removed";
  answersAsBefore("handed back");
  opt.reset();
  adoption.reset();
}

// A program named by interface and priority or name: the selector finds
// its slot, and a wrong one lists the slots there.
TEST(Dispatcher, ASlotIsFoundByItsProgramAndOtherwiseTheSlotsAreListed) {
  std::string tag(sweptFirst("dispfind"));
  VethPair veth(tag);
  PinDir pins(tag);
  auto binding = std::make_shared<TailCallSlots>(pins.path() + "/xdp");
  Owner owner;
  SlotCounters counters;
  auto first = attachFirstRevision(*binding, {{counters.in, 10}, {owner.program, 20}}, veth.ifB(),
                                   veth.nsB());
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  auto adopted = bpf::Adoption::adoptSlot(
      std::make_unique<bpf::DispatcherHook>(binding, veth.ifB(), veth.nsB()),
      programIdOf(counters.out), pins.path() + "/adopt");
  ASSERT_FALSE(bool(adopted));
  std::string message = llvm::toString(adopted.takeError());
  EXPECT_NE(message.find("slot 0: 'count_in'"), std::string::npos) << message;
  EXPECT_NE(message.find("slot 1: 'policy_fwd' (id " + std::to_string(programIdOf(owner.program)) +
                         "), priority 20, goes on after XDP_PASS"),
            std::string::npos)
      << message;
}

// A libxdp slot named by interface and program, or a program by id that
// no link runs and no libxdp slot holds: refused before anything is
// touched, saying why (here, the kernel refuses extensions).
TEST(Dispatcher, ASlotTargetIsRefusedWithItsReasonAndNothingIsTouched) {
  std::string tag(sweptFirst("disptarget"));
  VethPair veth(tag);
  PinDir pins(tag);
  Owner owner;
  owner.attachNetlink(veth);
  uint32_t ownerId = programIdOf(owner.program);
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  runtime::DaemonOptions options = adoptOptions(veth, pins);
  options.adopt = veth.ifB() + "/policy_fwd";
  auto bySlot =
      runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
  ASSERT_FALSE(bool(bySlot));
  std::string message = llvm::toString(bySlot.takeError());
  EXPECT_NE(message.find(bpf::probeExtensions().allowed()
                             ? "runs no XDP dispatcher"
                             : "adopting a program in a libxdp dispatcher slot needs extension "
                               "programs"),
            std::string::npos)
      << message;
  options.adopt = std::to_string(ownerId);
  auto byId = runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
  ASSERT_FALSE(bool(byId));
  message = llvm::toString(byId.takeError());
  EXPECT_NE(message.find("no XDP or tcx link runs program " + std::to_string(ownerId) +
                         ", nor does a slot of a libxdp dispatcher"),
            std::string::npos)
      << message;
  EXPECT_EQ(hookProgram(veth), ownerId) << "the hook untouched";
}

// libxdp's dispatcher object, loaded as a revision: the configuration
// Morpheus writes is the one it reads back from the kernel, and with no
// extension in its slots (each stub answers "go on") a packet passes.
TEST(Dispatcher, LibxdpsDispatcherObjectRunsTheConfigurationARevisionIsGiven) {
  bpf::DispatcherConfig config;
  config.slotsEnabled = 3;
  for (unsigned slot = 0; slot < 3; ++slot) {
    config.chainCallActions[slot] = (1u << XDP_PASS) | (1u << bpf::DispatcherContinue);
    config.runPriorities[slot] = 10 * (slot + 1);
  }
  auto revision = bpf::LibxdpSlots().loadDispatcher(config);
  ASSERT_THAT_EXPECTED(revision, llvm::Succeeded());
  auto read = bpf::dispatcherConfigOf(programIdOf(revision->get()));
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  ASSERT_TRUE(*read) << "recognised as a dispatcher";
  EXPECT_EQ(**read, config);
  EXPECT_EQ(runOnce(revision->get(), buildPacket({})).verdict, uint32_t(XDP_PASS));

  // A revision is built only of the version it replaces.
  config.version = 3;
  auto other = bpf::LibxdpSlots().loadDispatcher(config);
  ASSERT_FALSE(bool(other));
  std::string message = llvm::toString(other.takeError());
  EXPECT_NE(message.find("the interface runs version 3"), std::string::npos) << message;
}

// The kernel's lockdown mode, read where securityfs is mounted in a mount
// namespace of a child's own ("" if it cannot be).
std::string lockdownMode() {
  FILE *pipe = popen("unshare --mount sh -c 'mount -t securityfs none /sys/kernel/security && "
                     "cat /sys/kernel/security/lockdown' 2>/dev/null",
                     "r");
  if (!pipe)
    return "";
  char line[256] = {};
  std::string text = fgets(line, sizeof(line), pipe) ? line : "";
  pclose(pipe);
  size_t open = text.find('['), close = text.find(']');
  return open != std::string::npos && close > open ? text.substr(open + 1, close - open - 1) : "";
}

// Why the test below skips here: the probe's answer, checked. On this
// machine's kernel (locked down, integrity) an extension is refused with
// EPERM before the verifier runs, whatever the capabilities; where the
// kernel loads extensions the test below runs instead.
TEST(Dispatcher, TheExtensionProbeSaysWhyThisKernelRefusesThem) {
  const bpf::ExtensionSupport &support = bpf::probeExtensions();
  if (support.allowed()) {
    EXPECT_EQ(support.reason, "");
    return; // AdoptsAProgramInALibxdpDispatcherSlot runs
  }
  EXPECT_EQ(support.error, EPERM) << support.reason;
  std::string mode = lockdownMode();
  EXPECT_TRUE(mode == "integrity" || mode == "confidentiality")
      << "a kernel refusing extensions with EPERM is locked down here; lockdown mode '" << mode
      << "'; probe: " << support.reason;
  EXPECT_NE(support.reason.find("before the verifier ran"), std::string::npos) << support.reason;
  Error refused = bpf::requireExtensions("adopting a program in a libxdp dispatcher slot");
  std::string message = llvm::toString(std::move(refused));
  EXPECT_NE(message.find("adopting a program in a libxdp dispatcher slot needs extension "
                         "programs, and the kernel refuses extension (freplace) programs"),
            std::string::npos)
      << message;
}

// An object file of `bytes`, removed when the test ends.
class ObjectFile {
public:
  ObjectFile(const std::string &name, const unsigned char *start, const unsigned char *end)
      : path("/tmp/morpheus-test-" + name + "-" + std::to_string(getpid()) + ".o") {
    std::ofstream file(path, std::ios::binary);
    file.write(reinterpret_cast<const char *>(start), end - start);
  }
  ~ObjectFile() { unlink(path.c_str()); }
  const std::string path;
};

// The output and exit status of `command` (stderr included).
std::pair<int, std::string> shell(const std::string &command) {
  std::string output;
  FILE *pipe = popen((command + " 2>&1").c_str(), "r");
  char buffer[512];
  while (pipe && fgets(buffer, sizeof(buffer), pipe))
    output += buffer;
  int status = pipe ? pclose(pipe) : -1;
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

// Where the kernel loads extensions: xdp-loader builds a real libxdp
// dispatcher of two programs; `run --adopt IFACE/policy_fwd` puts the
// trampoline in policy_fwd's slot through a new revision, the specialized
// version serves there, and stopping puts policy_fwd back so that
// xdp-loader lists it and unloads everything.
TEST(Dispatcher, AdoptsAProgramInALibxdpDispatcherSlotAndGivesItBack) {
  const bpf::ExtensionSupport &support = bpf::probeExtensions();
  if (!support.allowed())
    GTEST_SKIP() << "the kernel refuses extension programs (errno " << support.error << ", "
                 << strerrorname_np(support.error) << "): " << support.reason;
  std::string tag(sweptFirst("displibxdp"));
  VethPair veth(tag);
  PinDir pins(tag);
  ObjectFile fwd("displibxdp-fwd", policy_fwd_owner_start, policy_fwd_owner_end);
  ObjectFile counting("displibxdp-count", slot_counters_bpf_start, slot_counters_bpf_end);
  std::string in = "ip netns exec " + veth.nsB() + " ";
  auto unloadAll = llvm::make_scope_exit([&] { shell(in + "xdp-loader unload -a " + veth.ifB()); });
  auto [loaded, loadOutput] = shell(in + "xdp-loader load -m skb " + veth.ifB() + " " + fwd.path);
  ASSERT_EQ(loaded, 0) << loadOutput;
  auto [added, addOutput] =
      shell(in + "xdp-loader load -m skb -n count_in " + veth.ifB() + " " + counting.path);
  ASSERT_EQ(added, 0) << addOutput;
  bpf::DispatcherHook hook(std::make_shared<bpf::LibxdpSlots>(), veth.ifB(), veth.nsB());
  auto read = hook.read();
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  ASSERT_TRUE(*read) << "xdp-loader attached a dispatcher";
  ASSERT_EQ((*read)->slots.size(), 2u);
  const bpf::DispatcherSlot *fwdSlot = nullptr;
  for (const bpf::DispatcherSlot &slot : (*read)->slots)
    if (slot.name == "policy_fwd")
      fwdSlot = &slot;
  ASSERT_TRUE(fwdSlot);
  uint32_t ownerId = fwdSlot->programId;
  std::vector<RunResult> before;
  for (const Bytes &packet : samplePackets())
    before.push_back(runOnce((*read)->program.get(), packet));

  runtime::DaemonOptions options;
  options.adopt = veth.ifB() + "/policy_fwd";
  options.netns = veth.nsB();
  options.optimizer.pinDir = pins.path() + "/adopt";
  options.onExit = runtime::OnExit::KeepServing;
  options.quiet = true;
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  {
    auto started =
        runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
    ASSERT_THAT_EXPECTED(started, llvm::Succeeded());
    std::optional<core::CycleReport> cycle = (*started)->step(runtime::Daemon::Clock::now() + 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    auto adopted = hook.read();
    ASSERT_THAT_EXPECTED(adopted, llvm::Succeeded());
    ASSERT_TRUE(*adopted);
    EXPECT_FALSE((*adopted)->slotHolding(ownerId)) << "the slot runs the trampoline";
    std::vector<Bytes> packets = samplePackets();
    for (size_t i = 0; i < packets.size(); ++i)
      EXPECT_EQ(runOnce((*adopted)->program.get(), packets[i]), before[i]) << "sample " << i;
    auto [listed, status] = shell(in + "xdp-loader status " + veth.ifB());
    EXPECT_EQ(listed, 0) << status;
    EXPECT_NE(status.find("morpheus_tramp"), std::string::npos) << status;
  }
  auto back = hook.read();
  ASSERT_THAT_EXPECTED(back, llvm::Succeeded());
  ASSERT_TRUE(*back);
  EXPECT_TRUE((*back)->slotHolding(ownerId)) << "policy_fwd is back in its slot\n" << problems;
  auto [listed, status] = shell(in + "xdp-loader status " + veth.ifB());
  EXPECT_EQ(listed, 0) << status;
  EXPECT_NE(status.find("policy_fwd"), std::string::npos) << status;
  auto [unloaded, unloadOutput] = shell(in + "xdp-loader unload -a " + veth.ifB());
  EXPECT_EQ(unloaded, 0) << unloadOutput;
  EXPECT_EQ(hookProgram(veth), 0u) << "xdp-loader unloaded everything";
}

// xdp-loader's single-program fallback (what it does where the kernel
// refuses its dispatcher): adopted by the interface, then given back so
// that xdp-loader still lists its program and unloads it.
TEST(Dispatcher, XdpLoadersProgramGivenBackIsStillListedAndUnloadedByXdpLoader) {
  std::string tag(sweptFirst("dispxdploader"));
  VethPair veth(tag);
  PinDir pins(tag);
  ObjectFile fwd("dispxdploader", policy_fwd_owner_start, policy_fwd_owner_end);
  std::string in = "ip netns exec " + veth.nsB() + " ";
  auto unloadAll = llvm::make_scope_exit([&] { shell(in + "xdp-loader unload -a " + veth.ifB()); });
  auto [loaded, loadOutput] = shell(in + "xdp-loader load -m skb " + veth.ifB() + " " + fwd.path);
  ASSERT_EQ(loaded, 0) << loadOutput;
  uint32_t loaderId = hookProgram(veth);
  ASSERT_NE(loaderId, 0u);
  std::string id = std::to_string(loaderId);
  auto [listedFirst, statusFirst] = shell(in + "xdp-loader status " + veth.ifB());
  ASSERT_NE(statusFirst.find("policy_fwd"), std::string::npos) << statusFirst;

  runtime::DaemonOptions options = adoptOptions(veth, pins);
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  {
    auto started =
        runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options, out, errors);
    ASSERT_THAT_EXPECTED(started, llvm::Succeeded());
    std::optional<core::CycleReport> cycle = (*started)->step(runtime::Daemon::Clock::now() + 1h);
    ASSERT_TRUE(cycle && cycle->installed()) << printed << problems;
    EXPECT_NE(hookProgram(veth), loaderId) << "the trampoline serves";
    auto [listed, status] = shell(in + "xdp-loader status " + veth.ifB());
    EXPECT_EQ(listed, 0) << status;
    EXPECT_NE(status.find("morpheus_tramp"), std::string::npos)
        << "xdp-loader lists what runs while adopted\n"
        << status;
  }
  EXPECT_EQ(hookProgram(veth), loaderId) << "xdp-loader's program is back\n" << problems;
  auto [listed, status] = shell(in + "xdp-loader status " + veth.ifB());
  EXPECT_EQ(listed, 0) << status;
  EXPECT_NE(status.find("policy_fwd"), std::string::npos) << status;
  EXPECT_NE(status.find(id), std::string::npos) << "listed with its own id " << id << "\n"
                                                << status;
  auto [unloaded, unloadOutput] = shell(in + "xdp-loader unload -a " + veth.ifB());
  EXPECT_EQ(unloaded, 0) << unloadOutput;
  EXPECT_EQ(hookProgram(veth), 0u) << "xdp-loader unloaded its program";
}

} // namespace
} // namespace morpheus::testing
