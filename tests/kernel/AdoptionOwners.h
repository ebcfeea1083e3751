// The owners of the adoption and agent kernel tests: small libbpf loaders
// in the test itself that load a program (examples/policy_fwd.bpf.c,
// tests/programs/tc_classifier.bpf.c, tests/programs/tail_call_chain.bpf.c,
// compiled by the build and embedded), fill its maps and attach it as
// another loader would (netlink, a pinned XDP link, a pinned tcx link);
// and how a test compares what a hook answers with the owner's program.
#pragma once

#include "ChildProcess.h"
#include "KernelSupport.h"
#include "TcClassifier.h"
#include "XdpHooks.h"
#include "backend/bpf/ProgramLink.h"
#include "netns/VethPair.h"
#include "policy_fwd.h"
#include "runtime/Daemon.h"
#include "runtime/PacketSamples.h"
#include "support/Netns.h"
#include "trafficgen/LiveFrames.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/if_link.h>
#include <net/if.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

extern "C" const unsigned char policy_fwd_owner_start[], policy_fwd_owner_end[];
extern "C" const unsigned char tc_classifier_owner_start[], tc_classifier_owner_end[];
extern "C" const unsigned char tail_call_chain_owner_start[], tail_call_chain_owner_end[];

namespace morpheus::testing {

// How the owner's loader loads its program: as libbpf and bpftool do
// (expected attach type BPF_XDP), or as a raw loader (iproute2's, one
// calling bpf(BPF_PROG_LOAD) itself) does, with none.
enum class Loader { Libbpf, Raw };

// `program` attached to the veth's B side through netlink, in SKB mode, as
// a loader without links attaches; detached when this goes.
class NetlinkAttachment {
public:
  NetlinkAttachment(const VethPair &veth, int program) : netns(veth.nsB()) {
    EXPECT_FALSE(bool(netns::runInNetns(netns, [&]() -> Error {
      int index = if_nametoindex(veth.ifB().c_str());
      if (bpf_xdp_attach(index, program, XDP_FLAGS_SKB_MODE, nullptr))
        return makeSystemError(errno, "netlink attach");
      ifindex = index;
      return Error::success();
    })));
  }
  NetlinkAttachment(const NetlinkAttachment &) = delete;
  NetlinkAttachment &operator=(const NetlinkAttachment &) = delete;
  ~NetlinkAttachment() {
    if (ifindex)
      llvm::consumeError(netns::runInNetns(netns, [&]() -> Error {
        bpf_xdp_detach(ifindex, XDP_FLAGS_SKB_MODE, nullptr);
        return Error::success();
      }));
  }

private:
  std::string netns;
  int ifindex = 0;
};

// The owner: policy_fwd loaded and configured by plain libbpf, attached
// through netlink or a pinned link in the veth's namespace.
class Owner {
public:
  explicit Owner(Loader loader = Loader::Libbpf) {
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "lb_owner");
    obj = bpf_object__open_mem(policy_fwd_owner_start,
                               policy_fwd_owner_end - policy_fwd_owner_start, &opts);
    if (obj && loader == Loader::Raw)
      bpf_program__set_expected_attach_type(bpf_object__find_program_by_name(obj, "policy_fwd"),
                                            bpf_attach_type(0));
    if (!obj || bpf_object__load(obj)) {
      ADD_FAILURE() << "the owner's libbpf load failed";
      return;
    }
    program = bpf_program__fd(bpf_object__find_program_by_name(obj, "policy_fwd"));
    config(CFG_POLICY_ENABLED, ACTION_PASS);
    policy(0x0a000001, 80, ACTION_DROP);
  }
  ~Owner() {
    if (linkFd >= 0)
      close(linkFd);
    if (!linkPin.empty())
      unlink(linkPin.c_str());
    netlink.reset();
    bpf_object__close(obj);
  }

  void config(uint32_t flags, uint32_t defaultAction) {
    struct config value = {flags, defaultAction};
    uint32_t zero = 0;
    ASSERT_EQ(bpf_map_update_elem(mapFd("config"), &zero, &value, BPF_ANY), 0);
  }
  void policy(uint32_t daddr, uint16_t dport, uint32_t action) {
    policy_key key = {htonl(daddr), htons(dport), IPPROTO_UDP, 0};
    policy_value value = {action, {2, 0, 0, 0, 0, 1}, {2, 0, 0, 0, 0, 2}};
    ASSERT_EQ(bpf_map_update_elem(mapFd("policy"), &key, &value, BPF_ANY), 0);
  }
  int mapFd(const char *name) const { return bpf_map__fd(bpf_object__find_map_by_name(obj, name)); }

  void attachNetlink(const VethPair &veth) { netlink.emplace(veth, program); }
  void attachLink(const VethPair &veth, const std::string &pin) {
    ASSERT_FALSE(bool(netns::runInNetns(veth.nsB(), [&]() -> Error {
      LIBBPF_OPTS(bpf_link_create_opts, opts, .flags = XDP_FLAGS_SKB_MODE);
      linkFd = bpf_link_create(program, if_nametoindex(veth.ifB().c_str()), BPF_XDP, &opts);
      if (linkFd < 0)
        return makeSystemError(errno, "XDP link");
      return Error::success();
    })));
    ASSERT_EQ(bpf_obj_pin(linkFd, pin.c_str()), 0);
    linkPin = pin;
  }

  int program = -1;
  int linkFd = -1;

private:
  bpf_object *obj = nullptr;
  std::string linkPin;
  std::optional<NetlinkAttachment> netlink;
};

// What a killed run of the test tagged `tag` left is swept first.
inline std::string_view sweptFirst(std::string_view tag) {
  VethPair::sweepStale(tag);
  return tag;
}


inline std::vector<Bytes> samplePackets() {
  std::vector<Bytes> packets;
  for (uint32_t daddr : {0x0a000001u, 0x0a000002u})
    for (uint16_t dport : {80, 81})
      for (uint8_t protocol : {IPPROTO_UDP, IPPROTO_TCP}) {
        PacketSpec spec;
        spec.daddr = daddr;
        spec.dport = dport;
        spec.protocol = protocol;
        packets.push_back(buildPacket(spec));
      }
  PacketSpec fragment;
  fragment.fragOff = 0x2000;
  packets.push_back(buildPacket(fragment));
  packets.push_back(Bytes(10, 0)); // malformed
  return packets;
}

// Every sample through the hook's program answers as the owner's program
// (what each test compares: verdicts and bytes of sample packets).
using ServesAsTheOwner = std::function<void(uint32_t hookId, const std::string &when)>;

inline void expectServesAsTheOwner(uint32_t hookId, int ownerProgram, const std::string &when) {
  Fd hook(bpf_prog_get_fd_by_id(hookId));
  ASSERT_GE(hook.fd, 0) << when;
  for (const Bytes &packet : samplePackets())
    EXPECT_EQ(runOnce(hook.fd, packet), runOnce(ownerProgram, packet))
        << when << ": packet of " << packet.size() << " bytes";
}

// The owner array emptied for a moment: what the hook answers then comes
// from the specialized version alone (the trampoline would say
// XDP_ABORTED or TC_ACT_SHOT if no version were reached).
inline void expectSpecializedServes(const ServesAsTheOwner &servesAsTheOwner, uint32_t hookId,
                                    int ownerProgram, const std::string &ownerPin) {
  Fd owner(bpf_obj_get(ownerPin.c_str()));
  ASSERT_GE(owner.fd, 0);
  uint32_t slot = 0;
  ASSERT_EQ(bpf_map_delete_elem(owner.fd, &slot), 0);
  servesAsTheOwner(hookId, "specialized version alone");
  ASSERT_EQ(bpf_map_update_elem(owner.fd, &slot, &ownerProgram, BPF_ANY), 0);
}

inline void expectSpecializedServes(uint32_t hookId, int ownerProgram,
                                    const std::string &ownerPin) {
  expectSpecializedServes(
      [&](uint32_t hook, const std::string &when) {
        expectServesAsTheOwner(hook, ownerProgram, when);
      },
      hookId, ownerProgram, ownerPin);
}

inline runtime::DaemonOptions adoptOptions(const VethPair &veth, const PinDir &pins) {
  runtime::DaemonOptions options;
  options.adopt = veth.ifB();
  options.netns = veth.nsB();
  options.optimizer.pinDir = pins.path() + "/adopt";
  options.onExit = runtime::OnExit::KeepServing;
  options.quiet = true;
  return options;
}

// The owner of tests/programs/tail_call_chain.bpf.c: its entry adds one
// to a payload byte and tail-calls slot 0 of `jumps`, which (once
// `closeTheChain`) holds the stage, which does the same: as many stages as
// the kernel allows, a cycle through the array. Attached through netlink.
class ChainOwner {
public:
  explicit ChainOwner(const VethPair &veth) {
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "chain_owner");
    obj = bpf_object__open_mem(tail_call_chain_owner_start,
                               tail_call_chain_owner_end - tail_call_chain_owner_start, &opts);
    if (!obj || bpf_object__load(obj)) {
      ADD_FAILURE() << "the owner's libbpf load failed";
      return;
    }
    entry = bpf_program__fd(bpf_object__find_program_by_name(obj, "chain_entry"));
    uint32_t zero = 0, one = 1;
    EXPECT_EQ(bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(obj, "step")), &zero,
                                  &one, BPF_ANY),
              0);
    attached.emplace(veth, entry);
  }
  ChainOwner(const ChainOwner &) = delete;
  ChainOwner &operator=(const ChainOwner &) = delete;
  ~ChainOwner() {
    attached.reset();
    bpf_object__close(obj);
  }

  void closeTheChain() {
    uint32_t zero = 0;
    int stage = bpf_program__fd(bpf_object__find_program_by_name(obj, "chain_stage"));
    ASSERT_EQ(bpf_map_update_elem(bpf_map__fd(bpf_object__find_map_by_name(obj, "jumps")), &zero,
                                  &stage, BPF_ANY),
              0);
  }
  // The stages a packet ran through `programFd` (the byte the chain adds to).
  static int stagesRun(int programFd) {
    constexpr size_t CounterOffset = 14 + 20 + 8; // tail_call_chain's COUNTER_OFFSET
    Bytes packet = buildPacket({});
    RunResult result = runOnce(programFd, packet);
    return result.output.size() > CounterOffset
               ? int(result.output[CounterOffset]) - int(packet[CounterOffset])
               : -1;
  }

  int entry = -1;

private:
  bpf_object *obj = nullptr;
  std::optional<NetlinkAttachment> attached;
};

// The TC owner: tc_classifier loaded and configured by plain libbpf
// (drop the blocked source, rewrite DSCP), attached through a tcx link on
// the veth's ingress and pinned, as a CNI agent or a libbpf loader does.
class TcOwner {
public:
  static constexpr uint32_t BlockedSource = 0x0a0000c8; // 10.0.0.200

  TcOwner() {
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "tc_owner");
    obj = bpf_object__open_mem(tc_classifier_owner_start,
                               tc_classifier_owner_end - tc_classifier_owner_start, &opts);
    if (!obj || bpf_object__load(obj)) {
      ADD_FAILURE() << "the TC owner's libbpf load failed";
      return;
    }
    program = bpf_program__fd(bpf_object__find_program_by_name(obj, "tc_classify"));
    configure(1, 0, 10);
    uint32_t source = htonl(BlockedSource), reason = 7;
    EXPECT_EQ(bpf_map_update_elem(mapFd("blocked_sources"), &source, &reason, BPF_ANY), 0);
  }
  ~TcOwner() {
    if (linkFd >= 0)
      close(linkFd);
    if (!linkPin.empty())
      unlink(linkPin.c_str());
    bpf_object__close(obj);
  }

  void configure(uint32_t mode, uint32_t mark, uint8_t dscp) {
    TcConfig config{mode, mark, dscp, {}};
    uint32_t zero = 0;
    ASSERT_EQ(bpf_map_update_elem(mapFd("tc_config"), &zero, &config, BPF_ANY), 0);
  }
  int mapFd(const char *name) const { return bpf_map__fd(bpf_object__find_map_by_name(obj, name)); }
  void attachTcx(const VethPair &veth, const std::string &pin) {
    ASSERT_FALSE(bool(netns::runInNetns(veth.nsB(), [&]() -> Error {
      linkFd =
          bpf_link_create(program, if_nametoindex(veth.ifB().c_str()),
                          bpf_attach_type(bpf::tcxAttachType(bpf::TcDirection::Ingress)), nullptr);
      if (linkFd < 0)
        return makeSystemError(errno, "tcx link");
      return Error::success();
    })));
    ASSERT_EQ(bpf_obj_pin(linkFd, pin.c_str()), 0);
    linkPin = pin;
  }
  uint32_t linkProgram() const {
    bpf_link_info info = {};
    uint32_t length = sizeof(info);
    return bpf_obj_get_info_by_fd(linkFd, &info, &length) ? 0u : info.prog_id;
  }

  int program = -1;
  int linkFd = -1;

private:
  bpf_object *obj = nullptr;
  std::string linkPin;
};

// TC samples: the blocked source and others, over UDP and TCP, with and
// without DSCP bits, a fragment and malformed bytes.
inline std::vector<Bytes> tcSamples() {
  std::vector<Bytes> packets = samplePackets();
  for (uint32_t saddr : {TcOwner::BlockedSource, 0x0a0000c9u})
    for (uint8_t tos : {0, 3}) {
      PacketSpec spec;
      spec.saddr = saddr;
      spec.tos = tos;
      packets.push_back(buildPacket(spec));
    }
  return packets;
}

inline void expectTcServesAsTheOwner(uint32_t hookId, int ownerProgram, const std::string &when) {
  Fd hook(bpf_prog_get_fd_by_id(hookId));
  ASSERT_GE(hook.fd, 0) << when;
  for (const Bytes &packet : tcSamples()) {
    auto throughHook = runtime::runPacket(hook.fd, bpf::ProgramType::Tc, {.packet = packet});
    auto owners = runtime::runPacket(ownerProgram, bpf::ProgramType::Tc, {.packet = packet});
    ASSERT_TRUE(throughHook && owners) << when;
    EXPECT_EQ(throughHook->verdict, owners->verdict) << when << ": " << packet.size() << " bytes";
    EXPECT_EQ(throughHook->output, owners->output) << when << ": " << packet.size() << " bytes";
  }
}

// Real frames across the veth (a blocked flow and a clean one), counted by
// the owner's per-CPU counters: how many passed, were dropped, were left
// alone. The same frames give the same counts whichever program serves.
inline std::vector<uint64_t> countsOfRealFrames(const VethPair &veth, const TcOwner &owner) {
  std::vector<trafficgen::Flow> flows = {{TcOwner::BlockedSource, 0x0a000001, 1000, 80},
                                         {0x0a0000c9, 0x0a000001, 1000, 80}};
  int counters = owner.mapFd("tc_counters");
  std::vector<uint64_t> before = perCpuCounters(counters, 4);
  trafficgen::LiveFramesGenerator traffic =
      trafficgen::LiveFramesGenerator::create(trafficgen::acrossVeth(veth, flows));
  const uint64_t packets = 200;
  EXPECT_EQ(traffic.send(packets).packetsSent, packets);
  std::vector<uint64_t> delta(4);
  EXPECT_TRUE(waitFor(
      [&] {
        std::vector<uint64_t> now = perCpuCounters(counters, 4);
        uint64_t total = 0;
        for (size_t i = 0; i < delta.size(); ++i)
          total += delta[i] = now[i] - before[i];
        return total >= packets;
      },
      std::chrono::seconds(2)))
      << "every frame counted";
  return delta;
}

} // namespace morpheus::testing
