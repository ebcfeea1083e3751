// The control plane: what load-ports and load-static put in the maps, that
// a bad line is reported with its line number and changes nothing, aging,
// and the command line.
#include "SwitchTestSupport.h"

#include <bpf/bpf.h>
#include <gmock/gmock.h>
#include <unistd.h>

#include <array>
#include <cstdio>
#include <set>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::l2switch::testing {
namespace {

using ::testing::HasSubstr;

// Every map of the switch as bytes (flood groups: each id with the ports of
// its inner map), to compare whole states.
struct SwitchState {
  std::map<uint32_t, std::vector<uint8_t>> ports;
  std::map<uint32_t, std::array<uint32_t, 4>> vlans; // counts, groups
  std::map<uint32_t, std::set<uint32_t>> groups;
  std::set<uint32_t> txPorts;
  std::map<l2sw_fdb_key, std::pair<uint32_t, uint32_t>> fdb; // ifindex, flags

  bool operator==(const SwitchState &) const = default;
};

// Keys of a map with u32 keys and values (devmaps, flood_groups).
std::vector<uint32_t> keysOf(int fd) {
  std::vector<uint32_t> keys;
  for (const auto &[key, value] : entriesOf<uint32_t, uint32_t>(fd))
    keys.push_back(key);
  return keys;
}

std::set<uint32_t> groupMembers(uint32_t mapId) {
  int fd = bpf_map_get_fd_by_id(mapId);
  EXPECT_GE(fd, 0);
  std::vector<uint32_t> keys = keysOf(fd);
  close(fd);
  return {keys.begin(), keys.end()};
}

class Config : public SwitchTest {
protected:
  l2sw_port portEntry(const std::string &name) {
    l2sw_port entry = {};
    uint32_t ifindex = port(name);
    EXPECT_EQ(bpf_map_lookup_elem(program.mapFd("ports"), &ifindex, &entry), 0) << name;
    return entry;
  }

  l2sw_vlan vlanEntry(uint32_t vlan) {
    l2sw_vlan entry = {};
    EXPECT_EQ(bpf_map_lookup_elem(program.mapFd("vlans"), &vlan, &entry), 0);
    return entry;
  }

  std::set<uint32_t> groupOf(uint32_t group) {
    uint32_t mapId = 0;
    if (bpf_map_lookup_elem(program.mapFd("flood_groups"), &group, &mapId))
      return {};
    return groupMembers(mapId);
  }

  std::set<uint32_t> ifindexes(std::initializer_list<const char *> names) {
    std::set<uint32_t> out;
    for (const char *name : names)
      out.insert(port(name));
    return out;
  }

  SwitchState state() {
    SwitchState s;
    for (const auto &[ifindex, entry] : entriesOf<uint32_t, l2sw_port>(program.mapFd("ports"))) {
      auto *raw = reinterpret_cast<const uint8_t *>(&entry);
      s.ports[ifindex].assign(raw, raw + sizeof(entry));
    }
    for (uint32_t vlan = 0; vlan < L2SW_VLAN_IDS; ++vlan) {
      l2sw_vlan entry = vlanEntry(vlan);
      if (entry.untagged_ports || entry.tagged_ports)
        s.vlans[vlan] = {entry.untagged_ports, entry.tagged_ports, entry.untagged_group,
                         entry.tagged_group};
    }
    for (uint32_t group : keysOf(program.mapFd("flood_groups")))
      s.groups[group] = groupOf(group);
    for (uint32_t ifindex : keysOf(program.mapFd("tx_ports")))
      s.txPorts.insert(ifindex);
    for (const auto &[key, entry] : readFdbMap(program.mapFd("fdb")))
      s.fdb[key] = {entry.ifindex, entry.flags};
    return s;
  }

  Error loadPortsText(const std::string &text) {
    TempFile file("ports.conf", text);
    return loadPorts(pins.path(), file.path());
  }

  Error loadStaticText(const std::string &text) {
    TempFile file("static.conf", text);
    return loadStatic(pins.path(), file.path());
  }
};

bool hasVlan(const l2sw_port &port, unsigned vlan) {
  return (port.member[vlan / 64] >> (vlan % 64)) & 1;
}

std::set<unsigned> vlansOf(const l2sw_port &port) {
  std::set<unsigned> vlans;
  for (unsigned vlan = 0; vlan < L2SW_VLAN_IDS; ++vlan)
    if (hasVlan(port, vlan))
      vlans.insert(vlan);
  return vlans;
}

TEST_F(Config, PortsFileFillsPortsDevmapAndFloodGroups) {
  l2sw_port a1 = portEntry("a1");
  EXPECT_EQ(a1.mode, uint32_t(L2SW_ACCESS));
  EXPECT_EQ(a1.untagged_vlan, 10);
  EXPECT_EQ(vlansOf(a1), std::set<unsigned>{10});
  l2sw_port t1 = portEntry("t1");
  EXPECT_EQ(t1.mode, uint32_t(L2SW_TRUNK));
  EXPECT_EQ(t1.untagged_vlan, 0);
  EXPECT_EQ(vlansOf(t1), (std::set<unsigned>{10, 20, 30}));
  l2sw_port t2 = portEntry("t2");
  EXPECT_EQ(t2.untagged_vlan, 30);
  EXPECT_EQ(vlansOf(t2), (std::set<unsigned>{20, 30, 31, 32, 33, 34, 35, 36, 37, 38, 39, 40}));

  EXPECT_EQ(state().txPorts, ifindexes({"a1", "a2", "a3", "t1", "t2"}));
  for (uint32_t ifindex : state().txPorts) {
    uint32_t value = 0;
    ASSERT_EQ(bpf_map_lookup_elem(program.mapFd("tx_ports"), &ifindex, &value), 0);
    EXPECT_EQ(value, ifindex);
  }

  struct Expected {
    uint32_t vlan;
    std::set<uint32_t> untagged, tagged;
  };
  for (const Expected &want : {Expected{10, ifindexes({"a1", "a2"}), ifindexes({"t1"})},
                               Expected{20, ifindexes({"a3"}), ifindexes({"t1", "t2"})},
                               Expected{30, ifindexes({"t2"}), ifindexes({"t1"})},
                               Expected{35, {}, ifindexes({"t2"})},
                               Expected{40, {}, ifindexes({"t2"})}}) {
    SCOPED_TRACE("VLAN " + std::to_string(want.vlan));
    l2sw_vlan entry = vlanEntry(want.vlan);
    EXPECT_EQ(entry.untagged_ports, want.untagged.size());
    EXPECT_EQ(entry.tagged_ports, want.tagged.size());
    EXPECT_EQ(groupOf(entry.untagged_group), want.untagged);
    EXPECT_EQ(groupOf(entry.tagged_group), want.tagged);
    EXPECT_EQ(entry.untagged_group == 0, want.untagged.empty());
  }
  EXPECT_EQ(state().vlans.size(), 13u); // 10, 20, 30..40
  l2sw_vlan unused = vlanEntry(11);
  EXPECT_EQ(unused.untagged_ports + unused.tagged_ports + unused.untagged_group +
                unused.tagged_group,
            0u);
}

TEST_F(Config, ReloadingTheSameFileChangesNothing) {
  SwitchState before = state();
  std::vector<uint32_t> groupsBefore = keysOf(program.mapFd("flood_groups"));
  Error err = loadPortsText(PortsConfig);
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_EQ(state(), before);
  EXPECT_EQ(keysOf(program.mapFd("flood_groups")), groupsBefore);
}

TEST_F(Config, ReloadForgetsRemovedPortsAndTheirMacs) {
  putFdb(host(1), 10, "a1", coarseNowNs());
  putFdb(host(2), 10, "a2", coarseNowNs());
  putFdb(host(6), 30, "t1", coarseNowNs());
  putFdb(host(7), 10, "a2", 1, L2SW_FDB_STATIC);
  uint32_t oldUntagged10 = vlanEntry(10).untagged_group;
  uint32_t oldTagged20 = vlanEntry(20).tagged_group;

  Error err = loadPortsText("a1 access 10\n"
                            "a3 access 20\n"
                            "t1 trunk 10,20\n" // leaves VLAN 30
                            "t2 trunk 20,30-40 native=30\n");
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  SwitchState after = state();
  EXPECT_FALSE(after.ports.count(port("a2")));
  EXPECT_EQ(after.txPorts, ifindexes({"a1", "a3", "t1", "t2"}));
  EXPECT_TRUE(fdbEntry(host(1), 10));
  EXPECT_FALSE(fdbEntry(host(2), 10));
  EXPECT_FALSE(fdbEntry(host(6), 30));
  EXPECT_TRUE(fdbEntry(host(7), 10)); // static entries stay until load-static

  EXPECT_EQ(vlanEntry(10).untagged_ports, 1);
  EXPECT_EQ(groupOf(vlanEntry(10).untagged_group), ifindexes({"a1"}));
  EXPECT_NE(vlanEntry(10).untagged_group, oldUntagged10);
  EXPECT_TRUE(groupOf(oldUntagged10).empty()); // removed from flood_groups
  EXPECT_EQ(vlanEntry(20).tagged_group, oldTagged20); // unchanged group kept
  EXPECT_EQ(vlanEntry(30).tagged_ports, 0);
  EXPECT_EQ(vlanEntry(30).tagged_group, 0u);
  // flood_groups holds exactly the groups vlans refers to.
  std::set<uint32_t> referenced;
  for (uint32_t vlan = 1; vlan < L2SW_VLAN_IDS; ++vlan)
    for (uint32_t group : {vlanEntry(vlan).untagged_group, vlanEntry(vlan).tagged_group})
      if (group)
        referenced.insert(group);
  std::vector<uint32_t> present = keysOf(program.mapFd("flood_groups"));
  EXPECT_EQ(std::set<uint32_t>(present.begin(), present.end()), referenced);

  // The data plane follows: VLAN 10 from t1 now floods to a1 alone.
  EXPECT_EQ(run(frame(Broadcast, host(3), 10), "t1").verdict, uint32_t(XDP_REDIRECT));
  EXPECT_EQ(run(frame(Broadcast, host(1)), "a1").verdict, uint32_t(XDP_REDIRECT));
}

TEST_F(Config, PortsGivenByIfindex) {
  std::string text = std::to_string(port("a1")) + " access 10\n" +
                     std::to_string(port("t1")) + " trunk 10\n";
  Error err = loadPortsText(text);
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_EQ(state().txPorts, ifindexes({"a1", "t1"}));
}

struct BadLine {
  const char *line;
  const char *message;
};

TEST_F(Config, BadPortsLineIsReportedWithItsNumberAndNothingIsApplied) {
  putFdb(host(2), 10, "a2", coarseNowNs());
  SwitchState before = state();
  // A valid reconfiguration (a2 gone, a3 moved) that a bad last line spoils.
  const std::string good = "# replacement\n"
                           "a1 access 10\n"
                           "a3 access 30\n"
                           "\n"
                           "t1 trunk 10,30\n";
  const unsigned badLineNumber = 6;
  for (const BadLine &bad : {
           BadLine{"nosuch access 10", "port: no interface 'nosuch' in this network namespace"},
           BadLine{"999999 access 10", "no interface with index 999999"},
           BadLine{"t2 access 0", "VLAN: 0 is reserved"},
           BadLine{"t2 access 4095", "VLAN: 4095 is larger than 4094"},
           BadLine{"t2 access 10,20", "VLAN: '10,20' is not a number"},
           BadLine{"t2 access 10 20", "exactly one VLAN"},
           BadLine{"t2 hybrid 10", "mode 'hybrid' is neither 'access' nor 'trunk'"},
           BadLine{"t2 trunk", "expected 'PORT access VLAN' or"},
           BadLine{"t2 trunk 30-20", "VLAN range '30-20' is empty"},
           BadLine{"t2 trunk 10,,20", "VLAN: '' is not a number"},
           BadLine{"t2 trunk 10,20 native=30", "native VLAN 30 is not among the trunk's VLANs"},
           BadLine{"t2 trunk 10,20 pvid=10", "expected native=VLAN, got 'pvid=10'"},
           BadLine{"t2 trunk 10 native=10 extra", "unexpected 'extra'"},
           BadLine{"a1 access 20", "port 'a1' is already configured on line 2"},
       }) {
    SCOPED_TRACE(bad.line);
    Error err = loadPortsText(good + bad.line + "\n");
    ASSERT_TRUE(bool(err));
    std::string message = llvm::toString(std::move(err));
    EXPECT_THAT(message, HasSubstr("ports.conf:" + std::to_string(badLineNumber) + ": "));
    EXPECT_THAT(message, HasSubstr(bad.message));
    EXPECT_EQ(state(), before);
  }
}

TEST_F(Config, StaticEntriesReplaceEachOtherAndSurviveLearning) {
  putFdb(host(9), 20, "a3", coarseNowNs()); // learned
  Error err = loadStaticText("02:00:00:00:00:01 10 a1\n"
                             "02:00:00:00:00:03 10 t1\n");
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  ASSERT_TRUE(fdbEntry(host(1), 10));
  EXPECT_EQ(fdbEntry(host(1), 10)->ifindex, port("a1"));
  EXPECT_EQ(fdbEntry(host(1), 10)->flags, L2SW_FDB_STATIC);
  EXPECT_EQ(fdbEntry(host(3), 10)->ifindex, port("t1"));

  // Forwarded by the static entry; a frame from the MAC elsewhere moves nothing.
  EXPECT_EQ(run(frame(host(3), host(1)), "a1").output, frame(host(3), host(1), 10));
  run(frame(host(2), host(3), 10), "t1");
  run(frame(host(2), host(1)), "a2");
  EXPECT_EQ(fdbEntry(host(1), 10)->ifindex, port("a1"));

  err = loadStaticText("02:00:00:00:00:03 20 t2\n");
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  EXPECT_FALSE(fdbEntry(host(1), 10));
  EXPECT_FALSE(fdbEntry(host(3), 10));
  EXPECT_EQ(fdbEntry(host(3), 20)->ifindex, port("t2"));
  EXPECT_EQ(fdbEntry(host(9), 20)->flags, 0u); // learned entries untouched
}

TEST_F(Config, BadStaticLineIsReportedWithItsNumberAndNothingIsApplied) {
  Error err = loadStaticText("02:00:00:00:00:01 10 a1\n");
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  SwitchState before = state();
  const std::string good = "02:00:00:00:00:02 10 a2\n"
                           "# a comment line\n"
                           "02:00:00:00:00:03 20 t2\n";
  for (const BadLine &bad : {
           BadLine{"02:00:00:00:00:04 30 a1", "port 'a1' does not carry VLAN 30"},
           BadLine{"02:00:00:00:00:04 10 lo", "port 'lo' is not a switch port"},
           BadLine{"01:00:5e:00:00:01 10 a1", "is a multicast address"},
           BadLine{"02:00:00:00:00:04 10", "expected 'MAC VLAN PORT'"},
           BadLine{"02:00:00:00:04 10 a1", "MAC: '02:00:00:00:04' is not a MAC address"},
           BadLine{"02:00:00:00:00:02 10 a1", "already configured on line 1"},
           BadLine{"02:00:00:00:00:04 0 a1", "VLAN: 0 is reserved"},
           BadLine{"02:00:00:00:00:04 10 nosuch", "no interface 'nosuch'"},
       }) {
    SCOPED_TRACE(bad.line);
    Error err = loadStaticText(good + bad.line + "\n");
    ASSERT_TRUE(bool(err));
    std::string message = llvm::toString(std::move(err));
    EXPECT_THAT(message, HasSubstr("static.conf:4: "));
    EXPECT_THAT(message, HasSubstr(bad.message));
    EXPECT_EQ(state(), before);
  }
}

TEST_F(Config, AgingRemovesOnlyLearnedEntriesOlderThanTheLimit) {
  const uint64_t second = 1000000000ull;
  uint64_t now = 2000 * second;
  putFdb(host(1), 10, "a1", now - 10 * second);
  putFdb(host(2), 10, "a2", now - 299 * second);
  putFdb(host(3), 10, "t1", now - 301 * second);
  putFdb(host(4), 20, "a3", now - 1000 * second);
  putFdb(host(5), 20, "t2", now - 1000 * second, L2SW_FDB_STATIC);
  putFdb(host(6), 30, "t1", now + second); // stamped after `now` was read

  auto report = ageFdb(pins.path(), 300 * second, now);
  ASSERT_THAT_EXPECTED(report, llvm::Succeeded());
  EXPECT_EQ(report->entries, 6u);
  EXPECT_EQ(report->removed, 2u);
  EXPECT_TRUE(fdbEntry(host(1), 10));
  EXPECT_TRUE(fdbEntry(host(2), 10));
  EXPECT_FALSE(fdbEntry(host(3), 10));
  EXPECT_FALSE(fdbEntry(host(4), 20));
  EXPECT_TRUE(fdbEntry(host(5), 20));
  EXPECT_TRUE(fdbEntry(host(6), 30));

  report = ageFdb(pins.path(), 5 * second, now);
  ASSERT_TRUE(bool(report));
  EXPECT_EQ(report->removed, 2u); // hosts 1 and 2
  EXPECT_EQ(readFdbMap(program.mapFd("fdb")).size(), 2u);
}

// Runs the morpheus binary; returns its exit code and standard error.
std::pair<int, std::string> morpheusCli(const std::string &arguments) {
  std::string command =
      morpheus::testing::binPath("morpheus") + " " + arguments + " 2>&1 >/dev/null";
  std::string output;
  FILE *pipe = popen(command.c_str(), "r");
  char buffer[512];
  while (size_t n = fread(buffer, 1, sizeof(buffer), pipe))
    output.append(buffer, n);
  int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, output};
}

TEST_F(Config, CommandLine) {
  // The build makes morpheus before the tests: its absence is a failure.
  ASSERT_EQ(access(morpheus::testing::binPath("morpheus").c_str(), X_OK), 0)
      << morpheus::testing::binPath("morpheus") << " is not built";
  EXPECT_EQ(morpheusCli("nf l2switch --help").first, 0);
  EXPECT_EQ(morpheusCli("nf l2switch age --max-age 300s --help").first, 0);
  EXPECT_EQ(morpheusCli("nf l2switch frobnicate").first, 2);
  EXPECT_EQ(morpheusCli("nf l2switch age --max-age soon --pin-dir " + pins.path()).first, 2);

  SwitchState before = state();
  TempFile bad("ports.conf", "a1 access 10\na2 access 10000\n");
  auto [code, error] = morpheusCli("nf l2switch load-ports " + bad.path() + " --pin-dir " +
                                   pins.path() + " --netns " + SwitchNetns::get().name());
  EXPECT_EQ(code, 1);
  EXPECT_THAT(error, HasSubstr("ports.conf:2: VLAN: 10000 is larger than 4094"));
  EXPECT_EQ(state(), before);

  TempFile good("ports.conf", "a1 access 10\nt1 trunk 10\n");
  std::tie(code, error) = morpheusCli("nf l2switch load-ports " + good.path() + " --pin-dir " +
                                      pins.path() + " --netns " + SwitchNetns::get().name());
  EXPECT_EQ(code, 0) << error;
  EXPECT_EQ(state().txPorts, ifindexes({"a1", "t1"}));

  putFdb(host(1), 10, "a1", 1);
  std::tie(code, error) = morpheusCli("nf l2switch age --max-age 1s --pin-dir " + pins.path());
  EXPECT_EQ(code, 0) << error;
  EXPECT_FALSE(fdbEntry(host(1), 10));
}

} // namespace
} // namespace morpheus::nf::l2switch::testing
