// The shared scene and checks of the agent restart tests (AgentRestart.h).
#include "AgentRestart.h"

#include "XdpHooks.h"
#include "support/Netns.h"

#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <net/if.h>

#include <gtest/gtest.h>
#include <llvm/Support/FormatVariadic.h>

#include <filesystem>
#include <fstream>

extern "C" const unsigned char policy_fwd_owner_start[], policy_fwd_owner_end[];

namespace morpheus::testing {

using namespace std::chrono_literals;

namespace {

constexpr uint32_t Flows = 8;

// Flow i hits a policy entry that drops it: every packet is counted as
// STAT_DROP by whichever version handles it.
std::vector<trafficgen::Flow> droppedFlows() {
  std::vector<trafficgen::Flow> flows;
  for (uint32_t i = 0; i < Flows; ++i)
    flows.push_back({0x0a0000c8, 0x0a000001 + i, 1000, uint16_t(80 + i), IPPROTO_UDP});
  return flows;
}

} // namespace

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

std::string hexBytes(const void *value, size_t size) {
  std::string text;
  const auto *bytes = static_cast<const uint8_t *>(value);
  for (size_t i = 0; i < size; ++i)
    text += llvm::formatv("{0:x-2}", bytes[i]).str();
  return text;
}

uint64_t counted(int statsFd) {
  uint64_t total = 0;
  for (uint64_t value : perCpuCounters(statsFd, STAT_MAX))
    total += value;
  return total;
}

LinkedOwner::LinkedOwner(const VethPair &veth, const std::string &linkPin) : pin(linkPin) {
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

LinkedOwner::~LinkedOwner() {
  if (link >= 0)
    close(link);
  unlink(pin.c_str());
  bpf_object__close(obj);
}

int LinkedOwner::mapFd(const char *name) const {
  return bpf_map__fd(bpf_object__find_map_by_name(obj, name));
}

uint32_t LinkedOwner::linkProgram() const {
  bpf_link_info info = {};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(link, &info, &length) ? 0u : info.prog_id;
}

bpf_link_info linkAt(const std::string &pin) {
  Fd link(bpf_obj_get(pin.c_str()));
  bpf_link_info info = {};
  uint32_t length = sizeof(info);
  if (link.fd < 0 || bpf_obj_get_info_by_fd(link.fd, &info, &length))
    return {};
  return info;
}

uint32_t linkProgramAt(const std::string &pin) { return linkAt(pin).prog_id; }

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

Traffic::Traffic(const VethPair &loaded, const VethPair &adopted)
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

void Traffic::stop() {
  done = true;
  if (thread.joinable())
    thread.join();
}

ProgramWatcher::ProgramWatcher(std::function<uint32_t()> running)
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

void ProgramWatcher::stop() {
  done = true;
  if (thread.joinable())
    thread.join();
}

std::vector<ProgramWatcher::Seen> ProgramWatcher::programs() {
  std::lock_guard lock(mutex);
  return seen;
}

ProgramWatcher linkWatcher(const std::string &pin) {
  return ProgramWatcher([pin] { return linkProgramAt(pin); });
}

Scene::Scene(const std::string &tag, const std::string &socketSeenByAgent,
             const std::string &adoptedPolicy)
    : sweep(VethPair::sweepStale(tag)), loaded(tag), adopted(tag), pins(tag),
      owner(adopted, ownerLink()),
      dir("/tmp/morpheus-test-" + tag + "-" + std::to_string(getpid())),
      socket(socketDir() + "/agent.sock") {
  std::filesystem::create_directories(configDir());
  std::filesystem::create_directories(socketDir());
  for (const char *file : {"policy_fwd.bpf.c", "policy_fwd.h"})
    std::filesystem::copy_file(sourcePath(std::string("examples/") + file),
                               configDir() + "/" + file,
                               std::filesystem::copy_options::overwrite_existing);
  std::ofstream file(config());
  file << "socket: " << (socketSeenByAgent.empty() ? socket : socketSeenByAgent) << "\n"
       << "programs:\n"
       << "  - name: loaded\n"
       << "    source: policy_fwd.bpf.c\n"
       << "    ifaces: [" << loaded.ifB() << "]\n"
       << "    netns: " << loaded.nsB() << "\n"
       << "    pin_dir: " << loadedPins() << "\n"
       << "    period: 100ms\n"
       << "    quiet: true\n"
       << "  - name: adopted\n"
       << "    source: policy_fwd.bpf.c\n"
       << "    adopt: " << ownerLink() << "\n"
       << "    pin_dir: " << pins.path() << "/adopted\n"
       << "    period: 100ms\n"
       << "    quiet: true\n"
       << adoptedPolicy;
}

Scene::~Scene() {
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

std::vector<std::string> Scene::agent(bool takeOver) const {
  std::vector<std::string> argv = {binPath("morpheus"), "daemon", "--config", config()};
  if (takeOver)
    argv.push_back("--take-over");
  return argv;
}

bool Scene::bothSpecialized() const {
  nlohmann::json reply = askControlSocket(socket, {{"op", "status"}});
  if (!reply.value("ok", false))
    return false;
  for (const nlohmann::json &program : reply["status"]["programs"])
    if (program.value("installed_version", uint64_t(0)) == 0)
      return false;
  return reply["status"]["programs"].size() == 2;
}

LoadedMaps::LoadedMaps(const std::string &pinDir)
    : config(bpf_obj_get((pinDir + "/config").c_str())),
      policy(bpf_obj_get((pinDir + "/policy").c_str())),
      stats(bpf_obj_get((pinDir + "/stats").c_str())) {}

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

Serving serving(const Scene &scene) {
  Serving now;
  now.loadedLinkId = linkAt(scene.loadedLink()).id;
  now.loadedProgram = linkProgramAt(scene.loadedLink());
  now.trampoline = scene.owner.linkProgram();
  now.adoptedVersion = servedThrough(now.trampoline, scene.ownerArray());
  return now;
}

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

void expectNoPacketLost(Traffic &traffic, const Scene &scene, const LoadedMaps &maps) {
  traffic.stop();
  // Generic XDP runs in the receiving veth's softirq, which a loaded machine
  // defers to ksoftirqd: the last batch (the adopted veth's, sent last) may
  // still be queued when the send returns. A lost frame is never counted;
  // a queued one is within moments, so wait for the counts to reach the
  // sent ones, 5 s at most.
  auto caughtUp = [&] {
    return counted(maps.stats.fd) == traffic.sentLoaded.load() &&
           counted(scene.owner.mapFd("stats")) == traffic.sentAdopted.load();
  };
  for (auto deadline = std::chrono::steady_clock::now() + 5s;
       !caughtUp() && std::chrono::steady_clock::now() < deadline;)
    std::this_thread::sleep_for(20ms);
  EXPECT_GT(traffic.sentLoaded.load(), 0u);
  EXPECT_EQ(counted(maps.stats.fd), traffic.sentLoaded.load()) << "loaded program lost packets";
  EXPECT_EQ(perCpuCounters(maps.stats.fd, STAT_MAX)[STAT_DROP], traffic.sentLoaded.load());
  EXPECT_EQ(counted(scene.owner.mapFd("stats")), traffic.sentAdopted.load())
      << "adopted program lost packets";
}

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

void expectTrampolineThroughout(ProgramWatcher &watcher, uint32_t trampoline) {
  watcher.stop();
  for (const ProgramWatcher::Seen &program : watcher.programs())
    EXPECT_EQ(program.id, trampoline) << "the adopted hook left its trampoline";
}

void waitForNextAgent(const Scene &scene, ChildProcess &next, const Serving &before) {
  ASSERT_TRUE(waitFor([&] {
    return !next.alive() || (scene.bothSpecialized() &&
                             linkProgramAt(scene.loadedLink()) != before.loadedProgram);
  }, 30s) && next.alive())
      << next.log();
  std::this_thread::sleep_for(300ms);
}

void expectNextAgentTookOver(const Scene &scene, ChildProcess &next, const Serving &before,
                             Traffic &traffic, const LoadedMaps &maps, ProgramWatcher &watcher,
                             ProgramWatcher &adoptedHook, ProgramWatcher *slot) {
  waitForNextAgent(scene, next, before);
  if (::testing::Test::HasFatalFailure())
    return;
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

} // namespace morpheus::testing
