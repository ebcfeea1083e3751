#include "L2Switch.h"

#include "client/Transaction.h"

#include <bpf/bpf.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <ctime>
#include <map>
#include <set>

namespace morpheus::nf::l2switch {

namespace {

const std::vector<std::string> SwitchMaps = {"ports", "vlans", "tx_ports", "flood_groups",
                                             "fdb"};
constexpr unsigned MaxVlan = 4094; // 0 and 4095 are reserved by 802.1Q

// Every entry of a map, keyed (reading changes nothing, so it needs no
// transaction).
template <typename K, typename V> Expected<std::map<K, V>> readMap(const client::Map &map) {
  auto entries = map.entriesAs<K, V>();
  if (!entries)
    return entries.takeError();
  return std::map<K, V>(entries->begin(), entries->end());
}

bool carries(const l2sw_port &port, unsigned vlan) {
  return (port.member[vlan / 64] >> (vlan % 64)) & 1;
}

void addVlan(l2sw_port &port, unsigned vlan) { port.member[vlan / 64] |= 1ull << (vlan % 64); }

Expected<uint32_t> resolvePort(const ConfigLine &line, const std::string &text) {
  char name[IF_NAMESIZE];
  if (!text.empty() && std::all_of(text.begin(), text.end(), ::isdigit)) {
    auto ifindex = parseNumber(line, text, "port", UINT32_MAX);
    if (!ifindex)
      return ifindex.takeError();
    if (!*ifindex || !if_indextoname(*ifindex, name))
      return line.error("port: no interface with index {0} in this network namespace",
                        text);
    return *ifindex;
  }
  uint32_t ifindex = text.size() < IF_NAMESIZE ? if_nametoindex(text.c_str()) : 0;
  if (!ifindex)
    return line.error("port: no interface '{0}' in this network namespace", text);
  return ifindex;
}

Expected<unsigned> parseVlan(const ConfigLine &line, const std::string &text) {
  auto vlan = parseNumber(line, text, "VLAN", MaxVlan);
  if (!vlan)
    return vlan.takeError();
  if (*vlan == 0)
    return line.error("VLAN: 0 is reserved (priority tags), use 1..{0}", MaxVlan);
  return unsigned(*vlan);
}

// "10", "10,20,30-39".
Error parseVlanList(const ConfigLine &line, const std::string &text, l2sw_port &port) {
  size_t start = 0;
  while (start <= text.size()) {
    size_t comma = text.find(',', start);
    std::string item = text.substr(start, comma == std::string::npos ? comma : comma - start);
    size_t dash = item.find('-');
    auto low = parseVlan(line, item.substr(0, dash));
    if (!low)
      return low.takeError();
    unsigned high = *low;
    if (dash != std::string::npos) {
      auto parsed = parseVlan(line, item.substr(dash + 1));
      if (!parsed)
        return parsed.takeError();
      if (*parsed < *low)
        return line.error("VLAN range '{0}' is empty", item);
      high = *parsed;
    }
    for (unsigned vlan = *low; vlan <= high; ++vlan)
      addVlan(port, vlan);
    if (comma == std::string::npos)
      break;
    start = comma + 1;
  }
  return Error::success();
}

Expected<PortSpec> parsePortLine(const ConfigLine &line) {
  const std::vector<std::string> &words = line.words;
  if (words.size() < 3)
    return line.error("expected 'PORT access VLAN' or 'PORT trunk VLANS [native=VLAN]'");
  PortSpec spec{line, 0, {}};
  auto ifindex = resolvePort(line, words[0]);
  if (!ifindex)
    return ifindex.takeError();
  spec.ifindex = *ifindex;
  if (words[1] == "access") {
    if (words.size() != 3)
      return line.error("an access port has exactly one VLAN, then nothing");
    auto vlan = parseVlan(line, words[2]);
    if (!vlan)
      return vlan.takeError();
    spec.config.mode = L2SW_ACCESS;
    spec.config.untagged_vlan = *vlan;
    addVlan(spec.config, *vlan);
    return spec;
  }
  if (words[1] != "trunk")
    return line.error("mode '{0}' is neither 'access' nor 'trunk'", words[1]);
  if (words.size() > 4)
    return line.error("unexpected '{0}' after the trunk's VLANs", words[4]);
  spec.config.mode = L2SW_TRUNK;
  if (Error err = parseVlanList(line, words[2], spec.config))
    return err;
  if (words.size() == 4) {
    const std::string prefix = "native=";
    if (words[3].compare(0, prefix.size(), prefix))
      return line.error("expected native=VLAN, got '{0}'", words[3]);
    auto native = parseVlan(line, words[3].substr(prefix.size()));
    if (!native)
      return native.takeError();
    if (!carries(spec.config, *native))
      return line.error("native VLAN {0} is not among the trunk's VLANs", *native);
    spec.config.untagged_vlan = *native;
  }
  return spec;
}

// The ports of a configuration that flood VLAN `vlan` with (or without) a
// tag, in ifindex order.
std::vector<uint32_t> floodMembers(const std::map<uint32_t, l2sw_port> &ports, unsigned vlan,
                                   bool tagged) {
  std::vector<uint32_t> members;
  for (const auto &[ifindex, port] : ports)
    if (carries(port, vlan) && (vlan != port.untagged_vlan) == tagged)
      members.push_back(ifindex);
  return members;
}

class Fd {
public:
  explicit Fd(int fd) : fd(fd) {}
  Fd(Fd &&other) noexcept : fd(std::exchange(other.fd, -1)) {}
  ~Fd() {
    if (fd >= 0)
      close(fd);
  }
  int get() const { return fd; }

private:
  int fd;
};

// A flood group: a new DEVMAP_HASH shaped like flood_groups' inner map,
// holding `members`. It is private to this process until the transaction
// publishes it in flood_groups, so filling it directly changes nothing the
// data plane (or Morpheus) can see.
Expected<Fd> createFloodGroup(const std::vector<uint32_t> &members) {
  Fd group(bpf_map_create(BPF_MAP_TYPE_DEVMAP_HASH, "l2sw_flood", sizeof(uint32_t),
                          sizeof(uint32_t), L2SW_PORTS_MAX, nullptr));
  if (group.get() < 0)
    return makeSystemError(errno, "cannot create a flood group map");
  for (uint32_t ifindex : members)
    if (bpf_map_update_elem(group.get(), &ifindex, &ifindex, BPF_ANY))
      return makeSystemError(errno, "flood group: cannot add ifindex {0}", ifindex);
  return group;
}

} // namespace

Expected<std::vector<PortSpec>> parsePorts(const std::string &path) {
  auto lines = readConfig(path);
  if (!lines)
    return lines.takeError();
  std::vector<PortSpec> ports;
  std::map<uint32_t, unsigned> seen; // ifindex -> line
  for (const ConfigLine &line : *lines) {
    auto spec = parsePortLine(line);
    if (!spec)
      return spec.takeError();
    if (auto [it, fresh] = seen.emplace(spec->ifindex, line.number); !fresh)
      return line.error("port '{0}' is already configured on line {1}", line.words[0],
                        it->second);
    if (ports.size() == L2SW_PORTS_MAX)
      return line.error("more than {0} ports", L2SW_PORTS_MAX);
    ports.push_back(std::move(*spec));
  }
  return ports;
}

Error applyPorts(const std::string &pinDir, const std::vector<PortSpec> &specs) {
  auto maps = client::PinnedMaps::open(pinDir, SwitchMaps);
  if (!maps)
    return maps.takeError();
  auto current = readMap<uint32_t, l2sw_port>((*maps)["ports"]);
  if (!current)
    return current.takeError();
  auto groups = readMap<uint32_t, uint32_t>((*maps)["flood_groups"]);
  if (!groups)
    return groups.takeError();
  auto fdb = readMap<l2sw_fdb_key, l2sw_fdb_entry>((*maps)["fdb"]);
  if (!fdb)
    return fdb.takeError();
  std::map<uint32_t, l2sw_port> wanted;
  for (const PortSpec &spec : specs)
    wanted[spec.ifindex] = spec.config;

  // Changes are queued so that each step only relies on earlier ones: new
  // flood groups (fresh ids) and egress devices exist before the port and
  // VLAN entries that lead to them, and what the old configuration used is
  // removed last. New groups are insertions, which the transaction undoes
  // exactly (by removal); old groups are removed at the very end because
  // undoing such a removal would re-insert what a lookup returns, a map id
  // where an update takes an fd. Removing an existing entry cannot fail.
  client::Transaction tx(*maps);
  std::vector<Fd> created; // open until the commit has published them
  uint32_t nextGroup = 1;
  auto freshGroup = [&]() {
    while (groups->count(nextGroup))
      ++nextGroup;
    return nextGroup++;
  };
  std::vector<std::pair<uint32_t, l2sw_vlan>> vlanChanges;
  std::set<uint32_t> groupsInUse;
  const client::Map &vlans = (*maps)["vlans"];
  for (uint32_t vlan = 1; vlan <= MaxVlan; ++vlan) {
    auto read = vlans.at<l2sw_vlan>(vlan);
    if (!read)
      return withContext(read.takeError(), "VLAN " + std::to_string(vlan));
    l2sw_vlan old = *read;
    l2sw_vlan next = {};
    for (bool tagged : {false, true}) {
      std::vector<uint32_t> members = floodMembers(wanted, vlan, tagged);
      uint32_t oldGroup = tagged ? old.tagged_group : old.untagged_group;
      bool unchanged = oldGroup && groups->count(oldGroup) &&
                       members == floodMembers(*current, vlan, tagged);
      uint32_t group = members.empty() ? 0 : unchanged ? oldGroup : freshGroup();
      if (group && !unchanged) {
        auto map = createFloodGroup(members);
        if (!map)
          return withContext(map.takeError(), "VLAN " + std::to_string(vlan));
        uint32_t fd = map->get();
        tx.update("flood_groups", group, fd, BPF_NOEXIST);
        created.push_back(std::move(*map));
      }
      if (group)
        groupsInUse.insert(group);
      (tagged ? next.tagged_ports : next.untagged_ports) = members.size();
      (tagged ? next.tagged_group : next.untagged_group) = group;
    }
    if (std::memcmp(&old, &next, sizeof(old)))
      vlanChanges.emplace_back(vlan, next);
  }
  for (const auto &[ifindex, port] : wanted)
    if (!current->count(ifindex))
      tx.update("tx_ports", ifindex, ifindex);
  for (const auto &[ifindex, port] : wanted) {
    auto old = current->find(ifindex);
    if (old == current->end() || std::memcmp(&old->second, &port, sizeof(port)))
      tx.update("ports", ifindex, port);
  }
  for (const auto &[vlan, value] : vlanChanges)
    tx.update("vlans", vlan, value);
  for (const auto &[ifindex, port] : *current)
    if (!wanted.count(ifindex)) {
      tx.remove("ports", ifindex);
      tx.remove("tx_ports", ifindex);
    }
  for (const auto &[key, entry] : *fdb) {
    auto port = wanted.find(entry.ifindex);
    bool valid = port != wanted.end() && carries(port->second, key.vlan);
    if (!valid && !(entry.flags & L2SW_FDB_STATIC))
      tx.remove("fdb", key);
  }
  for (const auto &[group, id] : *groups)
    if (!groupsInUse.count(group))
      tx.remove("flood_groups", group);
  return tx.commit();
}

Error loadPorts(const std::string &pinDir, const std::string &path) {
  auto ports = parsePorts(path);
  if (!ports)
    return ports.takeError();
  return applyPorts(pinDir, *ports);
}

Expected<std::vector<StaticSpec>> parseStatic(const std::string &path) {
  auto lines = readConfig(path);
  if (!lines)
    return lines.takeError();
  std::vector<StaticSpec> entries;
  std::map<l2sw_fdb_key, unsigned> seen; // -> line
  for (const ConfigLine &line : *lines) {
    if (line.words.size() != 3)
      return line.error("expected 'MAC VLAN PORT'");
    auto mac = parseMac(line, line.words[0], "MAC");
    if (!mac)
      return mac.takeError();
    if ((*mac)[0] & 1)
      return line.error("MAC: {0} is a multicast address", line.words[0]);
    auto vlan = parseVlan(line, line.words[1]);
    if (!vlan)
      return vlan.takeError();
    auto ifindex = resolvePort(line, line.words[2]);
    if (!ifindex)
      return ifindex.takeError();
    StaticSpec spec{line, {}, *ifindex};
    std::copy(mac->begin(), mac->end(), spec.key.mac);
    spec.key.vlan = *vlan;
    if (auto [it, fresh] = seen.emplace(spec.key, line.number); !fresh)
      return line.error("{0} on VLAN {1} is already configured on line {2}", line.words[0],
                        *vlan, it->second);
    if (entries.size() == L2SW_FDB_MAX)
      return line.error("more than {0} entries", L2SW_FDB_MAX);
    entries.push_back(std::move(spec));
  }
  return entries;
}

Error applyStatic(const std::string &pinDir, const std::vector<StaticSpec> &entries) {
  auto maps = client::PinnedMaps::open(pinDir, {"ports", "fdb"});
  if (!maps)
    return maps.takeError();
  auto ports = readMap<uint32_t, l2sw_port>((*maps)["ports"]);
  if (!ports)
    return ports.takeError();
  auto fdb = readMap<l2sw_fdb_key, l2sw_fdb_entry>((*maps)["fdb"]);
  if (!fdb)
    return fdb.takeError();
  std::set<l2sw_fdb_key> wanted;
  client::Transaction tx(*maps);
  uint64_t now = monotonicNowNs();
  for (const StaticSpec &spec : entries) {
    auto port = ports->find(spec.ifindex);
    if (port == ports->end())
      return spec.line.error("port '{0}' is not a switch port (see load-ports)",
                             spec.line.words[2]);
    if (!carries(port->second, spec.key.vlan))
      return spec.line.error("port '{0}' does not carry VLAN {1}", spec.line.words[2],
                             spec.key.vlan);
    l2sw_fdb_entry entry = {spec.ifindex, L2SW_FDB_STATIC, now};
    tx.update("fdb", spec.key, entry);
    wanted.insert(spec.key);
  }
  for (const auto &[key, entry] : *fdb)
    if ((entry.flags & L2SW_FDB_STATIC) && !wanted.count(key))
      tx.remove("fdb", key);
  return tx.commit();
}

Error loadStatic(const std::string &pinDir, const std::string &path) {
  auto entries = parseStatic(path);
  if (!entries)
    return entries.takeError();
  return applyStatic(pinDir, *entries);
}

uint64_t monotonicNowNs() {
  timespec now;
  clock_gettime(CLOCK_MONOTONIC, &now);
  return uint64_t(now.tv_sec) * 1000000000ull + now.tv_nsec;
}

Expected<AgingReport> ageFdb(const std::string &pinDir, uint64_t maxAgeNs, uint64_t nowNs) {
  auto maps = client::PinnedMaps::open(pinDir, {"fdb"});
  if (!maps)
    return maps.takeError();
  auto fdb = readMap<l2sw_fdb_key, l2sw_fdb_entry>((*maps)["fdb"]);
  if (!fdb)
    return fdb.takeError();
  client::Transaction tx(*maps);
  for (const auto &[key, entry] : *fdb) {
    // Stamped after `nowNs` was read: seen just now.
    bool stale = nowNs > entry.last_seen_ns && nowNs - entry.last_seen_ns > maxAgeNs;
    if (stale && !(entry.flags & L2SW_FDB_STATIC))
      tx.remove("fdb", key);
  }
  if (Error err = tx.commit())
    return err;
  return AgingReport{fdb->size(), tx.size()};
}

Expected<std::vector<FdbRow>> readFdb(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"fdb"});
  if (!maps)
    return maps.takeError();
  auto fdb = readMap<l2sw_fdb_key, l2sw_fdb_entry>((*maps)["fdb"]);
  if (!fdb)
    return fdb.takeError();
  std::vector<FdbRow> rows;
  for (const auto &[key, entry] : *fdb)
    rows.push_back({key, entry});
  return rows;
}

} // namespace morpheus::nf::l2switch
