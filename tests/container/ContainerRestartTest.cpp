// The node agent in its container image (deploy/image/build.sh), run by
// podman the way the DaemonSet (deploy/kubernetes/daemonset.yaml) runs it
// on a node: privileged, on the host's network, the host's bpffs mounted
// with shared propagation, /run/netns and the control socket's directory
// from the host, the configuration (agent.yaml beside the program's
// source) mounted at /etc/morpheus, and the image's own entrypoint. The
// agent specializes policy_fwd on a veth in a namespace and an adopted
// owner's policy_fwd (AgentRestart.h); then, while frames flow through
// both veths, its container is
// - killed (`podman kill`: SIGKILL, as the kernel's OOM killer or a failed
//   node process would) and a new one started: the specialized version
//   serves on, guarded, until the new agent replaces it;
// - stopped (`podman stop`: SIGTERM, then a wait, as a DaemonSet rollout
//   stops the old pod) and a new one started: the old agent swaps the
//   original in, gives the adopted hook back to its owner and exits 0;
//   the new agent takes the same link over, adopts again and specializes
//   both again.
// Every frame sent must be counted by a program's stats map either way.
//
// The image is built once per test run by the `container_image_build` test
// (a ctest fixture; the root filesystem is cached in the build directory)
// and removed by `container_image_remove`. Containers are removed when a
// test ends, and those a killed run of this binary left are removed
// before the next one starts.
#include "AgentRestart.h"
#include "XdpHooks.h"

#include <gtest/gtest.h>

#include <csignal>
#include <sstream>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

constexpr const char *Podman = MORPHEUS_PODMAN;
constexpr const char *Image = MORPHEUS_TEST_IMAGE;
constexpr const char *NamePrefix = "morpheus-test-";

// `podman ARGS...` to its end: whether it exited 0, and what it printed.
std::pair<bool, std::string> podman(std::vector<std::string> args,
                                    std::chrono::seconds limit = 60s) {
  args.insert(args.begin(), Podman);
  ChildProcess command("podman", args);
  std::optional<int> status = command.wait(limit);
  return {status && *status == 0, command.log()};
}

// Containers this binary named (`morpheus-test-TAG-PID-N`) whose process
// is gone: a run killed before its destructors ran.
void removeStaleContainers() {
  auto [listed, names] = podman({"ps", "--all", "--format", "{{.Names}}", "--filter",
                                 std::string("name=^") + NamePrefix});
  ASSERT_TRUE(listed) << names;
  std::istringstream lines(names);
  for (std::string name; std::getline(lines, name);) {
    // morpheus-test-TAG-PID-N: the PID is the next-to-last field.
    size_t last = name.rfind('-');
    size_t before = last == std::string::npos ? last : name.rfind('-', last - 1);
    if (before == std::string::npos)
      continue;
    pid_t pid = pid_t(std::atoi(name.substr(before + 1, last - before - 1).c_str()));
    if (pid > 0 && kill(pid, 0) != 0 && errno == ESRCH)
      podman({"rm", "--force", "--time", "0", name});
  }
}

// One container of the image running the agent, in the foreground of a
// `podman run` that is a child of the test: its output is the agent's, it
// lives as long as the container, and SIGTERM to it reaches the agent
// (podman proxies signals). Removed, whatever state it is in, when the
// object goes.
class AgentContainer {
public:
  AgentContainer(const Scene &scene, const std::string &tag, int generation)
      : name(std::string(NamePrefix) + tag + "-" + std::to_string(getpid()) + "-" +
             std::to_string(generation)),
        run(tag + "-container", {Podman, "run", "--rm", "--name", name,
                                 // crun fails on this machine's cgroup layout,
                                 // and runc may not set podman's default
                                 // limits here (1048576 open files: "error
                                 // setting rlimit type 7: operation not
                                 // permitted"); 1024 is plenty for an agent
                                 // of two programs.
                                 "--runtime", "runc",
                                 "--ulimit", "nofile=1024:1024",
                                 "--ulimit", "nproc=1024:1024",
                                 // As daemonset.yaml: privileged, host network,
                                 // the host's bpffs (shared both ways), named
                                 // network namespaces, socket directory and
                                 // configuration.
                                 "--privileged", "--network", "host",
                                 "--volume", "/sys/fs/bpf:/sys/fs/bpf:rshared",
                                 "--volume", "/run/netns:/run/netns:rslave",
                                 "--volume", scene.socketDir() + ":/run/morpheus",
                                 "--volume", scene.configDir() + ":/etc/morpheus:ro",
                                 Image}) {}
  ~AgentContainer() { podman({"rm", "--force", "--time", "0", name}); }
  AgentContainer(const AgentContainer &) = delete;
  AgentContainer &operator=(const AgentContainer &) = delete;

  const std::string name;
  ChildProcess run;
};

class ContainerRestart : public ::testing::Test {
protected:
  void SetUp() override {
    removeStaleContainers();
    auto [exists, log] = podman({"image", "exists", Image});
    ASSERT_TRUE(exists) << "no image " << Image
                        << ": the container_image_build test builds it (ctest runs it first)\n"
                        << log;
  }
};

TEST_F(ContainerRestart, KilledContainerThenANewOneTakesOverWithNoPacketLostOrGenericCode) {
  Scene scene("ctrkill", "/run/morpheus/agent.sock");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  std::optional<AgentContainer> first(std::in_place, scene, "ctrkill", 1);
  startServing(scene, first->run, maps);
  if (HasFatalFailure())
    return;
  EXPECT_NE(first->run.log().find("agent: configuration /etc/morpheus/agent.yaml"),
            std::string::npos)
      << "the image's entrypoint reads the mounted configuration\n" << first->run.log();
  Serving before = serving(scene);
  ASSERT_TRUE(specialized(before.loadedProgram));
  ASSERT_NE(before.adoptedVersion, 0u);
  Traffic traffic(scene.loaded, scene.adopted);
  ProgramWatcher watcher = linkWatcher(scene.loadedLink());
  ProgramWatcher adoptedHook = linkWatcher(scene.ownerLink());
  std::this_thread::sleep_for(300ms);

  auto [killed, log] = podman({"kill", first->name});
  ASSERT_TRUE(killed) << log;
  EXPECT_FALSE(first->run.wait(30s) == std::optional<int>(0)) << "killed, not exited";
  first.reset();
  std::this_thread::sleep_for(300ms);
  EXPECT_EQ(linkProgramAt(scene.loadedLink()), before.loadedProgram)
      << "the specialized version serves on after the container is killed";
  EXPECT_EQ(scene.owner.linkProgram(), before.trampoline) << "the trampoline stays on the hook";

  AgentContainer second(scene, "ctrkill", 2);
  expectNextAgentTookOver(scene, second.run, before, traffic, *maps, watcher, adoptedHook);
}

// What a pinned link ran while it was watched; none of it 0 (the link
// never went away).
std::vector<uint32_t> ranThroughout(ProgramWatcher &watcher) {
  watcher.stop();
  std::vector<uint32_t> ids;
  for (const ProgramWatcher::Seen &program : watcher.programs()) {
    EXPECT_NE(program.id, 0u) << "the link was gone for a while";
    ids.push_back(program.id);
  }
  return ids;
}

TEST_F(ContainerRestart, RolloutStopsTheOldContainerAndTheNewOneTakesTheSameLinksOver) {
  Scene scene("ctrroll", "/run/morpheus/agent.sock");
  ASSERT_GE(scene.owner.program, 0);
  std::optional<LoadedMaps> maps;
  std::optional<AgentContainer> first(std::in_place, scene, "ctrroll", 1);
  startServing(scene, first->run, maps);
  if (HasFatalFailure())
    return;
  Serving before = serving(scene);
  ASSERT_TRUE(specialized(before.loadedProgram));
  ASSERT_NE(before.adoptedVersion, 0u);
  Traffic traffic(scene.loaded, scene.adopted);
  ProgramWatcher loadedLink = linkWatcher(scene.loadedLink());
  ProgramWatcher ownerLink = linkWatcher(scene.ownerLink());
  std::this_thread::sleep_for(300ms);

  // The kubelet's stop: SIGTERM, and SIGKILL only after the grace period.
  auto [stopped, log] = podman({"stop", "--time", "30", first->name});
  ASSERT_TRUE(stopped) << log;
  std::optional<int> status = first->run.wait(30s);
  ASSERT_TRUE(status) << first->run.log();
  EXPECT_EQ(*status, 0) << "the agent stopped cleanly\n" << first->run.log();
  first.reset();
  // Between the pods: the loaded program's link, pinned, runs the
  // original; the owner's link runs the owner's program again.
  bpf_link_info between = linkAt(scene.loadedLink());
  EXPECT_EQ(between.id, before.loadedLinkId) << "the link stays pinned between the pods";
  EXPECT_NE(between.prog_id, 0u);
  EXPECT_FALSE(specialized(between.prog_id)) << "the stopped agent swapped the original in";
  uint32_t ownersProgram = programIdOf(scene.owner.program);
  EXPECT_EQ(scene.owner.linkProgram(), ownersProgram) << "the hook given back to its owner";

  AgentContainer second(scene, "ctrroll", 2);
  waitForNextAgent(scene, second.run, before);
  if (HasFatalFailure())
    return;
  Serving after = serving(scene);
  EXPECT_EQ(after.loadedLinkId, before.loadedLinkId) << "the same link, taken over";
  EXPECT_EQ(hookProgram(scene.loaded), after.loadedProgram) << "one program on the hook";
  EXPECT_TRUE(specialized(after.loadedProgram)) << "specialized again by the new agent";
  EXPECT_EQ(hookProgram(scene.adopted), after.trampoline) << "one program on the adopted hook";
  EXPECT_NE(after.trampoline, ownersProgram) << "adopted again";
  EXPECT_NE(after.adoptedVersion, 0u) << "the adopted program specialized again";
  expectNoPacketLost(traffic, scene, *maps);
  std::vector<uint32_t> loadedRan = ranThroughout(loadedLink);
  EXPECT_EQ(loadedRan.front(), before.loadedProgram);
  EXPECT_EQ(loadedRan.back(), after.loadedProgram);
  std::vector<uint32_t> ownerRan = ranThroughout(ownerLink);
  EXPECT_EQ(ownerRan.front(), before.trampoline);
  EXPECT_EQ(ownerRan.back(), after.trampoline);
  EXPECT_TRUE(second.run.stop()) << second.run.log();
}

} // namespace
} // namespace morpheus::testing
