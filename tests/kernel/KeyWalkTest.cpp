// The one key walk (bpf::forEachKey): every key once, an early stop, and
// errors that name the map instead of a walk that silently ends.
#include "KernelSupport.h"
#include "backend/bpf/MapIO.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <set>

namespace morpheus::testing {
namespace {

class KeyWalk : public ::testing::Test {
protected:
  void SetUp() override {
    fd = bpf_map_create(BPF_MAP_TYPE_HASH, "walked", 4, 8, 16, nullptr);
    ASSERT_GE(fd, 0) << "bpf_map_create: " << strerror(errno);
    for (uint32_t key = 10; key < 15; ++key) {
      uint64_t value = key * 100;
      ASSERT_EQ(bpf_map_update_elem(fd, &key, &value, BPF_ANY), 0);
    }
  }
  void TearDown() override {
    if (fd >= 0)
      close(fd);
  }
  int fd = -1;
};

TEST_F(KeyWalk, VisitsEveryKeyOnceAndStopsWhenAsked) {
  std::multiset<Bytes> seen;
  llvm::Error err = bpf::forEachKey(fd, 4, "walked", [&](const Bytes &key) {
    seen.insert(key);
    return true;
  });
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_EQ(seen.size(), 5u);
  for (uint32_t key = 10; key < 15; ++key)
    EXPECT_EQ(seen.count(Bytes{uint8_t(key), 0, 0, 0}), 1u) << "key " << key;

  size_t visits = 0;
  err = bpf::forEachKey(fd, 4, "walked", [&](const Bytes &) { return ++visits < 2; });
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_EQ(visits, 2u) << "the walk stops when the visitor says so";
}

TEST_F(KeyWalk, ErrorsNameTheMap) {
  llvm::Error wrongSize = bpf::forEachKey(fd, 8, "walked", [](const Bytes &) { return true; });
  ASSERT_TRUE(bool(wrongSize));
  EXPECT_EQ(llvm::toString(std::move(wrongSize)), "map 'walked': keys have 4 bytes, not 8");

  int notAMap = dup(STDIN_FILENO);
  ASSERT_GE(notAMap, 0);
  llvm::Error broken = bpf::forEachKey(notAMap, 4, "gone", [](const Bytes &) { return true; });
  close(notAMap);
  ASSERT_TRUE(bool(broken));
  EXPECT_NE(llvm::toString(std::move(broken)).find("map 'gone': cannot query"),
            std::string::npos);
}

} // namespace
} // namespace morpheus::testing
