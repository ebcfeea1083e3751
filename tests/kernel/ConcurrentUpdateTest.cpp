// Control-plane updates racing with compilations: every packet tested right
// after an update returns must follow that update, whichever version of the
// program is installed at that moment and whatever the compiler is doing.
#include "ChildProcess.h"
#include "Corpus.h"
#include "PolicyFwd.h"
#include "backend/bpf/BpfObject.h"
#include "client/Map.h"
#include "client/Transaction.h"
#include "runtime/ControlServer.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/in.h>

#include <algorithm>
#include <atomic>
#include <cstring>
#include <functional>
#include <mutex>
#include <sys/wait.h>
#include <time.h>
#include <thread>
#include <unistd.h>
#include <llvm/Testing/Support/Error.h>

extern "C" const unsigned char dispatcher_bpf_start[], dispatcher_bpf_end[];

namespace morpheus::testing {
namespace {

// How long writers pause so that compilations can finish and install: a
// few cycles as long as the one just measured (slow on a loaded machine).
unsigned quietMilliseconds(const core::CycleReport &cycle) {
  const core::CycleTimes &t = cycle.times;
  return unsigned(std::max(40.0, 4 * (t.analysisMs + t.codegenMs + t.validationMs +
                                      t.injectionMs)));
}

// Packets go to one program that never changes, which tail-calls whatever
// the optimizer installed last (its `install` writes the one slot), so a
// test can send packets while versions come and go.
Expected<bpf::LoadedObject> dispatchTo(runtime::Optimizer &optimizer) {
  auto dispatcher = bpf::LoadedObject::load(
      llvm::ArrayRef<char>(reinterpret_cast<const char *>(dispatcher_bpf_start),
                           dispatcher_bpf_end - dispatcher_bpf_start),
      "dispatcher", {});
  if (!dispatcher)
    return dispatcher.takeError();
  optimizer.install = [slots = dispatcher->mapFd("current")](int fd) -> llvm::Error {
    uint32_t zero = 0;
    if (bpf_map_update_elem(slots, &zero, &fd, BPF_ANY))
      return makeSystemError(errno, "dispatcher slot");
    return llvm::Error::success();
  };
  return dispatcher;
}

TEST(ConcurrentUpdates, EveryPacketSeesTheLatestUpdate) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  auto dispatcher = dispatchTo(fwd.opt());
  ASSERT_THAT_EXPECTED(dispatcher, llvm::Succeeded());
  int dispatch = dispatcher->programFd("dispatch");

  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  for (uint32_t i = 0; i < 8; ++i) // more entries, so the table is inlined as a chain
    fwd.setPolicy(policyKey(0x0a000100 + i, 80, IPPROTO_UDP), policyValue(ACTION_PASS));
  fwd.setPolicy(key, policyValue(ACTION_DROP));
  unsigned quietMs = quietMilliseconds(fwd.specialize());
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  ASSERT_EQ(runOnce(dispatch, packet).verdict, uint32_t(XDP_DROP));

  std::atomic<bool> stop{false};
  std::atomic<unsigned> installed{0};
  std::thread compiler([&] {
    while (!stop)
      installed += fwd.opt().runCycle().installed();
  });
  bpf::MapUpdater policy = fwd.updater("policy");
  unsigned violations = 0, updates = 300;
  for (unsigned i = 0; i < updates; ++i) {
    uint32_t action = i % 2 ? ACTION_DROP : ACTION_PASS;
    ASSERT_FALSE(bool(policy.update(bytesOf(key), bytesOf(policyValue(action)))));
    uint32_t expected = action == ACTION_DROP ? XDP_DROP : XDP_PASS;
    violations += runOnce(dispatch, packet).verdict != expected;
    // Bursts of updates, with pauses of about one compilation between them,
    // so updates land before, during and after compilations and installs.
    if (i % 3 == 2)
      std::this_thread::sleep_for(std::chrono::milliseconds(quietMs / 4 + i % (quietMs / 2)));
  }
  stop = true;
  compiler.join();
  std::printf("%u updates, %u installs during them, %u violations\n", updates,
              installed.load(), violations);
  EXPECT_EQ(violations, 0u);
  EXPECT_GE(installed.load(), 3u) << "updates must race with installs for this test to mean anything";
}

// Several control planes at once, each its own process (fork) that opens the
// pinned map and guard as `morpheus map update` does: after each of its
// updates returns, the next packet of that process must follow it, while the
// others hammer their own keys and this process keeps recompiling. With the
// writers' updates made without the guard bracket (MapUpdater::writeUnguarded) the
// same run counted 300 violations in 600 updates.
TEST(ConcurrentUpdates, SeveralWriterProcessesEachSeeTheirLatestUpdate) {
  PinDir pins("concurrent_writers");
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  auto dispatcher = dispatchTo(fwd.opt());
  ASSERT_THAT_EXPECTED(dispatcher, llvm::Succeeded());
  int dispatch = dispatcher->programFd("dispatch");

  constexpr unsigned Writers = 3, Updates = 200;
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  for (uint32_t i = 0; i < 8; ++i) // writers' keys among others: inlined as a chain
    fwd.setPolicy(policyKey(0x0a000100 + i, 80, IPPROTO_UDP), policyValue(ACTION_PASS));
  for (uint32_t w = 0; w < Writers; ++w)
    fwd.setPolicy(policyKey(0x0a000001 + w, 80, IPPROTO_UDP), policyValue(ACTION_DROP));
  unsigned quietMs = quietMilliseconds(fwd.specialize());

  int start[2], results[2];
  ASSERT_EQ(pipe(start), 0);
  ASSERT_EQ(pipe(results), 0);
  std::vector<pid_t> children;
  for (uint32_t w = 0; w < Writers; ++w) {
    pid_t pid = fork();
    ASSERT_GE(pid, 0);
    if (pid == 0) {
      // The child: no gtest assertions (they would report in the wrong
      // process); its violation count goes back through the pipe, and
      // UINT32_MAX means it could not run.
      close(start[1]);
      char go;
      uint32_t violations = read(start[0], &go, 1) == 1 ? 0 : UINT32_MAX;
      auto policy = client::Map::open(pins.path() + "/policy");
      if (!policy || !policy->guarded())
        violations = UINT32_MAX;
      policy_key key = policyKey(0x0a000001 + w, 80, IPPROTO_UDP);
      Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001 + w, .dport = 80});
      for (unsigned i = 0; i < Updates && violations != UINT32_MAX; ++i) {
        // All writers write for 40 ms, then go quiet together (the
        // monotonic clock is the same in every process): the windows in
        // which compilations can finish and install, while updates race
        // with the compilations that start before them.
        timespec now;
        clock_gettime(CLOCK_MONOTONIC, &now);
        long period = 40 + quietMs;
        long phase = (now.tv_sec * 1000 + now.tv_nsec / 1000000) % period;
        if (phase >= 40)
          usleep(useconds_t((period - phase) * 1000));
        uint32_t action = (i + w) % 2 ? ACTION_DROP : ACTION_PASS;
        if (policy->update(key, policyValue(action))) {
          violations = UINT32_MAX;
          break;
        }
        violations += runOnce(dispatch, packet).verdict !=
                      (action == ACTION_DROP ? uint32_t(XDP_DROP) : uint32_t(XDP_PASS));
        usleep(1000 + 300 * w);
      }
      if (!policy)
        llvm::consumeError(policy.takeError());
      ssize_t written = write(results[1], &violations, sizeof violations);
      _exit(written == sizeof violations ? 0 : 1);
    }
    children.push_back(pid);
  }
  close(start[0]);
  close(results[1]);

  std::atomic<bool> stop{false};
  std::atomic<unsigned> installed{0};
  std::thread compiler([&] {
    while (!stop)
      installed += fwd.opt().runCycle().installed();
  });
  ASSERT_EQ(write(start[1], "gggg", Writers), ssize_t(Writers));
  close(start[1]);
  uint32_t total = 0;
  for (uint32_t w = 0; w < Writers; ++w) {
    uint32_t violations = UINT32_MAX;
    EXPECT_EQ(read(results[0], &violations, sizeof violations), ssize_t(sizeof violations));
    EXPECT_NE(violations, UINT32_MAX) << "a writer process could not run";
    total += violations == UINT32_MAX ? 0 : violations;
  }
  for (pid_t pid : children) {
    int status = 0;
    waitpid(pid, &status, 0);
    EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  }
  stop = true;
  compiler.join();
  close(results[0]);
  std::printf("%u writer processes x %u updates, %u installs during them, %u violations\n",
              Writers, Updates, installed.load(), total);
  EXPECT_EQ(total, 0u);
  EXPECT_GE(installed.load(), 3u) << "updates must race with installs for this test to mean anything";
}

// What each packet of tests/programs/live_then_config.bpf.c saw: the live
// generation, then the configuration's (written into its first 8 bytes).
struct Seen {
  uint32_t live = 0, cfg = 0;
};

struct InFlightRace {
  std::vector<Seen> seen;
  unsigned changes = 0;
  unsigned specializedRounds = 0; // rounds whose change met a version with cfg folded
  // Packets that saw a newer live generation than configuration: a
  // combination the original never shows (it reads live first, and the
  // control plane writes cfg first).
  unsigned impossible() const {
    return unsigned(std::count_if(seen.begin(), seen.end(),
                                  [](const Seen &s) { return s.cfg < s.live; }));
  }
};

// Packets of a millisecond or more each, back to back through the
// dispatcher on another thread, while the control plane makes `rounds`
// changes with `change(generation)` (cfg, then live), each after a cycle
// installed a version with the current cfg folded in and two packets ran
// on it (so the packet in flight started on it too).
InFlightRace raceChangesWithPacketsInFlight(CorpusProgram &program, unsigned rounds,
                                            const std::function<void(uint32_t)> &change) {
  InFlightRace race;
  auto dispatcher = dispatchTo(program.opt());
  EXPECT_THAT_EXPECTED(dispatcher, llvm::Succeeded());
  if (!dispatcher)
    return race;
  int dispatch = dispatcher->programFd("dispatch");
  Bytes packet = buildPacket(PacketSpec{});
  std::atomic<bool> stop{false};
  std::mutex seenLock;
  std::thread traffic([&] {
    while (!stop) {
      RunResult result = runOnce(dispatch, packet);
      if (result.verdict != XDP_TX)
        continue; // no version installed yet
      Seen seen;
      std::memcpy(&seen.live, result.output.data(), 4);
      std::memcpy(&seen.cfg, result.output.data() + 4, 4);
      std::lock_guard lock(seenLock);
      race.seen.push_back(seen);
    }
  });
  for (uint32_t generation = 1; generation <= rounds; ++generation) {
    core::CycleReport report = program.cycle();
    const core::SiteDecision *folded = CorpusProgram::decision(report, "cfg", true);
    race.specializedRounds += report.installed() && folded;
    // Two packets end after the install, so the one in flight when the
    // change begins started on the new version.
    auto seenSoFar = [&] {
      std::lock_guard lock(seenLock);
      return race.seen.size();
    };
    size_t installedAt = seenSoFar();
    for (int wait = 0; wait < 1000 && seenSoFar() < installedAt + 2; ++wait)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    change(generation);
    ++race.changes;
    std::this_thread::sleep_for(std::chrono::milliseconds(3));
  }
  stop = true;
  traffic.join();
  return race;
}

// A change through Morpheus waits, after its first bump, for every packet
// that trusted the old version to finish before it writes (GuardWord::
// Update, RunningPrograms): a packet sees either the version's folded cfg
// with live as it was before the change, or the generic code, which reads
// both as the original does. Through the control socket, cfg then live,
// one request each; with the wait left out, packets in flight across the
// change saw the new live beside the old, folded cfg (docs/equivalence.md).
TEST(ConcurrentUpdates, APacketInFlightNeverSeesASocketChangeBesideFoldedContentsFromBeforeIt) {
  CorpusProgram program("live_then_config.bpf.c");
  ASSERT_TRUE(program.ok());
  std::string socketPath = "/tmp/morpheus-in-flight-" + std::to_string(getpid()) + ".sock";
  auto claim = runtime::ControlSocketClaim::claim(socketPath);
  ASSERT_THAT_EXPECTED(claim, llvm::Succeeded());
  auto server = runtime::ControlServer::start(std::move(*claim), program.opt(), nullptr,
                                              [] { return std::string("{}"); });
  ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
  auto write = [&](const std::string &map, uint32_t generation) {
    nlohmann::json reply = askControlSocket(
        socketPath,
        {{"op", "update"}, {"map", map}, {"key", toHex(bytesOf(uint32_t(0)))},
         {"value", toHex(bytesOf(generation))}});
    EXPECT_EQ(reply.value("ok", false), true) << reply.dump();
  };
  InFlightRace race = raceChangesWithPacketsInFlight(program, 40, [&](uint32_t generation) {
    write("cfg", generation);
    write("live", generation);
  });
  std::printf("%zu packets, %u changes (%u met cfg folded), %u saw a newer live than cfg\n",
              race.seen.size(), race.changes, race.specializedRounds, race.impossible());
  EXPECT_EQ(race.impossible(), 0u);
  EXPECT_GE(race.specializedRounds, race.changes * 3 / 4)
      << "changes must meet specialized versions for this test to mean anything";
  EXPECT_GE(race.seen.size(), size_t(race.changes) * 4) << "packets must be in flight";
}

// The same through client::Transaction: cfg then live in one guard bracket.
TEST(ConcurrentUpdates, APacketInFlightNeverSeesATransactionBesideFoldedContentsFromBeforeIt) {
  PinDir pins("in_flight_transaction");
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.pinDir = pins.path();
  CorpusProgram program("live_then_config.bpf.c", options);
  ASSERT_TRUE(program.ok());
  auto maps = client::PinnedMaps::open(pins.path(), {"cfg", "live"});
  ASSERT_THAT_EXPECTED(maps, llvm::Succeeded());
  InFlightRace race = raceChangesWithPacketsInFlight(program, 40, [&](uint32_t generation) {
    client::Transaction transaction(*maps);
    transaction.update("cfg", uint32_t(0), generation);
    transaction.update("live", uint32_t(0), generation);
    EXPECT_THAT_ERROR(transaction.commit(), llvm::Succeeded());
  });
  std::printf("%zu packets, %u transactions (%u met cfg folded), %u saw a newer live than "
              "cfg\n",
              race.seen.size(), race.changes, race.specializedRounds, race.impossible());
  EXPECT_EQ(race.impossible(), 0u);
  EXPECT_GE(race.specializedRounds, race.changes * 3 / 4)
      << "changes must meet specialized versions for this test to mean anything";
  EXPECT_GE(race.seen.size(), size_t(race.changes) * 4) << "packets must be in flight";
}

} // namespace
} // namespace morpheus::testing
