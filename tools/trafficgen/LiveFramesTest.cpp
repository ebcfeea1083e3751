// Sends live frames across a real veth pair into count_test.bpf.c, attached
// in native XDP mode on the far end, and checks that every frame arrives
// with the flow, MACs and checksums the generator promises.
#include "livegen.h"
#include "netns/VethPair.h"
#include "trafficgen/LiveFrames.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <fstream>
#include <map>
#include <memory>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <tuple>

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <unistd.h>

extern "C" const unsigned char count_test_bpf_start[], count_test_bpf_end[];

namespace {

using morpheus::testing::MacAddress;
using morpheus::testing::VethPair;
using morpheus::trafficgen::Flow;
using morpheus::trafficgen::LiveFramesGenerator;
using morpheus::trafficgen::LiveFramesOptions;
using morpheus::trafficgen::LiveFramesResult;

constexpr const char *kTag = "trafficgen_test";

// Mirrors enum count_slot in count_test.bpf.c.
enum CountSlot : uint32_t { Valid, NotIpv4, BadMac, BadIp, BadL4, SlotCount };

// (saddr, daddr, sport, dport, proto), host byte order.
using FlowTuple = std::tuple<uint32_t, uint32_t, uint16_t, uint16_t, uint8_t>;

FlowTuple tupleOf(const Flow &flow) {
  return {flow.saddr, flow.daddr, flow.sport, flow.dport, flow.proto};
}

// count_test.bpf.c attached in native mode to an interface of a namespace.
// The attachment is a BPF link, so closing its fd detaches the program
// without having to enter the namespace again.
class FrameCounter {
public:
  FrameCounter(const std::string &netns, const std::string &iface,
               const MacAddress &expectDst, const MacAddress &expectSrc) {
    object_.reset(bpf_object__open_mem(
        count_test_bpf_start,
        static_cast<size_t>(count_test_bpf_end - count_test_bpf_start), nullptr));
    if (!object_)
      throw std::runtime_error("opening count_test.bpf.c failed");
    if (bpf_object__load(object_.get()) != 0)
      throw std::runtime_error("loading count_test.bpf.c failed");
    countersFd_ = mapFd("counters");
    byFlowFd_ = mapFd("by_flow");

    uint8_t macs[12];
    std::copy(expectDst.begin(), expectDst.end(), macs);
    std::copy(expectSrc.begin(), expectSrc.end(), macs + 6);
    uint32_t zero = 0;
    if (bpf_map_update_elem(mapFd("expected_macs"), &zero, macs, BPF_ANY) != 0)
      throw std::runtime_error("writing expected_macs failed");

    int progFd = bpf_program__fd(
        bpf_object__find_program_by_name(object_.get(), "count_test"));
    morpheus::testing::runInNetns(netns, [&] {
      bpf_link_create_opts options{};
      options.sz = sizeof options;
      options.flags = XDP_FLAGS_DRV_MODE;
      int fd = bpf_link_create(progFd, morpheus::testing::interfaceIndex(iface),
                               BPF_XDP, &options);
      if (fd < 0)
        throw std::system_error(-fd, std::generic_category(),
                                "attaching count_test to " + iface + " in " + netns);
      link_.fd = fd;
    });
  }

  uint64_t count(CountSlot slot) const {
    uint64_t value = 0;
    uint32_t key = slot;
    bpf_map_lookup_elem(countersFd_, &key, &value);
    return value;
  }

  uint64_t total() const {
    uint64_t sum = 0;
    for (uint32_t slot = 0; slot < SlotCount; ++slot)
      sum += count(static_cast<CountSlot>(slot));
    return sum;
  }

  // Frames still queued on the veth when BPF_PROG_RUN returns are counted
  // later from NAPI, so wait for them rather than read once.
  uint64_t waitForTotal(uint64_t expected) const {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
    while (total() < expected && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    return total();
  }

  std::map<FlowTuple, uint64_t> perFlow() const {
    std::map<FlowTuple, uint64_t> seen;
    livegen_flow key{}, next{};
    const void *previous = nullptr;
    while (bpf_map_get_next_key(byFlowFd_, previous, &next) == 0) {
      uint64_t value = 0;
      bpf_map_lookup_elem(byFlowFd_, &next, &value);
      seen[{ntohl(next.saddr), ntohl(next.daddr), ntohs(next.sport),
            ntohs(next.dport), next.proto}] = value;
      key = next;
      previous = &key;
    }
    return seen;
  }

private:
  struct ObjectCloser {
    void operator()(bpf_object *object) const { bpf_object__close(object); }
  };
  struct LinkFd {
    int fd = -1;
    ~LinkFd() {
      if (fd >= 0)
        ::close(fd);
    }
  };

  int mapFd(const char *name) const {
    bpf_map *map = bpf_object__find_map_by_name(object_.get(), name);
    if (!map)
      throw std::runtime_error(std::string("count_test.bpf.c has no map ") + name);
    return bpf_map__fd(map);
  }

  // Before link_, so the program is detached before its object is closed.
  std::unique_ptr<bpf_object, ObjectCloser> object_;
  LinkFd link_;
  int countersFd_ = -1;
  int byFlowFd_ = -1;
};

class LiveFramesTest : public ::testing::Test {
protected:
  void SetUp() override {
    VethPair::sweepStale(kTag);
    veth_ = std::make_unique<VethPair>(kTag);
    counter_ = std::make_unique<FrameCounter>(veth_->nsB(), veth_->ifB(),
                                              veth_->macB(), veth_->macA());
  }

  LiveFramesOptions optionsFor(std::vector<Flow> flows) const {
    LiveFramesOptions options;
    options.netns = veth_->nsA();
    options.iface = veth_->ifA();
    options.dstMac = veth_->macB();
    options.flows = std::move(flows);
    return options;
  }

  // In this order so the counter detaches before the namespaces go away.
  std::unique_ptr<VethPair> veth_;
  std::unique_ptr<FrameCounter> counter_;
};

uint32_t ip(const char *text) { return morpheus::trafficgen::parseIpv4(text); }

TEST_F(LiveFramesTest, DeliversEveryFrameOfEveryFlowIntact) {
  const std::vector<Flow> flows = {
      {ip("10.1.0.1"), ip("10.2.0.1"), 1000, 80, IPPROTO_UDP},
      {ip("10.1.0.2"), ip("10.2.0.2"), 1001, 53, IPPROTO_UDP},
      {ip("10.1.0.3"), ip("10.2.0.3"), 1002, 443, IPPROTO_TCP},
      {ip("10.1.0.4"), ip("10.2.0.4"), 65535, 22, IPPROTO_TCP},
  };
  constexpr uint64_t kPackets = 100000;
  LiveFramesGenerator generator = LiveFramesGenerator::create(optionsFor(flows));

  LiveFramesResult result = generator.send(kPackets);

  EXPECT_EQ(result.packetsSent, kPackets);
  EXPECT_GT(result.kernelDurationNs, 0u);
  EXPECT_GT(result.mpps(), 0.0);
  EXPECT_EQ(counter_->waitForTotal(kPackets), kPackets);
  EXPECT_EQ(counter_->count(Valid), kPackets);
  EXPECT_EQ(counter_->count(NotIpv4), 0u);
  EXPECT_EQ(counter_->count(BadMac), 0u);
  EXPECT_EQ(counter_->count(BadIp), 0u);
  EXPECT_EQ(counter_->count(BadL4), 0u);
  std::map<FlowTuple, uint64_t> expected;
  for (const Flow &flow : flows)
    expected[tupleOf(flow)] = kPackets / flows.size();
  EXPECT_EQ(counter_->perFlow(), expected);
}

TEST_F(LiveFramesTest, RoundRobinContinuesAcrossSends) {
  const std::vector<Flow> flows = {
      {ip("192.168.0.1"), ip("172.16.0.1"), 5000, 80, IPPROTO_TCP},
      {ip("192.168.0.1"), ip("172.16.0.2"), 5000, 80, IPPROTO_UDP},
      {ip("192.168.0.1"), ip("172.16.0.3"), 5000, 80, IPPROTO_TCP},
  };
  LiveFramesOptions options = optionsFor(flows);
  options.packets = 1000;
  options.frameLength = 128;
  options.batchSize = 17; // not a divisor of anything sent
  LiveFramesGenerator generator = LiveFramesGenerator::create(options);

  uint64_t sent = generator.send().packetsSent;
  sent += generator.send(1001).packetsSent;
  sent += generator.send(999).packetsSent;

  ASSERT_EQ(sent, 3000u);
  EXPECT_EQ(counter_->waitForTotal(sent), sent);
  EXPECT_EQ(counter_->count(Valid), sent);
  std::map<FlowTuple, uint64_t> expected;
  for (const Flow &flow : flows)
    expected[tupleOf(flow)] = 1000;
  EXPECT_EQ(counter_->perFlow(), expected);
}

TEST_F(LiveFramesTest, SendsFromAnotherThreadWithoutMovingTheCaller) {
  LiveFramesGenerator generator = LiveFramesGenerator::create(
      optionsFor({{ip("10.0.0.2"), ip("10.0.0.1"), 1, 2, IPPROTO_UDP}}));
  auto ownNetns = [] {
    char target[64] = {};
    ssize_t n = ::readlink("/proc/thread-self/ns/net", target, sizeof target - 1);
    return n > 0 ? std::string(target, static_cast<size_t>(n)) : std::string();
  };
  const std::string before = ownNetns();

  uint64_t sent = 0;
  std::thread sender([&] { sent = generator.send(5000).packetsSent; });
  sender.join();
  sent += generator.send(5000).packetsSent;

  EXPECT_EQ(ownNetns(), before);
  EXPECT_EQ(counter_->waitForTotal(sent), 10000u);
  EXPECT_EQ(counter_->count(Valid), 10000u);
}

TEST_F(LiveFramesTest, ErrorsNameTheNamespaceAndInterface) {
  LiveFramesOptions options = optionsFor({{1, 2, 3, 4, IPPROTO_UDP}});
  options.iface = "mphnosuch0";
  try {
    LiveFramesGenerator::create(options);
    FAIL() << "create() accepted a missing interface";
  } catch (const std::runtime_error &e) {
    std::string message = e.what();
    EXPECT_NE(message.find("mphnosuch0"), std::string::npos) << message;
    EXPECT_NE(message.find(veth_->nsA()), std::string::npos) << message;
  }

  options = optionsFor({{1, 2, 3, 4, IPPROTO_ICMP}});
  EXPECT_THROW(LiveFramesGenerator::create(options), std::invalid_argument);
  options = optionsFor({});
  EXPECT_THROW(LiveFramesGenerator::create(options), std::invalid_argument);
  options = optionsFor({{1, 2, 3, 4, IPPROTO_UDP}});
  options.frameLength = 60;
  EXPECT_THROW(LiveFramesGenerator::create(options), std::invalid_argument);
}

bool netnsExists(const std::string &name) {
  return ::access(("/run/netns/" + name).c_str(), F_OK) == 0;
}

TEST(VethPairTest, NamesFitAndCleanupRemovesBothNamespaces) {
  std::string nsA, nsB;
  {
    VethPair veth(kTag);
    nsA = veth.nsA();
    nsB = veth.nsB();
    EXPECT_LE(veth.ifA().size(), 15u);
    EXPECT_LE(veth.ifB().size(), 15u);
    EXPECT_EQ(nsA.rfind(std::string("mph-") + kTag + "-" + std::to_string(::getpid()) + "-", 0), 0u);
    EXPECT_TRUE(netnsExists(nsA));
    EXPECT_TRUE(netnsExists(nsB));
    EXPECT_GT(veth.ifindexA(), 0);
    EXPECT_GT(veth.ifindexB(), 0);
    EXPECT_NE(veth.macA(), MacAddress{});
    EXPECT_NE(veth.macA(), veth.macB());
  }
  EXPECT_FALSE(netnsExists(nsA));
  EXPECT_FALSE(netnsExists(nsB));
}

TEST(VethPairTest, SweepStaleDeletesOnlyNamespacesOfDeadProcesses) {
  // Every pid is below pid_max, so that one cannot belong to a process.
  int pidMax = 0;
  std::ifstream("/proc/sys/kernel/pid_max") >> pidMax;
  ASSERT_GT(pidMax, 0);
  // A tag of its own: the other cases of this binary sweep kTag when they
  // start, and ctest runs them beside this one, which could then find its
  // stale namespace already gone.
  constexpr const char *tag = "trafficgen_sweep";
  const std::string stale = std::string("mph-") + tag + "-" +
                            std::to_string(pidMax) + "-00000000-a";
  ASSERT_EQ(std::system(("ip netns add " + stale).c_str()), 0);
  VethPair live(tag);

  EXPECT_GE(VethPair::sweepStale(tag), 1u);

  EXPECT_FALSE(netnsExists(stale));
  if (netnsExists(stale))
    std::system(("ip netns del " + stale).c_str());
  EXPECT_TRUE(netnsExists(live.nsA()));
  EXPECT_TRUE(netnsExists(live.nsB()));
}

} // namespace
