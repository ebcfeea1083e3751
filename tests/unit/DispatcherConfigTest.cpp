// libxdp's dispatcher configuration (backend/bpf/XdpDispatcher): the bytes
// of struct xdp_dispatcher_config, versions 2 and 3, read and written, and
// what is refused; which function a slot replaces.
#include "backend/bpf/XdpDispatcher.h"

#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::bpf {
namespace {

// A version-2 value as libxdp 1.3 writes it for two slots: priorities 10
// and 20, the first going on after XDP_PASS and XDP_DROP, the second
// after XDP_PASS, the second loaded with fragments, the dispatcher not.
std::vector<uint8_t> twoSlots() {
  std::vector<uint8_t> value(124, 0);
  value[0] = 236; // magic
  value[1] = 2;   // version
  value[2] = 2;   // slots enabled
  auto word = [&](size_t at, uint32_t v) {
    for (unsigned byte = 0; byte < 4; ++byte)
      value[at + byte] = uint8_t(v >> (8 * byte));
  };
  word(4, (1u << 2) | (1u << 1) | (1u << 31));
  word(8, (1u << 2) | (1u << 31));
  word(44, 10);
  word(48, 20);
  word(88, BPF_F_XDP_HAS_FRAGS);
  return value;
}

TEST(DispatcherConfig, ReadsWhatLibxdpWrites) {
  auto config = DispatcherConfig::parse(twoSlots());
  ASSERT_THAT_EXPECTED(config, llvm::Succeeded());
  EXPECT_EQ(config->version, 2);
  EXPECT_EQ(config->slotsEnabled, 2);
  EXPECT_FALSE(config->frags);
  EXPECT_EQ(config->chainCallActions[0], (1u << 2) | (1u << 1) | (1u << 31));
  EXPECT_EQ(config->chainCallActions[1], (1u << 2) | (1u << 31));
  EXPECT_EQ(config->runPriorities[0], 10u);
  EXPECT_EQ(config->runPriorities[1], 20u);
  EXPECT_EQ(config->programFlags[0], 0u);
  EXPECT_EQ(config->programFlags[1], uint32_t(BPF_F_XDP_HAS_FRAGS));
}

TEST(DispatcherConfig, WritesTheSameBytesBackInEitherVersion) {
  std::vector<uint8_t> value = twoSlots();
  auto config = DispatcherConfig::parse(value);
  ASSERT_THAT_EXPECTED(config, llvm::Succeeded());
  EXPECT_EQ(config->encode(value.size()), value);
  // Version 3 adds the device-bound byte after the arrays; its struct is
  // padded to 128 bytes.
  config->version = 3;
  config->deviceBound = true;
  std::vector<uint8_t> three = config->encode(128);
  ASSERT_EQ(three.size(), 128u);
  EXPECT_EQ(three[1], 3);
  EXPECT_EQ(three[124], 1);
  auto back = DispatcherConfig::parse(three);
  ASSERT_THAT_EXPECTED(back, llvm::Succeeded());
  EXPECT_EQ(*back, *config);
}

TEST(DispatcherConfig, RefusesWhatItDoesNotKnow) {
  std::vector<uint8_t> value = twoSlots();
  value[0] = 0; // version 1 had no magic
  EXPECT_THAT_EXPECTED(DispatcherConfig::parse(value),
                       llvm::FailedWithMessage(testing::HasSubstr("no magic byte")));
  value = twoSlots();
  value[1] = 4;
  EXPECT_THAT_EXPECTED(DispatcherConfig::parse(value),
                       llvm::FailedWithMessage(testing::HasSubstr("dispatcher version 4")));
  value = twoSlots();
  value[2] = 11;
  EXPECT_THAT_EXPECTED(DispatcherConfig::parse(value),
                       llvm::FailedWithMessage(testing::HasSubstr("enables 11 slots")));
  value = twoSlots();
  value[1] = 3; // version 3 needs the device-bound byte
  EXPECT_THAT_EXPECTED(DispatcherConfig::parse(value),
                       llvm::FailedWithMessage(testing::HasSubstr("fewer than the 125")));
}

TEST(DispatcherConfig, OneSlotReplacesTheMainFunction) {
  EXPECT_EQ(slotFunction(0, 1), "xdp_dispatcher");
  EXPECT_EQ(slotFunction(0, 2), "prog0");
  EXPECT_EQ(slotFunction(9, 10), "prog9");
}

} // namespace
} // namespace morpheus::bpf
