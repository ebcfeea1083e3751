// What the tests of a node agent restarted under traffic share: the scene
// (two veths, an owner whose program the agent adopts, a pin directory,
// the agent's configuration), traffic through both veths counted by the
// programs' own stats maps, a watcher of what a hook runs, and the checks
// after the next agent took over. AgentRestartTest runs the agent
// as a process; tests/container/ContainerRestartTest runs it in its image
// under podman, the way a DaemonSet does.
//
// The agent runs two programs: policy_fwd loaded and attached by Morpheus
// on one veth ("loaded"), and policy_fwd adopted from an owner (a plain
// libbpf loader, attached through a pinned XDP link) on the other
// ("adopted"). Every frame sent hits a policy entry that drops it, so
// every frame is counted as STAT_DROP by whichever version handles it; a
// frame dropped by a failed tail call, or sent while nothing is attached,
// is counted by nobody.
#pragma once

#include "ChildProcess.h"
#include "KernelSupport.h"
#include "PolicyFwd.h"
#include "netns/VethPair.h"
#include "trafficgen/LiveFrames.h"

#include <bpf/bpf.h>

#include <atomic>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace morpheus::testing {

// Writes the drop policy of the flows Traffic sends into a policy_fwd's
// config and policy maps.
void configure(int configFd, int policyFd);

// The packets a policy_fwd stats map counted, all verdicts and CPUs.
uint64_t counted(int statsFd);

// `value`'s bytes in hex, as `morpheus map` takes keys and values.
std::string hexBytes(const void *value, size_t size);
template <typename T> std::string hex(const T &value) { return hexBytes(&value, sizeof(T)); }

// The owner of the adopted program: policy_fwd loaded by libbpf,
// configured, attached to the veth's B side through an XDP link pinned at
// `linkPin`.
class LinkedOwner {
public:
  LinkedOwner(const VethPair &veth, const std::string &linkPin);
  ~LinkedOwner();
  LinkedOwner(const LinkedOwner &) = delete;
  LinkedOwner &operator=(const LinkedOwner &) = delete;
  int mapFd(const char *name) const;
  // What the owner's link runs: the trampoline once adopted.
  uint32_t linkProgram() const;

  int program = -1;

private:
  std::string pin;
  struct bpf_object *obj = nullptr;
  int link = -1;
};

// The link pinned at `pin` (its id) and the program it runs; zeros when
// there is none.
bpf_link_info linkAt(const std::string &pin);
uint32_t linkProgramAt(const std::string &pin);

// Whether program `id` is a specialized version: it checks the guard.
bool specialized(uint32_t id);

// Frames through both veths, in rounds, until stopped; what was sent.
class Traffic {
public:
  Traffic(const VethPair &loaded, const VethPair &adopted);
  ~Traffic() { stop(); }
  void stop();
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
  explicit ProgramWatcher(std::function<uint32_t()> running);
  ~ProgramWatcher() { stop(); }
  ProgramWatcher(const ProgramWatcher &) = delete;
  ProgramWatcher &operator=(const ProgramWatcher &) = delete;
  void stop();
  std::vector<Seen> programs();

private:
  std::function<uint32_t()> running;
  std::atomic<bool> done{false};
  std::mutex mutex;
  std::vector<Seen> seen;
  std::thread thread;
};

// What the link pinned at `pin` runs.
ProgramWatcher linkWatcher(const std::string &pin);

// Two veths, a pin directory, the owner, and the agent's configuration in
// a directory of its own (`configDir()`: agent.yaml beside the program's
// source, referred to by a relative path, as a ConfigMap mounted at
// /etc/morpheus holds them), all named after `tag` and this process and
// removed when the test ends. The control socket is `socket` for the test;
// the configuration names it as the agent sees it (`socketSeenByAgent`,
// the same path unless the agent runs where the socket's directory is
// mounted elsewhere). `adoptedPolicy` is more of the adopted program's
// configuration (lines of its entry).
struct Scene {
  explicit Scene(const std::string &tag, const std::string &socketSeenByAgent = "",
                 const std::string &adoptedPolicy = "");
  ~Scene();
  Scene(const Scene &) = delete;
  Scene &operator=(const Scene &) = delete;

  std::string configDir() const { return dir + "/config"; }
  std::string socketDir() const { return dir + "/run"; }
  std::string config() const { return configDir() + "/agent.yaml"; }
  std::string loadedPins() const { return pins.path() + "/loaded"; }
  std::string loadedLink() const { return loadedPins() + "/link_xdp_" + loaded.ifB(); }
  std::string ownerArray() const { return pins.path() + "/adopted/owner_program"; }
  std::string servedArray() const { return pins.path() + "/adopted/served_version"; }
  std::string ownerLink() const { return pins.path() + "/owner_link"; }

  // `morpheus daemon` on this configuration, as a process of the test.
  std::vector<std::string> agent(bool takeOver = false) const;
  // Both programs serve a version the agent installed.
  bool bothSpecialized() const;

  unsigned sweep;
  VethPair loaded, adopted;
  PinDir pins;
  LinkedOwner owner;
  std::string dir, socket;
};

// The loaded program's maps, configured through their pins once the agent
// made them (a write Morpheus polls), and its counters.
struct LoadedMaps {
  explicit LoadedMaps(const std::string &pinDir);
  Fd config, policy, stats;
};

// Starts the agent and waits until both programs run a specialized
// version; the loaded program's maps then configured.
void startServing(Scene &scene, ChildProcess &agent, std::optional<LoadedMaps> &maps);

// What the checks after a restart compare.
struct Serving {
  uint32_t loadedLinkId = 0, loadedProgram = 0, trampoline = 0, adoptedVersion = 0;
};
Serving serving(const Scene &scene);

// The new agent took the links over: the same link and the same
// trampoline (no second attachment: the hook runs what the link runs), and
// both programs re-specialized.
void expectTakenOver(const Scene &scene, const Serving &before, const std::string &log);

// Every packet sent was counted (as dropped, its policy's answer) by the
// loaded program's versions and by the adopted one's or the owner's.
void expectNoPacketLost(Traffic &traffic, const Scene &scene, const LoadedMaps &maps);

// The loaded program's link ran nothing but specialized versions.
void expectAlwaysSpecialized(ProgramWatcher &watcher, uint32_t first);

// The owner's link ran the trampoline all along: never handed back to the
// owner's program, never detached. (Between two agents the trampoline's
// Morpheus array is empty and the owner's program serves through it,
// unless the version depends on nothing polled: that one is pinned and
// serves on.)
void expectTrampolineThroughout(ProgramWatcher &watcher, uint32_t trampoline);

// Waits until the next agent serves both programs with versions of its
// own (the loaded link no longer running `before`'s program).
void waitForNextAgent(const Scene &scene, ChildProcess &next, const Serving &before);

// The next agent, started on the same configuration: once both programs
// run its versions, every check above; then it stops cleanly (`slot`, if
// given, stopped before it, with the other watchers).
void expectNextAgentTookOver(const Scene &scene, ChildProcess &next, const Serving &before,
                             Traffic &traffic, const LoadedMaps &maps, ProgramWatcher &watcher,
                             ProgramWatcher &adoptedHook, ProgramWatcher *slot = nullptr);

} // namespace morpheus::testing
