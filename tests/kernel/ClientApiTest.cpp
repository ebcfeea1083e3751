// The C client API (src/client) against a running optimizer's pinned maps.
#include "PolicyFwd.h"

#include <bpf/bpf.h>
#include <linux/in.h>

extern "C" int morpheus_client_c_smoke(const char *pin, const void *key, size_t key_size,
                                       const void *value, size_t value_size);

namespace morpheus::testing {
namespace {

TEST(ClientApi, CUpdateIsGuardedAndVisible) {
  PinDir pins("client");
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  fwd.specialize();
  int specialized = fwd.opt().activeFd();
  uint64_t before = fwd.opt().guard().version();

  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  policy_value drop = policyValue(ACTION_DROP);
  ASSERT_EQ(morpheus_client_c_smoke((pins.path() + "/policy").c_str(), &key, sizeof(key),
                                    &drop, sizeof(drop)),
            0);
  EXPECT_EQ(fwd.opt().guard().version(), before + 2) << "bumped before and after";
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  EXPECT_EQ(runOnce(specialized, packet).verdict, uint32_t(XDP_DROP));
}

} // namespace
} // namespace morpheus::testing
