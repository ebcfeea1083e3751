// The client library for control planes (src/client): typed reads and
// guarded writes of a pinned map, the key walk, and transactions that apply
// all of a batch or none of it.
#include "KernelSupport.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/Guard.h"
#include "backend/bpf/MapIO.h"
#include "client/Transaction.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cstring>
#include <map>

namespace morpheus::testing {
namespace {

struct Value {
  uint32_t action;
  uint32_t port;
};

// A map pinned in `pins`, and the fd the test keeps to look behind the
// library's back.
int pinnedMap(const PinDir &pins, const char *name, bpf_map_type type, uint32_t valueSize,
              uint32_t entries) {
  int fd = bpf_map_create(type, name, 4, valueSize, entries, nullptr);
  EXPECT_GE(fd, 0) << name << ": " << strerror(errno);
  EXPECT_EQ(bpf_obj_pin(fd, (pins.path() + "/" + name).c_str()), 0) << name;
  return fd;
}

TEST(ClientLibrary, TypedReadsWritesAndWalks) {
  PinDir pins("client_typed");
  int fd = pinnedMap(pins, "policy", BPF_MAP_TYPE_HASH, sizeof(Value), 8);
  auto maps = client::PinnedMaps::open(pins.path(), {"policy"});
  ASSERT_THAT_EXPECTED(maps, llvm::Succeeded());
  client::Map &policy = (*maps)["policy"];
  EXPECT_FALSE(policy.guarded()) << "no guard pinned beside it";
  EXPECT_EQ(policy.maxEntries(), 8u);

  for (uint32_t key = 1; key <= 3; ++key) {
    llvm::Error err = policy.update(key, Value{key * 10, key});
    ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  }
  Value raw;
  uint32_t two = 2;
  ASSERT_EQ(bpf_map_lookup_elem(fd, &two, &raw), 0) << "written to the kernel's map";
  EXPECT_EQ(raw.action, 20u);

  auto found = policy.lookup<Value>(uint32_t(3));
  ASSERT_THAT_EXPECTED(found, llvm::Succeeded());
  ASSERT_TRUE(found->has_value());
  EXPECT_EQ((*found)->port, 3u);
  auto absent = policy.lookup<Value>(uint32_t(7));
  ASSERT_THAT_EXPECTED(absent, llvm::Succeeded());
  EXPECT_FALSE(absent->has_value());
  auto missing = policy.at<Value>(uint32_t(7));
  ASSERT_FALSE(bool(missing));
  EXPECT_EQ(llvm::toString(missing.takeError()),
            "map '" + pins.path() + "/policy': no entry for key 07 00 00 00");
  auto wrongSize = policy.lookup<uint32_t>(uint32_t(1));
  ASSERT_FALSE(bool(wrongSize));
  EXPECT_EQ(llvm::toString(wrongSize.takeError()),
            "map '" + pins.path() + "/policy': values have 8 bytes, not 4");

  auto entries = policy.entriesAs<uint32_t, Value>();
  ASSERT_THAT_EXPECTED(entries, llvm::Succeeded());
  std::map<uint32_t, uint32_t> actions;
  for (const auto &[key, value] : *entries)
    actions[key] = value.action;
  EXPECT_EQ(actions, (std::map<uint32_t, uint32_t>{{1, 10}, {2, 20}, {3, 30}}));
  auto keys = policy.keysAs<uint32_t>();
  ASSERT_THAT_EXPECTED(keys, llvm::Succeeded());
  EXPECT_EQ(keys->size(), 3u);

  llvm::Error removed = policy.remove(uint32_t(2));
  ASSERT_THAT_ERROR(std::move(removed), llvm::Succeeded());
  EXPECT_NE(bpf_map_lookup_elem(fd, &two, &raw), 0);
  llvm::Error badKey = policy.update(uint64_t(1), Value{});
  ASSERT_TRUE(bool(badKey));
  EXPECT_NE(llvm::toString(std::move(badKey)).find("key has 8 bytes, the map's keys have 4"),
            std::string::npos);
  close(fd);
}

TEST(ClientLibrary, PerCpuCountersAndArraySlots) {
  PinDir pins("client_arrays");
  int counters = pinnedMap(pins, "counters", BPF_MAP_TYPE_PERCPU_ARRAY, 8, 4);
  int slots = pinnedMap(pins, "slots", BPF_MAP_TYPE_ARRAY, 4, 8);
  auto maps = client::PinnedMaps::open(pins.path(), {"counters", "slots"});
  ASSERT_THAT_EXPECTED(maps, llvm::Succeeded());

  llvm::Error err = (*maps)["counters"].update(uint32_t(2), uint64_t(5)); // on every CPU
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  auto each = (*maps)["counters"].eachCpu<uint64_t>(uint32_t(2));
  ASSERT_THAT_EXPECTED(each, llvm::Succeeded());
  ASSERT_EQ(each->size(), size_t(bpf::possibleCpus()));
  for (uint64_t value : *each)
    EXPECT_EQ(value, 5u);
  auto sum = (*maps)["counters"].sumOverCpus(2);
  ASSERT_THAT_EXPECTED(sum, llvm::Succeeded());
  EXPECT_EQ(*sum, 5u * bpf::possibleCpus());
  auto plain = (*maps)["counters"].lookup<uint64_t>(uint32_t(2));
  ASSERT_FALSE(bool(plain)) << "a per-CPU value is read per CPU";
  llvm::consumeError(plain.takeError());

  for (uint32_t index = 0; index < 8; ++index) {
    uint32_t value = 100 + index;
    ASSERT_EQ(bpf_map_update_elem(slots, &index, &value, BPF_ANY), 0);
  }
  auto middle = (*maps)["slots"].slots<uint32_t>(2, 3);
  ASSERT_THAT_EXPECTED(middle, llvm::Succeeded());
  EXPECT_EQ(*middle, (std::vector<uint32_t>{102, 103, 104}));
  auto beyond = (*maps)["slots"].slots<uint32_t>(6, 4);
  ASSERT_FALSE(bool(beyond));
  EXPECT_NE(llvm::toString(beyond.takeError()).find("slots 6..9 are beyond its end"),
            std::string::npos);
  close(counters);
  close(slots);
}

// A change through the library is bracketed by the guard beside the map:
// two bumps per single change, two per committed transaction.
TEST(ClientLibrary, ChangesBumpTheGuardBesideTheMap) {
  PinDir pins("client_guard");
  int fd = pinnedMap(pins, "policy", BPF_MAP_TYPE_HASH, 4, 8);
  auto guard = bpf::GuardWord::create();
  ASSERT_THAT_EXPECTED(guard, llvm::Succeeded());
  ASSERT_EQ(bpf_obj_pin(guard->fd(), (pins.path() + "/" + bpf::GuardMapName).c_str()), 0);

  auto maps = client::PinnedMaps::open(pins.path(), {"policy"});
  ASSERT_THAT_EXPECTED(maps, llvm::Succeeded());
  ASSERT_TRUE((*maps)["policy"].guarded());
  uint64_t before = guard->version();
  llvm::Error err = (*maps)["policy"].update(uint32_t(1), uint32_t(1));
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_EQ(guard->version(), before + 2);

  client::Transaction transaction(*maps);
  for (uint32_t key = 2; key < 6; ++key)
    transaction.update("policy", key, key);
  transaction.remove("policy", uint32_t(1));
  err = transaction.commit();
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_EQ(guard->version(), before + 4) << "one bracket for the whole batch";
  EXPECT_FALSE(guard->changing());
  close(fd);
}

TEST(ClientLibrary, TransactionAFailedChangeUndoesTheEarlierOnes) {
  PinDir pins("transaction");
  int fd = bpf_map_create(BPF_MAP_TYPE_HASH, "small", 4, 4, 2, nullptr);
  ASSERT_GE(fd, 0);
  ASSERT_EQ(bpf_obj_pin(fd, (pins.path() + "/small").c_str()), 0);
  uint32_t key = 1, value = 100;
  ASSERT_EQ(bpf_map_update_elem(fd, &key, &value, BPF_ANY), 0);

  auto maps = client::PinnedMaps::open(pins.path(), {"small"});
  ASSERT_THAT_EXPECTED(maps, llvm::Succeeded());
  client::Transaction transaction(*maps);
  transaction.update("small", uint32_t(1), uint32_t(111)); // overwrite
  transaction.update("small", uint32_t(2), uint32_t(222)); // fills the map
  transaction.update("small", uint32_t(3), uint32_t(333)); // no room: fails
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

TEST(ClientLibrary, TransactionUndoRestoresReplacedInnerMaps) {
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

  auto maps = client::PinnedMaps::open(pins.path(), {"outer"});
  ASSERT_THAT_EXPECTED(maps, llvm::Succeeded());
  client::Transaction transaction(*maps);
  transaction.update("outer", uint32_t(1), uint32_t(innerB)); // replace the inner map
  transaction.update("outer", uint32_t(2), uint32_t(innerB)); // no room: fails
  llvm::Error err = transaction.commit();
  ASSERT_TRUE(bool(err));
  llvm::consumeError(std::move(err));

  uint32_t id = 0;
  ASSERT_EQ(bpf_map_lookup_elem(outer, &one, &id), 0);
  EXPECT_EQ(id, mapIdOf(innerA)) << "the replaced inner map is back";
  for (int fd : {outer, innerA, innerB})
    close(fd);
}

} // namespace
} // namespace morpheus::testing
