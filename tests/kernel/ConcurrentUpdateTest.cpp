// Control-plane updates racing with compilations: every packet tested right
// after an update returns must follow that update, whichever version of the
// program is installed at that moment and whatever the compiler is doing.
#include "PolicyFwd.h"
#include "backend/bpf/BpfObject.h"
#include "client/Map.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/in.h>

#include <algorithm>
#include <atomic>
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
unsigned quietMilliseconds(const runtime::CycleReport &cycle) {
  const runtime::CycleTimes &t = cycle.times;
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

} // namespace
} // namespace morpheus::testing
