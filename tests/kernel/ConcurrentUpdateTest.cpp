// Control-plane updates racing with compilations: every packet tested right
// after an update returns must follow that update, whichever version of the
// program is installed at that moment and whatever the compiler is doing.
#include "PolicyFwd.h"
#include "backend/bpf/BpfObject.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <linux/in.h>

#include <atomic>
#include <thread>

extern "C" const unsigned char dispatcher_bpf_start[], dispatcher_bpf_end[];

namespace morpheus::testing {
namespace {

TEST(ConcurrentUpdates, EveryPacketSeesTheLatestUpdate) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  auto dispatcher = bpf::LoadedObject::load(
      llvm::ArrayRef<char>(reinterpret_cast<const char *>(dispatcher_bpf_start),
                           dispatcher_bpf_end - dispatcher_bpf_start),
      "dispatcher", {});
  ASSERT_TRUE(bool(dispatcher)) << llvm::toString(dispatcher.takeError());
  int slots = dispatcher->mapFd("current");
  int dispatch = dispatcher->programFd("dispatch");
  auto installInto = [slots](int fd) -> llvm::Error {
    uint32_t zero = 0;
    if (bpf_map_update_elem(slots, &zero, &fd, BPF_ANY))
      return makeSystemError(errno, "dispatcher slot");
    return llvm::Error::success();
  };
  fwd.opt().install = installInto;

  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  for (uint32_t i = 0; i < 8; ++i) // more entries, so the table is inlined as a chain
    fwd.setPolicy(policyKey(0x0a000100 + i, 80, IPPROTO_UDP), policyValue(ACTION_PASS));
  fwd.setPolicy(key, policyValue(ACTION_DROP));
  fwd.specialize();
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  ASSERT_EQ(runOnce(dispatch, packet).verdict, uint32_t(XDP_DROP));

  std::atomic<bool> stop{false};
  std::atomic<unsigned> installed{0};
  std::thread compiler([&] {
    while (!stop)
      installed += fwd.opt().runCycle().installed;
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
      std::this_thread::sleep_for(std::chrono::milliseconds(5 + i % 20));
  }
  stop = true;
  compiler.join();
  std::printf("%u updates, %u installs during them, %u violations\n", updates,
              installed.load(), violations);
  EXPECT_EQ(violations, 0u);
  EXPECT_GE(installed.load(), 3u) << "updates must race with installs for this test to mean anything";
}

} // namespace
} // namespace morpheus::testing
