#include "SwitchTestSupport.h"

#include <bpf/bpf.h>

#include <cstdlib>
#include <ctime>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::nf::l2switch::testing {

namespace {

const char *const Ports[] = {"a1", "a2", "a3", "t1", "t2"};

SwitchNetns *const environment = static_cast<SwitchNetns *>(
    ::testing::AddGlobalTestEnvironment(new SwitchNetns));

} // namespace

SwitchNetns &SwitchNetns::get() { return *environment; }

void SwitchNetns::SetUp() {
  morpheus::testing::VethPair::sweepStale("l2switch");
  pair = std::make_unique<morpheus::testing::VethPair>("l2switch");
  for (const char *port : Ports) {
    // A veth whose peer stays in the namespace too (no dummy driver here).
    std::string ip = "ip -n " + pair->nsA() + " link ";
    std::string command = ip + "add " + port + " type veth peer name " + port + "p && " + ip +
                          "set " + port + " up && " + ip + "set " + port + "p up";
    ASSERT_EQ(std::system(command.c_str()), 0) << command;
  }
  NetnsGuard inside(pair->nsA());
  for (const char *port : Ports)
    indexes[port] = morpheus::testing::interfaceIndex(port);
  indexes["lo"] = morpheus::testing::interfaceIndex("lo");
}

void SwitchNetns::TearDown() { pair.reset(); }

const std::string &SwitchNetns::name() const { return pair->nsA(); }

const char PortsConfig[] = "# the test switch\n"
                           "a1 access 10\n"
                           "a2 access 10\n"
                           "a3 access 20   # alone on its VLAN among access ports\n"
                           "t1 trunk 10,20,30\n"
                           "t2 trunk 20,30-40 native=30\n";

Mac host(uint8_t n) { return {0x02, 0, 0, 0, 0, n}; }
const Mac Broadcast = {0xff, 0xff, 0xff, 0xff, 0xff, 0xff};

Bytes frame(const Mac &dst, const Mac &src, std::optional<uint16_t> vlan, uint8_t pcp) {
  PacketBuilder builder;
  builder.ethernet(dst, src);
  if (vlan)
    builder.vlan(*vlan, pcp);
  return builder.ipv4().udp(1000, 2000).payload(16).build();
}

l2sw_fdb_key fdbKey(const Mac &mac, uint16_t vlan) {
  l2sw_fdb_key key = {};
  std::copy(mac.begin(), mac.end(), key.mac);
  key.vlan = vlan;
  return key;
}

std::map<l2sw_fdb_key, l2sw_fdb_entry> readFdbMap(int fdbFd) {
  return entriesOf<l2sw_fdb_key, l2sw_fdb_entry>(fdbFd);
}

uint64_t coarseNowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  return uint64_t(now.tv_sec) * 1000000000ull + now.tv_nsec;
}

std::map<l2sw_fdb_key, l2sw_fdb_entry> baselineFdb(uint64_t lastSeenNs) {
  const SwitchNetns &ns = SwitchNetns::get();
  auto entry = [&](const char *port) { return l2sw_fdb_entry{ns.ifindex(port), 0, lastSeenNs}; };
  return {
      {fdbKey(host(1), 10), entry("a1")},
      {fdbKey(host(2), 10), entry("a2")},
      {fdbKey(host(3), 10), entry("t1")},
      {fdbKey(host(4), 20), entry("a3")},
      {fdbKey(host(5), 20), entry("t2")},
      {fdbKey(host(6), 30), entry("t1")},
      {fdbKey(host(7), 30), entry("t2")},
      // Learned on a1 when it carried VLAN 40 (it no longer does).
      {fdbKey(host(8), 40), entry("a1")},
  };
}

std::vector<Ingress> semanticCorpus() {
  const Mac multicast = {0x01, 0x00, 0x5e, 0x00, 0x00, 0x01};
  const Mac stp = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x00};
  const Mac lldp = {0x01, 0x80, 0xc2, 0x00, 0x00, 0x0e};
  const Mac unknown = host(0x77);
  auto raw = [](Bytes bytes, size_t length) {
    bytes.resize(length);
    return bytes;
  };
  std::vector<Ingress> corpus = {
      {"access to trunk: tag pushed", "a1", frame(host(3), host(1))},
      {"trunk to access: tag popped", "t1", frame(host(1), host(3), 10)},
      {"access to access", "a1", frame(host(2), host(1))},
      {"trunk to trunk: TCI kept", "t1", frame(host(5), host(9), 20, 5)},
      {"trunk to native VLAN: tag popped", "t1", frame(host(7), host(6), 30)},
      {"native VLAN to trunk: tag pushed", "t2", frame(host(6), host(7))},
      {"native VLAN arriving tagged", "t2", frame(host(6), host(7), 30)},
      {"new source learned", "a2", frame(host(1), host(9))},
      {"source moved port", "a2", frame(host(3), host(1))},
      {"unknown unicast, tagged members only", "a3", frame(unknown, host(4))},
      {"broadcast, tagged members only", "a3", frame(Broadcast, host(4))},
      {"multicast, tagged members only", "a3", frame(multicast, host(4))},
      {"broadcast, untagged members only", "t1", frame(Broadcast, host(3), 10)},
      {"broadcast, native member only", "t1", frame(Broadcast, host(6), 30)},
      {"broadcast, mixed members", "a1", frame(Broadcast, host(1))},
      {"unknown unicast, mixed members", "t1", frame(unknown, host(8), 20)},
      {"known in another VLAN only", "a3", frame(host(1), host(4))},
      {"port left the VLAN since learning", "t2", frame(host(8), host(5), 40)},
      {"broadcast, no other member", "t2", frame(Broadcast, host(5), 40)},
      {"destination on the ingress port", "a1", frame(host(1), host(2))},
      {"STP to the stack", "t1", frame(stp, host(3))},
      {"LLDP to the stack", "a1", frame(lldp, host(1))},
      {"tagged on access", "a1", frame(host(2), host(1), 10)},
      {"priority tag on access", "a1", frame(host(2), host(1), 0)},
      {"VLAN not on the trunk", "t1", frame(host(3), host(6), 40)},
      {"VID 4095", "t1", frame(host(3), host(6), 4095)},
      {"untagged on trunk without native", "t1", frame(host(1), host(3))},
      {"multicast source", "a1", frame(host(2), multicast)},
      {"802.1ad outer tag", "t1",
       PacketBuilder().ethernet(host(1), host(3)).vlan(100, 0, 0x88a8).vlan(10).ipv4().build()},
      {"802.1ad on access", "a1",
       PacketBuilder().ethernet(host(2), host(1)).vlan(100, 0, 0x88a8).ipv4().build()},
      {"double 802.1Q", "t1",
       PacketBuilder().ethernet(host(1), host(3)).vlan(10).vlan(20).ipv4().build()},
      {"802.1Q over 802.1ad", "t1",
       PacketBuilder().ethernet(host(1), host(3)).vlan(10).vlan(20, 0, 0x88a8).ipv4().build()},
      {"not a switch port", "lo", frame(host(1), host(2))},
      {"bare Ethernet header, broadcast", "a3", raw(frame(Broadcast, host(4)), 14)},
  };
  Bytes tagged = frame(host(1), host(3), 10);
  for (size_t length = 14; length < 18; ++length)
    corpus.push_back({"VLAN tag truncated to " + std::to_string(length) + " bytes", "t1",
                      raw(tagged, length)});
  for (size_t length = 0; length < 14; ++length)
    corpus.push_back({"Ethernet header truncated to " + std::to_string(length) + " bytes",
                      "a1", raw(frame(host(2), host(1)), length)});
  return corpus;
}

void SwitchTest::SetUp() {
  ASSERT_TRUE(program.ok());
  TempFile ports("ports.conf", PortsConfig);
  Error err = loadPorts(pins.path(), ports.path());
  ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
}

RunResult SwitchTest::run(const Bytes &packet, const std::string &ingress) {
  return program.run(packet, port(ingress));
}

std::vector<uint64_t> SwitchTest::stats() {
  return morpheus::testing::perCpuCounters(program.mapFd("stats"), STAT_MAX);
}

std::optional<l2sw_fdb_entry> SwitchTest::fdbEntry(const Mac &mac, uint16_t vlan) {
  l2sw_fdb_key key = fdbKey(mac, vlan);
  l2sw_fdb_entry entry;
  if (bpf_map_lookup_elem(program.mapFd("fdb"), &key, &entry))
    return std::nullopt;
  return entry;
}

void SwitchTest::putFdb(const Mac &mac, uint16_t vlan, const std::string &portName,
                        uint64_t lastSeenNs, uint32_t flags) {
  l2sw_fdb_key key = fdbKey(mac, vlan);
  l2sw_fdb_entry entry = {port(portName), flags, lastSeenNs};
  ASSERT_EQ(bpf_map_update_elem(program.mapFd("fdb"), &key, &entry, BPF_ANY), 0);
}

RunResult SwitchTest::expectOutcome(const Bytes &packet, const std::string &ingress,
                                    uint32_t verdict, l2sw_stat outcome) {
  std::vector<uint64_t> before = stats();
  RunResult result = run(packet, ingress);
  std::vector<uint64_t> after = stats();
  EXPECT_EQ(result.verdict, verdict) << morpheus::hexDump(packet);
  for (unsigned stat = 0; stat < STAT_OUTCOMES; ++stat)
    EXPECT_EQ(after[stat] - before[stat], stat == unsigned(outcome) ? 1u : 0u)
        << "outcome counter " << stat;
  return result;
}

} // namespace morpheus::nf::l2switch::testing
