// Network-function config loaders apply all of a file or none of it.
#include "KernelSupport.h"
#include "nf/common/ConfigFile.h"
#include "nf/common/MapTransaction.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <fstream>

namespace morpheus::testing {
namespace {

Bytes u32(uint32_t value) { return Bytes{uint8_t(value), uint8_t(value >> 8), uint8_t(value >> 16), uint8_t(value >> 24)}; }

TEST(MapTransaction, AFailedChangeUndoesTheEarlierOnes) {
  PinDir pins("transaction");
  int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "small", 4, 4, 2, nullptr);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(bpf_obj_pin(fd, (pins.path() + "/small").c_str()), 0);
  uint32_t key = 1, value = 100;
  ASSERT_EQ(bpf_map_update_elem(fd, &key, &value, BPF_ANY), 0);

  auto maps = nf::PinnedMaps::open(pins.path(), {"small"});
  ASSERT_TRUE(bool(maps)) << llvm::toString(maps.takeError());
  nf::MapTransaction transaction(*maps);
  transaction.update("small", u32(1), u32(111)); // overwrite
  transaction.update("small", u32(2), u32(222)); // fills the map
  transaction.update("small", u32(3), u32(333)); // no room: fails
  llvm::Error err = transaction.commit();
  ASSERT_TRUE(bool(err));
  std::string message = llvm::toString(std::move(err));
  EXPECT_NE(message.find("change 3 of 3 failed, earlier changes undone"), std::string::npos)
      << message;

  EXPECT_EQ(bpf_map_lookup_elem(fd, &key, &value), 0);
  EXPECT_EQ(value, 100u) << "the overwritten value is back";
  uint32_t two = 2;
  EXPECT_NE(bpf_map_lookup_elem(fd, &two, &value), 0) << "the insert was undone";
  close(fd);
}

TEST(MapTransaction, UndoRestoresReplacedInnerMaps) {
  PinDir pins("mapofmaps");
  int innerA = bpf_map_create(BPF_MAP_TYPE_ARRAY, "inner_a", 4, 4, 1, nullptr);
  int innerB = bpf_map_create(BPF_MAP_TYPE_ARRAY, "inner_b", 4, 4, 1, nullptr);
  ASSERT_GE(innerA, 0);
  ASSERT_GE(innerB, 0);
  LIBBPF_OPTS(bpf_map_create_opts, options, .inner_map_fd = uint32_t(innerA));
  int outer = bpf_map_create(BPF_MAP_TYPE_HASH_OF_MAPS, "outer", 4, 4, 1, &options);
  ASSERT_GE(outer, 0);
  ASSERT_EQ(bpf_obj_pin(outer, (pins.path() + "/outer").c_str()), 0);
  uint32_t one = 1;
  ASSERT_EQ(bpf_map_update_elem(outer, &one, &innerA, BPF_ANY), 0);

  auto maps = nf::PinnedMaps::open(pins.path(), {"outer"});
  ASSERT_TRUE(bool(maps)) << llvm::toString(maps.takeError());
  nf::MapTransaction transaction(*maps);
  transaction.update("outer", u32(1), u32(innerB)); // replace the inner map
  transaction.update("outer", u32(2), u32(innerB)); // no room: fails
  llvm::Error err = transaction.commit();
  ASSERT_TRUE(bool(err));
  llvm::consumeError(std::move(err));

  uint32_t id = 0;
  ASSERT_EQ(bpf_map_lookup_elem(outer, &one, &id), 0);
  EXPECT_EQ(id, mapIdOf(innerA)) << "the replaced inner map is back";
  for (int fd : {outer, innerA, innerB})
    close(fd);
}

TEST(ConfigFile, ErrorsNameFileAndLine) {
  std::string path = "/tmp/morpheus-config-test-" + std::to_string(getpid()) + ".txt";
  std::ofstream(path) << "# routes\n\n10.0.0.0/8 192.168.1.1  # core\n10.1.0.0/33 1.2.3.4\n";
  auto lines = nf::readConfig(path);
  ASSERT_TRUE(bool(lines));
  ASSERT_EQ(lines->size(), 2u);
  EXPECT_EQ((*lines)[0].number, 3u);
  auto good = nf::parsePrefix((*lines)[0], (*lines)[0].words[0], "prefix");
  ASSERT_TRUE(bool(good));
  EXPECT_EQ(good->address, 0x0a000000u);
  EXPECT_EQ(good->length, 8);
  auto bad = nf::parsePrefix((*lines)[1], (*lines)[1].words[0], "prefix");
  ASSERT_FALSE(bool(bad));
  EXPECT_EQ(llvm::toString(bad.takeError()), path + ":4: prefix: 33 is larger than 32");
  auto hostBits = nf::parsePrefix((*lines)[1], "10.0.0.1/8", "prefix");
  ASSERT_FALSE(bool(hostBits));
  EXPECT_NE(llvm::toString(hostBits.takeError()).find("host bits"), std::string::npos);
  auto range = nf::parsePortRange((*lines)[0], "80:70", "dport");
  ASSERT_FALSE(bool(range));
  EXPECT_NE(llvm::toString(range.takeError()).find("empty"), std::string::npos);
  unlink(path.c_str());
}

} // namespace
} // namespace morpheus::testing
