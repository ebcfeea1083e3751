// The C client API (src/client) against a running optimizer's pinned maps.
#include "PolicyFwd.h"
#include "client/morpheus_client.h"

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

TEST(ClientApi, BadCallsFailByNameAndChangeNothing) {
  PinDir pins("clientbad");
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  uint64_t version = fwd.opt().guard().version();
  std::string missing = pins.path() + "/nosuchmap";
  morpheus_map *map = nullptr;
  EXPECT_EQ(morpheus_map_open(missing.c_str(), &map), -ENOENT);
  EXPECT_NE(std::string(morpheus_last_error()).find("map '" + missing + "'"), std::string::npos)
      << morpheus_last_error();
  EXPECT_EQ(morpheus_map_open(nullptr, &map), -EINVAL);

  std::string pin = pins.path() + "/policy";
  ASSERT_EQ(morpheus_map_open(pin.c_str(), &map), 0) << morpheus_last_error();
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  policy_value value = policyValue(ACTION_DROP);
  EXPECT_EQ(morpheus_map_update(map, &key, sizeof(key), &value, sizeof(value) - 1, 0), -EINVAL);
  EXPECT_NE(std::string(morpheus_last_error()).find("map '" + pin + "': value has 15 bytes"),
            std::string::npos)
      << morpheus_last_error();
  EXPECT_EQ(morpheus_map_update(map, nullptr, sizeof(key), &value, sizeof(value), 0), -EINVAL);
  EXPECT_EQ(morpheus_map_delete(map, &key, sizeof(key) + 1), -EINVAL);
  EXPECT_EQ(morpheus_map_delete(nullptr, &key, sizeof(key)), -EINVAL);
  morpheus_map_close(map);

  EXPECT_EQ(fwd.opt().guard().version(), version) << "rejected calls bumped the guard";
  uint8_t next[8];
  EXPECT_NE(bpf_map_get_next_key(fwd.opt().mapFd("policy"), nullptr, next), 0)
      << "rejected calls changed the map";
}

} // namespace
} // namespace morpheus::testing
