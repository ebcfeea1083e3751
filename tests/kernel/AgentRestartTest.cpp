// Restarting the node agent (`morpheus daemon`) under traffic: kill -9, or
// an upgrade with --take-over while the old agent runs, neither detaches
// nor slows a data plane, and no packet is lost. The agent runs two
// programs: policy_fwd loaded and attached by Morpheus on one veth, and
// policy_fwd adopted from an owner (a plain libbpf loader in this test,
// attached through a pinned XDP link) on another. Frames flow through both
// veths the whole time; every one must be counted by the program's own
// stats map (a packet dropped by a failed tail call, or sent while nothing
// is attached, is counted by nobody). A watcher records every program the
// loaded program's link runs: each must be a specialized version (one that
// checks the guard), so the data plane never went back to generic code.
// An adopted program whose maps are kept generic depends on nothing polled:
// its version serves on across the restart too (the trampoline's slot is
// watched and never empties); a polled one gives way to the owner's program
// between the agents.
#include "ChildProcess.h"
#include "KernelSupport.h"
#include "PolicyFwd.h"
#include "XdpHooks.h"
#include "netns/VethPair.h"
#include "support/Netns.h"
#include "trafficgen/LiveFrames.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <signal.h>

#include <gtest/gtest.h>
#include <llvm/Support/FormatVariadic.h>

#include <atomic>
#include <fstream>
#include <functional>
#include <mutex>
#include <thread>

extern "C" const unsigned char policy_fwd_owner_start[], policy_fwd_owner_end[];

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

constexpr uint32_t Flows = 8;

// Flow i hits a policy entry that drops it: every packet is counted as
// STAT_DROP by whichever version handles it.
std::vector<trafficgen::Flow> droppedFlows() {
  std::vector<trafficgen::Flow> flows;
  for (uint32_t i = 0; i < Flows; ++i)
    flows.push_back({0x0a0000c8, 0x0a000001 + i, 1000, uint16_t(80 + i), IPPROTO_UDP});
  return flows;
}

void configure(int configFd, int policyFd) {
  uint32_t zero = 0;
  struct config value = {CFG_POLICY_ENABLED, ACTION_PASS};
  ASSERT_EQ(bpf_map_update_elem(configFd, &zero, &value, BPF_ANY), 0);
  for (uint32_t i = 0; i < Flows; ++i) {
    policy_key key = policyKey(0x0a000001 + i, 80 + i, IPPROTO_UDP);
    policy_value drop = policyValue(ACTION_DROP, uint8_t(i));
    ASSERT_EQ(bpf_map_update_elem(policyFd, &key, &drop, BPF_ANY), 0);
  }
}

template <typename T> std::string hex(const T &value) {
  std::string text;
  const auto *bytes = reinterpret_cast<const uint8_t *>(&value);
  for (size_t i = 0; i < sizeof(T); ++i)
    text += llvm::formatv("{0:x-2}", bytes[i]).str();
  return text;
}

uint64_t counted(int statsFd) {
  uint64_t total = 0;
  for (uint64_t value : perCpuCounters(statsFd, STAT_MAX))
    total += value;
  return total;
}

// The owner of the adopted program: policy_fwd loaded by libbpf,
// configured, attached to the veth's B side through an XDP link pinned at
// `linkPin`.
class Owner {
public:
  Owner(const VethPair &veth, const std::string &linkPin) : pin(linkPin) {
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "lb_owner");
    obj = bpf_object__open_mem(policy_fwd_owner_start,
                               policy_fwd_owner_end - policy_fwd_owner_start, &opts);
    if (!obj || bpf_object__load(obj)) {
      ADD_FAILURE() << "the owner's libbpf load failed";
      return;
    }
    program = bpf_program__fd(bpf_object__find_program_by_name(obj, "policy_fwd"));
    configure(mapFd("config"), mapFd("policy"));
    EXPECT_FALSE(bool(netns::runInNetns(veth.nsB(), [&]() -> Error {
      LIBBPF_OPTS(bpf_link_create_opts, options);
      link = bpf_link_create(program, if_nametoindex(veth.ifB().c_str()), BPF_XDP, &options);
      if (link < 0)
        return makeSystemError(errno, "XDP link");
      return Error::success();
    })));
    EXPECT_EQ(bpf_obj_pin(link, pin.c_str()), 0);
  }
  ~Owner() {
    if (link >= 0)
      close(link);
    unlink(pin.c_str());
    bpf_object__close(obj);
  }
  int mapFd(const char *name) const {
    return bpf_map__fd(bpf_object__find_map_by_name(obj, name));
  }
  // What the owner's link runs: the trampoline once adopted.
  uint32_t linkProgram() const {
    bpf_link_info info = {};
    uint32_t length = sizeof(info);
    return bpf_obj_get_info_by_fd(link, &info, &length) ? 0u : info.prog_id;
  }

  int program = -1;

private:
  std::string pin;
  bpf_object *obj = nullptr;
  int link = -1;
};

// The link pinned at `pin` (its id) and the program it runs; zeros when
// there is none.
bpf_link_info linkAt(const std::string &pin) {
  Fd link(bpf_obj_get(pin.c_str()));
  bpf_link_info info = {};
  uint32_t length = sizeof(info);
  if (link.fd < 0 || bpf_obj_get_info_by_fd(link.fd, &info, &length))
    return {};
  return info;
}

uint32_t linkProgramAt(const std::string &pin) { return linkAt(pin).prog_id; }

// Whether program `id` is a specialized version: it checks the guard.
bool specialized(uint32_t id) {
  Fd program(bpf_prog_get_fd_by_id(id));
  if (program.fd < 0)
    return false;
  for (uint32_t mapId : mapIdsOf(program.fd)) {
    Fd map(bpf_map_get_fd_by_id(mapId));
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    if (map.fd >= 0 && bpf_obj_get_info_by_fd(map.fd, &info, &length) == 0 &&
        std::string(info.name) == "morpheus_guard")
      return true;
  }
  return false;
}

// Frames through both veths, in rounds, until stopped; what was sent.
class Traffic {
public:
  Traffic(const VethPair &loaded, const VethPair &adopted)
      : toLoaded(trafficgen::LiveFramesGenerator::create(
            trafficgen::acrossVeth(loaded, droppedFlows()))),
        toAdopted(trafficgen::LiveFramesGenerator::create(
            trafficgen::acrossVeth(adopted, droppedFlows()))),
        thread([this] {
          while (!done) {
            sentLoaded += toLoaded.send(2000).packetsSent;
            sentAdopted += toAdopted.send(2000).packetsSent;
          }
        }) {}
  ~Traffic() { stop(); }
  void stop() {
    done = true;
    if (thread.joinable())
      thread.join();
  }
  std::atomic<uint64_t> sentLoaded{0}, sentAdopted{0};

private:
  std::atomic<bool> done{false};
  trafficgen::LiveFramesGenerator toLoaded, toAdopted;
  std::thread thread;
};

// Every program a hook runs (a link, a trampoline's slot: what `running`
// says), in order, sampled every 200 us, and whether it was a specialized
// version (told while it exists).
class ProgramWatcher {
public:
  struct Seen {
    uint32_t id;
    bool specialized;
  };
  explicit ProgramWatcher(std::function<uint32_t()> running)
      : running(std::move(running)), thread([this] {
          while (!done) {
            uint32_t id = this->running();
            {
              std::lock_guard lock(mutex);
              if (seen.empty() || seen.back().id != id)
                seen.push_back({id, id != 0 && specialized(id)});
            }
            std::this_thread::sleep_for(200us);
          }
        }) {}
  ~ProgramWatcher() { stop(); }
  void stop() {
    done = true;
    if (thread.joinable())
      thread.join();
  }
  std::vector<Seen> programs() {
    std::lock_guard lock(mutex);
    return seen;
  }

private:
  std::function<uint32_t()> running;
  std::atomic<bool> done{false};
  std::mutex mutex;
  std::vector<Seen> seen;
  std::thread thread;
};

ProgramWatcher linkWatcher(const std::string &pin) {
  return ProgramWatcher([pin] { return linkProgramAt(pin); });
}

// Two veths, a pin directory, the owner, the configuration; all named
// after `tag` and this process, removed when the test ends. `adoptedPolicy`
// is more of the adopted program's configuration.
struct Scene {
  explicit Scene(const std::string &tag, const std::string &adoptedPolicy = "")
      : sweep(VethPair::sweepStale(tag)), loaded(tag), adopted(tag), pins(tag),
        owner(adopted, ownerLink()),
        socket("/tmp/morpheus-test-" + tag + "-" + std::to_string(getpid()) + ".sock"),
        config("/tmp/morpheus-test-" + tag + "-" + std::to_string(getpid()) + ".yaml") {
    std::ofstream file(config);
    file << "socket: " << socket << "\n"
         << "programs:\n"
         << "  - name: loaded\n"
         << "    source: " << sourcePath("examples/policy_fwd.bpf.c") << "\n"
         << "    ifaces: [" << loaded.ifB() << "]\n"
         << "    netns: " << loaded.nsB() << "\n"

         << "    pin_dir: " << loadedPins() << "\n"
         << "    period: 100ms\n"
         << "    quiet: true\n"
         << "  - name: adopted\n"
         << "    source: " << sourcePath("examples/policy_fwd.bpf.c") << "\n"
         << "    adopt: " << ownerLink() << "\n"
         << "    pin_dir: " << pins.path() << "/adopted\n"
         << "    period: 100ms\n"
         << "    quiet: true\n"
         << adoptedPolicy;
  }
  ~Scene() {
    unlink(config.c_str());
    unlink(socket.c_str());
    unlink((socket + ".lock").c_str());
  }
  std::string loadedPins() const { return pins.path() + "/loaded"; }
  std::string loadedLink() const { return loadedPins() + "/link_xdp_" + loaded.ifB(); }
  std::string ownerArray() const { return pins.path() + "/adopted/owner_program"; }
  std::string servedArray() const { return pins.path() + "/adopted/served_version"; }
  std::string ownerLink() const { return pins.path() + "/owner_link"; }

  std::vector<std::string> agent(bool takeOver = false) const {
    std::vector<std::string> argv = {binPath("morpheus"), "daemon", "--config", config};
    if (takeOver)
      argv.push_back("--take-over");
    return argv;
  }
  // Both programs serve a version the agent installed.
  bool bothSpecialized() const {
    nlohmann::json reply = askControlSocket(socket, {{"op", "status"}});
    if (!reply.value("ok", false))
      return false;
    for (const nlohmann::json &program : reply["status"]["programs"])
      if (program.value("installed_version", uint64_t(0)) == 0)
        return false;
    return reply["status"]["programs"].size() == 2;
  }

  unsigned sweep;
  VethPair loaded, adopted;
  PinDir pins;
  Owner owner;
  std::string socket, config;
};

// The loaded program's maps, configured through their pins once the agent
// made them (a write Morpheus polls), and its counters.
struct LoadedMaps {
  explicit LoadedMaps(const std::string &pinDir)
      : config(bpf_obj_get((pinDir + "/config").c_str())),
        policy(bpf_obj_get((pinDir + "/policy").c_str())),
        stats(bpf_obj_get((pinDir + "/stats").c_str())) {}
  Fd config, policy, stats;
};

// Starts the agent and waits until both programs run a specialized
// version; the loaded program's maps then configured.
void startServing(Scene &scene, ChildProcess &agent, std::optional<LoadedMaps> &maps) {
  ASSERT_TRUE(waitFor([&] { return !agent.alive() || access(scene.loadedLink().c_str(), F_OK) == 0; },
                      30s) && agent.alive())
      << agent.log();
  maps.emplace(scene.loadedPins());
  ASSERT_GE(maps->stats.fd, 0);
  configure(maps->config.fd, maps->policy.fd);
  ASSERT_TRUE(waitFor([&] { return !agent.alive() || scene.bothSpecialized(); }, 30s) &&
              agent.alive())
      << agent.log();
  // The configuration written above is polled: settled once the link's
  // version stays the same for a second (ten periods).
  uint32_t last = 0;
  auto since = std::chrono::steady_clock::now();
  ASSERT_TRUE(waitFor([&] {
    uint32_t now = linkProgramAt(scene.loadedLink());
    if (now != last) {
      last = now;
      since = std::chrono::steady_clock::now();
    }
    return std::chrono::steady_clock::now() - since > 1s;
  }, 30s)) << agent.log();
}

// What the checks after a restart compare.
struct Serving {
  uint32_t loadedLinkId = 0, loadedProgram = 0, trampoline = 0, adoptedVersion = 0;
};

Serving serving(const Scene &scene) {
  Serving now;
  now.loadedLinkId = linkAt(scene.loadedLink()).id;
  now.loadedProgram = linkProgramAt(scene.loadedLink());
  now.trampoline = scene.owner.linkProgram();
  now.adoptedVersion = servedThrough(now.trampoline, scene.ownerArray());
  return now;
}

// The new agent took the links over: the same link and the same
// trampoline (no second attachment: the hook runs what the link runs), and
// both programs re-specialized.
void expectTakenOver(const Scene &scene, const Serving &before, const std::string &log) {
  Serving after = serving(scene);
  EXPECT_EQ(after.loadedLinkId, before.loadedLinkId) << "the same link, taken over\n" << log;
  EXPECT_EQ(hookProgram(scene.loaded), after.loadedProgram)
      << "one program on the hook, the link's";
  EXPECT_NE(after.loadedProgram, before.loadedProgram) << "re-specialized by the new agent";
  EXPECT_TRUE(specialized(after.loadedProgram));
  EXPECT_EQ(after.trampoline, before.trampoline) << "the same trampoline, re-adopted";
  EXPECT_EQ(hookProgram(scene.adopted), after.trampoline) << "one program on the adopted hook";
  EXPECT_NE(after.adoptedVersion, 0u) << "the adopted program re-specialized";
  EXPECT_NE(after.adoptedVersion, before.adoptedVersion);
}

// Every packet sent was counted (as dropped, its policy's answer) by the
// loaded program's versions and by the adopted one's or the owner's.
void expectNoPacketLost(Traffic &traffic, const Scene &scene, const LoadedMaps &maps) {
  traffic.stop();
  // Frames sent are handled by the time the send returns (generic XDP runs
  // in the sender's context); a moment more for safety.
  std::this_thread::sleep_for(100ms);
  EXPECT_GT(traffic.sentLoaded.load(), 0u);
  EXPECT_EQ(counted(maps.stats.fd), traffic.sentLoaded.load()) << "loaded program lost packets";
  EXPECT_EQ(perCpuCounters(maps.stats.fd, STAT_MAX)[STAT_DROP], traffic.sentLoaded.load());
  EXPECT_EQ(counted(scene.owner.mapFd("stats")), traffic.sentAdopted.load())
      << "adopted program lost packets";
}

// The loaded program's link ran nothing but specialized versions.
void expectAlwaysSpecialized(ProgramWatcher &watcher, uint32_t first) {
  watcher.stop();
  std::vector<ProgramWatcher::Seen> seen = watcher.programs();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().id, first);
  for (const ProgramWatcher::Seen &program : seen)
    EXPECT_TRUE(program.specialized)
        << "the link ran program " << program.id << ", not a specialized version";
  EXPECT_GE(seen.size(), 2u) << "the new agent installed its own version";
}

// The owner's link ran the trampoline all along: never handed back to the
// owner's program, never detached. (Between two agents the trampoline's
// Morpheus array is empty and the owner's program serves through it: an
// adopted version is held by its process alone.)
void expectTrampolineThroughout(ProgramWatcher &watcher, uint32_t trampoline) {
  watcher.stop();
  for (const ProgramWatcher::Seen &program : watcher.programs())
    EXPECT_EQ(program.id, trampoline) << "the adopted hook left its trampoline";
}

// The next agent, started on the same configuration: once both programs
// run its versions, every check above; then it stops cleanly (`slot`, if
// given, stopped before it, with the other watchers).
void expectNextAgentTookOver(const Scene &scene, ChildProcess &next, const Serving &before,
                             Traffic &traffic, const LoadedMaps &maps, ProgramWatcher &watcher,
                             ProgramWatcher &adoptedHook, ProgramWatcher *slot = nullptr) {
  ASSERT_TRUE(waitFor([&] {
    return !next.alive() || (scene.bothSpecialized() &&
                             linkProgramAt(scene.loadedLink()) != before.loadedProgram);
  }, 30s) && next.alive())
      << next.log();
  std::this_thread::sleep_for(300ms);
  expectTakenOver(scene, before, next.log());
  EXPECT_NE(next.log().find("serves on until this run's first cycle"), std::string::npos)
      << next.log();
  expectNoPacketLost(traffic, scene, maps);
  expectAlwaysSpecialized(watcher, before.loadedProgram);
  expectTrampolineThroughout(adoptedHook, before.trampoline);
  if (slot)
    slot->stop();
  EXPECT_TRUE(next.stop()) << next.log();
}

TEST(AgentRestart, KillNineThenANewAgentTakesOverWithNoPacketLostOrGenericCode) {
  Scene scene("agentkill");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  std::optional<ChildProcess> first(std::in_place, "agentkill", scene.agent());
  startServing(scene, *first, maps);
  if (HasFatalFailure())
    return;
  Serving before = serving(scene);
  ASSERT_TRUE(specialized(before.loadedProgram));
  ASSERT_NE(before.adoptedVersion, 0u);
  Traffic traffic(scene.loaded, scene.adopted);
  ProgramWatcher watcher = linkWatcher(scene.loadedLink());
  ProgramWatcher adoptedHook = linkWatcher(scene.ownerLink());
  std::this_thread::sleep_for(300ms);

  kill(first->pid(), SIGKILL);
  EXPECT_FALSE(first->wait(10s)) << "killed, not exited";
  first.reset();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(linkProgramAt(scene.loadedLink()), before.loadedProgram)
      << "the specialized version serves on after kill -9";
  EXPECT_EQ(scene.owner.linkProgram(), before.trampoline) << "the trampoline stays on the hook";
  EXPECT_EQ(servedThrough(before.trampoline, scene.ownerArray()), 0u)
      << "the adopted version depends on maps the owner writes, which nobody polls now: the "
         "owner's program serves";
  // An update through Morpheus with no agent running (`morpheus map`
  // bumps the pinned guard): the version left serving falls back to the
  // original through its fallback array, which must still hold it (an
  // empty one answers XDP_ABORTED: packets nobody counts).
  ChildProcess update("agentkill-map",
                      {binPath("morpheus"), "map", "update", scene.loadedPins() + "/policy",
                       hex(policyKey(0x0a000001, 80, IPPROTO_UDP)),
                       hex(policyValue(ACTION_DROP, 100))});
  std::optional<int> updated = update.wait(20s);
  ASSERT_TRUE(updated && *updated == 0) << update.log();
  std::this_thread::sleep_for(300ms);

  ChildProcess second("agentkill-again", scene.agent());
  expectNextAgentTookOver(scene, second, before, traffic, *maps, watcher, adoptedHook);
}

TEST(AgentRestart, TakeOverWhileTheOldAgentRunsKeepsTheSpecializedVersionServing) {
  Scene scene("agentup");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  ChildProcess first("agentup", scene.agent());
  startServing(scene, first, maps);
  if (HasFatalFailure())
    return;
  Serving before = serving(scene);
  ASSERT_TRUE(specialized(before.loadedProgram));
  Traffic traffic(scene.loaded, scene.adopted);
  ProgramWatcher watcher = linkWatcher(scene.loadedLink());
  ProgramWatcher adoptedHook = linkWatcher(scene.ownerLink());
  std::this_thread::sleep_for(300ms);

  ChildProcess second("agentup-next", scene.agent(/*takeOver=*/true));
  std::optional<int> status = first.wait(60s);
  ASSERT_TRUE(status) << "the old agent did not exit\n" << first.log();
  EXPECT_EQ(*status, 0) << first.log();
  EXPECT_NE(first.log().find("agent: handed over; exiting"), std::string::npos) << first.log();
  EXPECT_NE(first.log().find("the running version stays attached for the next Morpheus"),
            std::string::npos)
      << first.log();
  expectNextAgentTookOver(scene, second, before, traffic, *maps, watcher, adoptedHook);
  EXPECT_NE(second.log().find("handed over; taking its programs over"), std::string::npos)
      << second.log();
}

// The adopted program with its maps kept generic (other_writers:
// keep-generic): its versions depend on nothing polled, so the agent pins
// the trampoline's Morpheus array (and the array the version falls back
// through) and the version serves on after kill -9 or a handover; the
// next agent lets it serve until its own first cycle replaces it. A
// watcher on the trampoline's slot sees the old agent's version, then the
// new one's, and never an empty slot (the owner's program serving).
void adoptedVersionServesAcross(const std::string &tag, bool killNine) {
  Scene scene(tag, "    other_writers: keep-generic\n");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  std::optional<ChildProcess> first(std::in_place, tag, scene.agent());
  startServing(scene, *first, maps);
  if (::testing::Test::HasFatalFailure())
    return;
  Serving before = serving(scene);
  ASSERT_NE(before.adoptedVersion, 0u);
  EXPECT_TRUE(waitFor([&] { return access(scene.servedArray().c_str(), F_OK) == 0; }, 5s))
      << "a version that depends on nothing polled is pinned to serve on\n"
      << first->log();
  nlohmann::json status =
      askControlSocket(scene.socket, {{"op", "status"}, {"program", "adopted"}});
  EXPECT_EQ(status["status"]["kept_generic"],
            nlohmann::json(std::vector<std::string>{"config", "policy", "stats"}))
      << status.dump();
  Traffic traffic(scene.loaded, scene.adopted);
  ProgramWatcher watcher = linkWatcher(scene.loadedLink());
  ProgramWatcher adoptedHook = linkWatcher(scene.ownerLink());
  ProgramWatcher slot([&] { return servedThrough(before.trampoline, scene.ownerArray()); });
  std::this_thread::sleep_for(300ms);

  std::optional<ChildProcess> second;
  if (killNine) {
    kill(first->pid(), SIGKILL);
    EXPECT_FALSE(first->wait(10s)) << "killed, not exited";
    std::this_thread::sleep_for(300ms);
    EXPECT_EQ(servedThrough(before.trampoline, scene.ownerArray()), before.adoptedVersion)
        << "the adopted version serves on after kill -9";
    second.emplace(tag + "-again", scene.agent());
  } else {
    second.emplace(tag + "-next", scene.agent(/*takeOver=*/true));
    std::optional<int> status = first->wait(60s);
    ASSERT_TRUE(status) << "the old agent did not exit\n" << first->log();
    EXPECT_EQ(*status, 0) << first->log();
    EXPECT_NE(first->log().find("the version it runs serves on (it depends on nothing polled)"),
              std::string::npos)
        << first->log();
  }
  first.reset();
  expectNextAgentTookOver(scene, *second, before, traffic, *maps, watcher, adoptedHook, &slot);
  EXPECT_NE(second->log().find(llvm::formatv("the version an earlier run left (program {0}) "
                                             "serves on until this run's first cycle",
                                             before.adoptedVersion)
                                   .str()),
            std::string::npos)
      << second->log();
  std::vector<ProgramWatcher::Seen> seen = slot.programs();
  ASSERT_FALSE(seen.empty());
  EXPECT_EQ(seen.front().id, before.adoptedVersion);
  EXPECT_GE(seen.size(), 2u) << "the new agent installed its own version";
  std::string served;
  for (const ProgramWatcher::Seen &program : seen)
    served += " " + std::to_string(program.id);
  for (const ProgramWatcher::Seen &program : seen)
    EXPECT_NE(program.id, 0u) << "the trampoline's slot emptied (the owner's program served): "
                              << served << "\n"
                              << second->log();
}

TEST(AgentRestart, AnAdoptedVersionThatDependsOnNothingPolledServesOnAfterKillNine) {
  adoptedVersionServesAcross("agentkeepkill", /*killNine=*/true);
}

TEST(AgentRestart, AnAdoptedVersionThatDependsOnNothingPolledServesAcrossATakeOver) {
  adoptedVersionServesAcross("agentkeepup", /*killNine=*/false);
}

} // namespace
} // namespace morpheus::testing
