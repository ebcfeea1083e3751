// The oracles: oracles/NF_oracle.bpf.c compiled with a table generated
// here from the live maps (what the maps answer is what the oracle must
// answer) and the trace (which destinations are hot).
#include "Oracle.h"

#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "nf/router/router.h"
// Both layouts name their counters STAT_*: l2switch's in a namespace of its
// own (linux/types.h, which it includes, is already in).
namespace l2switch_layout {
#include "nf/l2switch/l2switch.h"
} // namespace l2switch_layout
namespace lb_layout {
#include "nf/lb/lb.h"
} // namespace lb_layout
namespace nat_layout {
#include "nf/nat/nat.h"
} // namespace nat_layout
namespace firewall_layout {
#include "nf/firewall/firewall.h"
} // namespace firewall_layout

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>
#include <set>

namespace morpheus::bench {
namespace {

// The trace's hottest destinations that get a fast path: 10, the size of the
// hand-written fast path measured in measuring.md.
constexpr size_t HotDestinations = 10;
// Up to this many routes the complete oracle (no map lookups) is built.
constexpr size_t CompleteOracleRoutes = 64;

std::string hex32(uint32_t hostOrder) {
  char text[9];
  std::snprintf(text, sizeof text, "%08x", hostOrder);
  return text;
}

std::string macLiteral(const uint8_t *mac) {
  std::string text = "\"";
  for (int i = 0; i < 6; ++i)
    text += "\\x" + hex32(mac[i]).substr(6);
  return text + "\"";
}

struct Route {
  route_key key;
  route value;
};

// The map `name` of the program under `optimizer`.
bpf::MapAccess liveMap(const runtime::Optimizer &optimizer, const char *name) {
  return {optimizer.mapFd(name), name};
}

// The router's tables as the oracles are generated from them: routes and
// neighbours read once, the LPM answer asked of the live trie.
class RouterMaps {
public:
  static Expected<RouterMaps> read(const runtime::Optimizer &optimizer) {
    RouterMaps maps(liveMap(optimizer, "routes"));
    if (Error err = bpf::forEachEntry(maps.routesMap.fd(), sizeof(route_key), sizeof(route),
                                      "routes",
                                      [&](const core::Bytes &key, const core::Bytes &value) {
                                        maps.allRoutes.push_back(
                                            {fromBytes<route_key>(key), fromBytes<route>(value)});
                                        return true;
                                      }))
      return err;
    if (Error err = bpf::forEachEntry(optimizer.mapFd("neighbors"), sizeof(neighbor_key),
                                      sizeof(neighbor), "neighbors",
                                      [&](const core::Bytes &key, const core::Bytes &value) {
                                        maps.neighbors.emplace(key, fromBytes<neighbor>(value));
                                        return true;
                                      }))
      return err;
    return maps;
  }

  const std::vector<Route> &routes() const { return allRoutes; }

  // The code deciding one destination's outcome given its route, as the
  // maps decide it; `daddr` is the C expression of the destination.
  std::string outcomeCode(const route &r, uint32_t daddrHost, bool daddrKnown) const {
    if (r.kind == ROUTE_LOCAL)
      return "return ORACLE_LOCAL;";
    if (r.gateway || daddrKnown) {
      neighbor_key key = {r.gateway ? r.gateway : htonl(daddrHost), r.port};
      return neighborCode(key);
    }
    // On-link: the destination itself is the neighbour; only the configured
    // neighbours on that port can answer.
    std::string code;
    for (const auto &[bytes, value] : neighbors) {
      neighbor_key key = fromBytes<neighbor_key>(bytes);
      if (key.port == r.port)
        code += "if (daddr == bpf_htonl(0x" + hex32(ntohl(key.addr)) + ")) { " +
                neighborCode(key) + " } ";
    }
    return code + "return ORACLE_NO_NEIGHBOR;";
  }

  // The route the trie answers for one destination.
  Expected<std::optional<route>> lookup(uint32_t daddrHost) const {
    route_key key = {32, htonl(daddrHost)};
    return routesMap.find<route>(key);
  }

private:
  explicit RouterMaps(bpf::MapAccess routes) : routesMap(std::move(routes)) {}

  std::string neighborCode(const neighbor_key &key) const {
    auto found = neighbors.find(bytesOf(key));
    if (found == neighbors.end())
      return "return ORACLE_NO_NEIGHBOR;";
    const neighbor &value = found->second;
    return llvm::formatv("hop->port = {0}; __builtin_memcpy(hop->dst_mac, {1}, 6); "
                         "__builtin_memcpy(hop->src_mac, {2}, 6); return ORACLE_FORWARD;",
                         key.port, macLiteral(value.dst_mac), macLiteral(value.src_mac))
        .str();
  }

  bpf::MapAccess routesMap;
  std::vector<Route> allRoutes;
  std::map<core::Bytes, neighbor> neighbors; // by the key's bytes
};

Expected<std::string> hotPathTable(const RouterMaps &maps, const std::vector<uint32_t> &hottest) {
  std::string body;
  for (uint32_t daddr : hottest) {
    auto r = maps.lookup(daddr);
    if (!r)
      return r.takeError();
    body += "\tif (daddr == bpf_htonl(0x" + hex32(daddr) + ")) { " +
            (*r ? maps.outcomeCode(**r, daddr, true) : "return ORACLE_NO_ROUTE;") + " }\n";
  }
  return body + "\treturn ORACLE_MAPS;\n";
}

std::string completeTable(const RouterMaps &maps, std::vector<Route> routes) {
  std::sort(routes.begin(), routes.end(), [](const Route &a, const Route &b) {
    return a.key.prefixlen > b.key.prefixlen;
  });
  std::string body;
  for (const Route &r : routes) {
    uint32_t mask = r.key.prefixlen ? ~0u << (32 - r.key.prefixlen) : 0;
    body += "\tif ((daddr & bpf_htonl(0x" + hex32(mask) + ")) == bpf_htonl(0x" +
            hex32(ntohl(r.key.addr) & mask) + ")) { " + maps.outcomeCode(r.value, 0, false) +
            " }\n";
  }
  return body + "\treturn ORACLE_NO_ROUTE;\n";
}

// One oracle program: `source` (under src/bench/oracles) compiled with
// `header` as its ORACLE_TABLE, loaded sharing `sharedMaps` with the
// running program.
Expected<OracleProgram> buildOracle(const std::string &name, const std::string &source,
                                    const std::string &entry, const std::string &header,
                                    const std::vector<const char *> &sharedMaps,
                                    const runtime::Optimizer &optimizer) {
  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("morpheus-oracle", dir))
    return makeSystemError(ec.value(), "oracle {0}: cannot create a build directory", name);
  std::string headerPath = std::string(dir) + "/table.h";
  std::string object = std::string(dir) + "/oracle.o";
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(headerPath, ec);
    if (ec)
      return makeSystemError(ec.value(), "oracle {0}: writing {1}", name, headerPath);
    out << "/* Generated by src/bench/Oracle.cpp for one benchmark run. */\n" << header;
  }
  std::string sourcePath = MORPHEUS_SOURCE_DIR "/src/bench/oracles/" + source;
  std::vector<std::string> args = {MORPHEUS_CLANG, "-O2", "-g", "-target", "bpf",
                                   "-I/usr/include/x86_64-linux-gnu",
                                   "-I" MORPHEUS_SOURCE_DIR "/nf",
                                   "-I" MORPHEUS_SOURCE_DIR "/nf/router",
                                   "-DORACLE_TABLE=\"" + headerPath + "\"", "-c", sourcePath,
                                   "-o", object};
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  std::string message;
  int status = llvm::sys::ExecuteAndWait(args[0], refs, std::nullopt, {}, 0, 0, &message);
  auto elf = llvm::MemoryBuffer::getFile(object);
  llvm::sys::fs::remove_directories(dir);
  if (status != 0 || !elf)
    return makeError("oracle {0}: compiling {1} failed ({2})", name, sourcePath,
                     message.empty() ? "exit " + std::to_string(status) : message);
  bpf::LoadOptions shared;
  for (const char *map : sharedMaps)
    shared.maps[map] = optimizer.mapFd(map);
  auto loaded = bpf::LoadedObject::load(
      llvm::ArrayRef<char>((*elf)->getBufferStart(), (*elf)->getBufferSize()), entry, shared);
  if (!loaded)
    return withContext(loaded.takeError(), "oracle " + name);
  return OracleProgram{name, std::move(*loaded), entry};
}

Expected<OracleProgram> buildRouterOracle(const std::string &name, const std::string &table,
                                          const runtime::Optimizer &optimizer) {
  return buildOracle(name, "router_oracle.bpf.c", "router_oracle",
                     "static __always_inline int oracle_resolve(__be32 daddr, "
                     "struct oracle_hop *hop)\n{\n" +
                         table + "}\n",
                     {"routes", "neighbors", "ports", "stats"}, optimizer);
}

// l2switch's hot-flow oracle (oracles/l2switch_oracle.bpf.c): the ingress
// port and the hot VLANs as constants, and the trace's hottest unicast
// destinations the FDB does not hold flooded without the FDB lookup —
// only those no frame of the trace teaches the FDB (none has it as its
// source), so the answer holds for the whole trace.
Expected<OracleProgram> buildL2SwitchOracle(const runtime::Optimizer &optimizer,
                                            const Trace &trace, uint32_t ingress) {
  using namespace l2switch_layout;
  bpf::MapAccess vlans = liveMap(optimizer, "vlans"), fdb = liveMap(optimizer, "fdb");
  auto ingressPort = liveMap(optimizer, "ports").find<l2sw_port>(ingress);
  if (!ingressPort)
    return ingressPort.takeError();
  bool knownPort = ingressPort->has_value();
  l2sw_port port = ingressPort->value_or(l2sw_port{});
  // Unicast (destination, VLAN) keys of the trace's frames by packets, and
  // their sources and VLANs.
  std::set<core::Bytes> sources; // l2sw_fdb_key bytes
  std::set<uint16_t> vlanIds;
  std::vector<core::Bytes> destinations = hottestFirst<core::Bytes>(
      trace, [&](const std::vector<uint8_t> &f) -> std::optional<core::Bytes> {
        if (f.size() < 14 || !knownPort)
          return std::nullopt;
        uint16_t vlan = port.untagged_vlan;
        if (f[12] == 0x81 && f[13] == 0x00 && f.size() >= 18)
          vlan = uint16_t((f[14] << 8 | f[15]) & 0x0fff);
        l2sw_fdb_key source = {}, destination = {};
        std::memcpy(source.mac, &f[6], 6);
        std::memcpy(destination.mac, &f[0], 6);
        source.vlan = destination.vlan = vlan;
        sources.insert(bytesOf(source));
        vlanIds.insert(vlan);
        if (f[0] & 1)
          return std::nullopt;
        return bytesOf(destination);
      });
  std::string header;
  header += "static __always_inline const struct l2sw_port *oracle_port(__u32 in)\n{\n";
  if (knownPort) {
    std::string members;
    for (uint64_t word : port.member)
      members += llvm::formatv("{0:x}ull, ", word).str();
    header += llvm::formatv("\tstatic const struct l2sw_port known = {{ .mode = {0}, "
                            ".untagged_vlan = {1}, .member = {{ {2}} };\n"
                            "\tif (in == {3})\n\t\treturn &known;\n",
                            port.mode, port.untagged_vlan, members, ingress)
                  .str();
  }
  header += "\treturn 0;\n}\n";
  header += "static __always_inline const struct l2sw_vlan *oracle_vlan(__u32 vid)\n{\n";
  for (uint16_t vid : vlanIds) {
    auto found = vlans.find<l2sw_vlan>(uint32_t(vid));
    if (!found)
      return found.takeError();
    if (!*found)
      continue;
    const l2sw_vlan &info = **found;
    header += llvm::formatv("\tif (vid == {0}) {{\n\t\tstatic const struct l2sw_vlan "
                            "v{0} = {{ {1}, {2}, {3}, {4} };\n\t\treturn &v{0};\n\t}\n",
                            vid, info.untagged_ports, info.tagged_ports, info.untagged_group,
                            info.tagged_group)
                  .str();
  }
  header += "\treturn 0;\n}\n";
  header += "static __always_inline int oracle_absent(const struct l2sw_fdb_key *dst)\n{\n";
  size_t hot = 0;
  for (const core::Bytes &key : destinations) {
    if (hot == HotDestinations)
      break;
    if (sources.count(key))
      continue; // learned during the trace
    auto held = fdb.find<l2sw_fdb_entry>(key);
    if (!held)
      return held.takeError();
    if (*held)
      continue; // held
    l2sw_fdb_key k = fromBytes<l2sw_fdb_key>(key);
    std::string compare;
    for (int i = 0; i < 6; ++i)
      compare += llvm::formatv("dst->mac[{0}] == {1} && ", i, unsigned(k.mac[i])).str();
    header += "\tif (" + compare + "dst->vlan == " + std::to_string(k.vlan) +
              ")\n\t\treturn 1;\n";
    ++hot;
  }
  header += "\treturn 0;\n}\n";
  return buildOracle("oracle-hot" + std::to_string(HotDestinations), "l2switch_oracle.bpf.c",
                     "l2switch_oracle", header,
                     {"ports", "vlans", "tx_ports", "flood_groups", "fdb", "stats"}, optimizer);
}

// `function`'s hot-flow oracle (oracles/FUNCTION_oracle.bpf.c, entry
// FUNCTION_oracle) built twice: with `keeps` defined, keeping the LRU
// lookups the function makes (named oracle-hot10-`kept`: what Morpheus
// could reach), and without (oracle-hot10: headroom).
Expected<std::vector<OracleProgram>>
buildKeepingAndSkipping(const std::string &function, const std::string &keeps,
                        const std::string &kept, const std::string &header,
                        const std::vector<const char *> &sharedMaps,
                        const runtime::Optimizer &optimizer) {
  std::vector<OracleProgram> oracles;
  std::string name = "oracle-hot" + std::to_string(HotDestinations);
  for (bool keeping : {true, false}) {
    auto oracle = buildOracle(keeping ? name + "-" + kept : name, function + "_oracle.bpf.c",
                              function + "_oracle",
                              (keeping ? "#define " + keeps + " 1\n" : "") + header, sharedMaps,
                              optimizer);
    if (!oracle)
      return oracle.takeError();
    oracle->skipsLookups = !keeping;
    oracles.push_back(std::move(*oracle));
  }
  return oracles;
}

// The 5-tuple of an IPv4 TCP or UDP frame that is not a fragment, as lb
// keys its flow table (raw header bytes: network order).
std::optional<lb_layout::lb_flow_key> lbFlowOf(const std::vector<uint8_t> &f) {
  if (f.size() < 34 || f[12] != 0x08 || f[13] != 0x00 || (f[14] >> 4) != 4)
    return std::nullopt;
  size_t l4 = 14 + size_t(f[14] & 0x0f) * 4;
  uint8_t proto = f[23];
  if ((proto != IPPROTO_TCP && proto != IPPROTO_UDP) || (f[20] & 0x3f) || f[21] ||
      f.size() < l4 + 4)
    return std::nullopt;
  lb_layout::lb_flow_key key = {};
  std::memcpy(&key.saddr, &f[26], 4);
  std::memcpy(&key.daddr, &f[30], 4);
  std::memcpy(&key.sport, &f[l4], 2);
  std::memcpy(&key.dport, &f[l4 + 2], 2);
  key.proto = proto;
  return key;
}

// lb's hot-flow oracles (oracles/lb_oracle.bpf.c): the configuration and
// the decision of the trace's hottest flows as constants (the VIP's index,
// the flow hash, the real the ring names) for flows to a VIP that is not
// QUIC (the real would depend on the packet's connection id), whose ring
// slot names an active real, and that the flow table does not already send
// to another real. Two builds: "oracle-hot10-flows" keeps the flow table's
// lookup and writes, "oracle-hot10" skips them (headroom Morpheus may not
// take: the lookup decides LRU eviction).
Expected<std::vector<OracleProgram>> buildLbOracles(const runtime::Optimizer &optimizer,
                                                    const Trace &trace) {
  using namespace lb_layout;
  bpf::MapAccess vips = liveMap(optimizer, "vips"), rings = liveMap(optimizer, "rings"),
                 reals = liveMap(optimizer, "reals"), flowTable = liveMap(optimizer, "flows");
  auto configured = liveMap(optimizer, "config").find<lb_config>(uint32_t(0));
  if (!configured)
    return withContext(configured.takeError(), "oracle lb");
  if (!*configured)
    return makeError("oracle lb: the config map holds no entry");
  const lb_config &config = **configured;
  // lb_flow_key bytes, hottest first.
  std::vector<core::Bytes> flows = hottestFirst<core::Bytes>(
      trace, [](const std::vector<uint8_t> &f) -> std::optional<core::Bytes> {
        if (auto key = lbFlowOf(f))
          return bytesOf(*key);
        return std::nullopt;
      });

  std::string header = "struct oracle_flow {\n\t__u32 vip_index;\n\t__u32 real_index;\n"
                       "\tstruct lb_real real;\n\t__u32 hash;\n};\n";
  header += llvm::formatv("static const struct lb_config oracle_config = {{ .source = {0:x}, "
                          ".source_mask = {1:x}, .gateway_mac = {2}, .ttl = {3}, "
                          ".gue_port = {4:x} };\n",
                          config.source, config.source_mask, macLiteral(config.gateway_mac),
                          unsigned(config.ttl), unsigned(config.gue_port))
                .str();
  std::string compares;
  size_t hot = 0;
  for (const core::Bytes &bytes : flows) {
    if (hot == HotDestinations)
      break;
    lb_flow_key flow = fromBytes<lb_flow_key>(bytes);
    lb_vip_key vipKey = {flow.daddr, flow.dport, flow.proto, 0};
    auto vipFound = vips.find<lb_vip>(vipKey);
    if (!vipFound)
      return vipFound.takeError();
    if (!*vipFound || ((*vipFound)->flags & LB_VIP_QUIC))
      continue;
    const lb_vip &vip = **vipFound;
    uint32_t hash = lb_flow_hash(&flow);
    uint32_t slot = vip.index * LB_RING_SIZE + hash % LB_RING_SIZE;
    auto ringSlot = rings.find<uint32_t>(slot);
    if (!ringSlot)
      return ringSlot.takeError();
    if (!*ringSlot || **ringSlot == LB_NO_REAL)
      continue;
    uint32_t realIndex = **ringSlot;
    auto realFound = reals.find<lb_real>(realIndex);
    if (!realFound)
      return realFound.takeError();
    if (!*realFound || !((*realFound)->flags & LB_REAL_ACTIVE))
      continue;
    const lb_real &real = **realFound;
    auto known = flowTable.find<lb_flow>(bytes);
    if (!known)
      return known.takeError();
    if (*known && (*known)->real != realIndex)
      continue;
    header += llvm::formatv("static const struct oracle_flow hot{0} = {{ {1}, {2}, {{ {3:x}, "
                            "{4} }, {5:x} };\n",
                            hot, vip.index, realIndex, real.addr, real.flags, hash)
                  .str();
    compares += llvm::formatv("\tif (flow->saddr == {0:x} && flow->daddr == {1:x} && "
                              "flow->sport == {2:x} && flow->dport == {3:x} && "
                              "flow->proto == {4})\n\t\treturn &hot{5};\n",
                              flow.saddr, flow.daddr, unsigned(flow.sport),
                              unsigned(flow.dport), unsigned(flow.proto), hot)
                    .str();
    ++hot;
  }
  header += "static __always_inline const struct oracle_flow *\n"
            "oracle_hot(const struct lb_flow_key *flow)\n{\n" +
            compares + "\treturn 0;\n}\n";
  return buildKeepingAndSkipping(
      "lb", "ORACLE_KEEPS_FLOWS", "flows", header,
      {"config", "vips", "rings", "reals", "flows", "vip_stats", "events"}, optimizer);
}

// nat's hot-flow oracles (oracles/nat_oracle.bpf.c): for the trace's
// hottest outbound TCP and UDP flows, the translation the data plane holds
// for them (a binding in nat_out whose nat_in half names the flow) and the
// configuration as constants. Only with two ports and frames arriving on
// the inside one. Two builds: "oracle-hot10-tables" keeps both LRU lookups
// and checks them against the constants, "oracle-hot10" skips them
// (headroom Morpheus may not take: the lookups decide LRU eviction).
Expected<std::vector<OracleProgram>> buildNatOracles(const runtime::Optimizer &optimizer,
                                                     const Trace &trace, uint32_t ingress) {
  using namespace nat_layout;
  bpf::MapAccess outbound = liveMap(optimizer, "nat_out"), inbound = liveMap(optimizer, "nat_in");
  auto configured = liveMap(optimizer, "nat_config").find<nat_config>(uint32_t(0));
  if (!configured)
    return withContext(configured.takeError(), "oracle nat");
  if (!*configured)
    return makeError("oracle nat: the nat_config map holds no entry");
  const nat_config &config = **configured;
  bool translates = ingress == config.inside_ifindex &&
                    config.inside_ifindex != config.outside_ifindex &&
                    config.external_count > 0 && config.external_count <= NAT_MAX_EXTERNAL &&
                    config.port_min <= config.port_max;
  std::vector<core::Bytes> flows; // nat_flow_key bytes
  if (translates)
    flows = hottestFirst<core::Bytes>(
        trace, [](const std::vector<uint8_t> &f) -> std::optional<core::Bytes> {
          uint8_t proto = f.size() >= 38 ? f[23] : 0;
          // Options, fragments and ICMP take the original code.
          if (f.size() < 38 || f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 ||
              (f[20] & 0x3f) || f[21] || (proto != IPPROTO_TCP && proto != IPPROTO_UDP))
            return std::nullopt;
          nat_flow_key key = {};
          std::memcpy(&key.addr, &f[26], 4);
          std::memcpy(&key.remote_addr, &f[30], 4);
          std::memcpy(&key.port, &f[34], 2);
          std::memcpy(&key.remote_port, &f[36], 2);
          key.proto = proto;
          return bytesOf(key);
        });

  std::string header = "#define ORACLE_OUTSIDE_MAC " + macLiteral(config.outside_mac) +
                       "\n#define ORACLE_NEXT_HOP_MAC " + macLiteral(config.next_hop_mac) +
                       "\nstatic __always_inline int oracle_outbound(struct xdp_md *ctx, "
                       "struct packet *pkt)\n{\n\tstruct nat_flow_key flow = {};\n\n"
                       "\tif (ctx->ingress_ifindex != " +
                       std::to_string(config.inside_ifindex) +
                       " || pkt->proto == IPPROTO_ICMP)\n\t\treturn -1;\n"
                       "\tflow.addr = pkt->ip->saddr;\n\tflow.remote_addr = pkt->ip->daddr;\n"
                       "\tflow.port = *pkt->sport;\n\tflow.remote_port = *pkt->dport;\n"
                       "\tflow.proto = pkt->proto;\n";
  size_t hot = 0;
  for (const core::Bytes &bytes : flows) {
    if (hot == HotDestinations)
      break;
    nat_flow_key flow = fromBytes<nat_flow_key>(bytes);
    auto bound = outbound.find<nat_binding>(bytes);
    if (!bound)
      return bound.takeError();
    if (!*bound)
      continue; // not bound (yet): the original code
    const nat_binding &binding = **bound;
    nat_flow_key reverse = {binding.external_addr, flow.remote_addr, binding.external_port,
                            flow.remote_port, flow.proto, {}};
    auto owner = inbound.find<nat_origin>(reverse);
    if (!owner)
      return owner.takeError();
    if (!*owner || (*owner)->inside_addr != flow.addr || (*owner)->inside_port != flow.port)
      continue; // the next packet binds again
    header += llvm::formatv("\tif (flow.addr == {0:x} && flow.remote_addr == {1:x} && "
                            "flow.port == {2:x} && flow.remote_port == {3:x} && "
                            "flow.proto == {4})\n\t\treturn hot_outbound(ctx, pkt, &flow, "
                            "{5:x}, {6:x});\n",
                            flow.addr, flow.remote_addr, unsigned(flow.port),
                            unsigned(flow.remote_port), unsigned(flow.proto),
                            binding.external_addr, unsigned(binding.external_port))
                  .str();
    ++hot;
  }
  header += "\treturn -1;\n}\n";
  return buildKeepingAndSkipping(
      "nat", "ORACLE_KEEPS_TABLES", "tables", header,
      {"nat_config", "nat_inside", "nat_ports", "nat_out", "nat_in", "nat_stats"}, optimizer);
}

// A TCP or UDP flow of the firewall's trace, as classify() sees it:
// addresses in network order, ports in host order.
struct FirewallFlow {
  uint32_t saddr, daddr;
  uint16_t sport, dport;
  uint8_t protocol;
  auto operator<=>(const FirewallFlow &) const = default;
};

// The flow of a frame that takes firewall_oracle's hot path (untagged IPv4
// without options, not a fragment, TCP or UDP with its whole header).
std::optional<FirewallFlow> firewallFlowOf(const std::vector<uint8_t> &f) {
  if (f.size() < 34 || f[12] != 0x08 || f[13] != 0x00 || f[14] != 0x45 || (f[20] & 0x1f) ||
      f[21])
    return std::nullopt;
  uint8_t protocol = f[23];
  size_t header = protocol == IPPROTO_TCP ? 20 : protocol == IPPROTO_UDP ? 8 : 0;
  if (!header || f.size() < 34 + header)
    return std::nullopt;
  FirewallFlow flow;
  std::memcpy(&flow.saddr, &f[26], 4);
  std::memcpy(&flow.daddr, &f[30], 4);
  flow.sport = uint16_t(f[34] << 8 | f[35]);
  flow.dport = uint16_t(f[36] << 8 | f[37]);
  flow.protocol = protocol;
  return flow;
}

// The rule set the firewall's map `map` gives one field's value (no
// entry: nullopt, as the data plane's NULL).
template <typename Key>
Expected<std::optional<firewall_layout::fw_rule_set>>
ruleSet(const runtime::Optimizer &optimizer, const char *map, const Key &key) {
  return liveMap(optimizer, map).find<firewall_layout::fw_rule_set>(key);
}

// The firewall's hot-flow oracle (oracles/firewall_oracle.bpf.c): for the
// trace's hottest TCP and UDP flows, the rule_hits slot and the action the
// live tables decide, asked of the maps as the data plane asks them (the
// tries answer the longest prefix, the arrays the field's set; the first
// rule in all five sets decides). Only without connection tracking.
Expected<OracleProgram> buildFirewallOracle(const runtime::Optimizer &optimizer,
                                            const Trace &trace) {
  using namespace firewall_layout;
  auto configured = liveMap(optimizer, "fw_config").find<fw_config>(uint32_t(0));
  if (!configured)
    return withContext(configured.takeError(), "oracle firewall");
  if (!*configured)
    return makeError("oracle firewall: the fw_config map holds no entry");
  const fw_config &config = **configured;
  if (config.flags & FW_FLAG_CONNTRACK)
    return makeError("oracle firewall: connection tracking is on (the hot path would skip "
                     "its conntrack writes)");
  uint32_t generation = config.generation;
  auto portSet = [&](const char *classes, const char *sets,
                     uint16_t port) -> Expected<std::optional<fw_rule_set>> {
    uint32_t index = generation * FW_PORTS + port;
    auto portClass = liveMap(optimizer, classes).find<uint32_t>(index);
    if (!portClass)
      return portClass.takeError();
    if (!*portClass)
      return std::nullopt;
    return ruleSet(optimizer, sets, generation * FW_PORT_SETS + **portClass);
  };
  // The rule classify() returns for `flow`, or FW_MAX_RULES for none.
  auto classify = [&](const FirewallFlow &flow) -> Expected<uint32_t> {
    fw_prefix_key source = {FW_GENERATION_BITS + 32, generation, flow.saddr};
    fw_prefix_key destination = {FW_GENERATION_BITS + 32, generation, flow.daddr};
    Expected<std::optional<fw_rule_set>> found[] = {
        ruleSet(optimizer, "src_prefixes", source),
        ruleSet(optimizer, "dst_prefixes", destination),
        ruleSet(optimizer, "protocols", generation * FW_PROTOCOLS + flow.protocol),
        portSet("sport_class", "sport_sets", flow.sport),
        portSet("dport_class", "dport_sets", flow.dport)};
    std::vector<std::optional<fw_rule_set>> sets;
    Error failed = Error::success();
    for (auto &set : found)
      if (set)
        sets.push_back(std::move(*set));
      else
        failed = llvm::joinErrors(std::move(failed), set.takeError());
    if (failed)
      return failed;
    uint32_t first = 0, last = FW_MAX_WORDS - 1;
    for (const std::optional<fw_rule_set> &set : sets) {
      if (!set)
        return FW_MAX_RULES;
      first = std::max<uint32_t>(first, set->first_word);
      last = std::min<uint32_t>(last, set->last_word);
    }
    for (uint32_t word = first; word <= last; ++word) {
      uint64_t bits = ~0ull;
      for (const std::optional<fw_rule_set> &set : sets)
        bits &= set->bits[word];
      if (bits)
        return word * FW_WORD_BITS + uint32_t(__builtin_ctzll(bits));
    }
    return FW_MAX_RULES;
  };
  std::vector<FirewallFlow> flows =
      hottestFirst<FirewallFlow>(trace, [](const std::vector<uint8_t> &f) {
        return firewallFlowOf(f);
      });
  std::string header = "#define ORACLE_GENERATION " + std::to_string(generation) +
                       "\nstatic __always_inline int oracle_flow(__u32 saddr, __u32 daddr, "
                       "__u16 sport, __u16 dport, __u8 protocol, __u32 *slot)\n{\n";
  for (size_t i = 0; i < std::min(flows.size(), HotDestinations); ++i) {
    const FirewallFlow &flow = flows[i];
    auto rule = classify(flow);
    if (!rule)
      return withContext(rule.takeError(), "oracle firewall");
    uint32_t action = config.default_action, slot = FW_DEFAULT_SLOT;
    if (*rule < FW_MAX_RULES) {
      uint32_t index = generation * FW_MAX_RULES + *rule;
      auto ruleAction = liveMap(optimizer, "rule_actions").find<uint32_t>(index);
      if (!ruleAction)
        return withContext(ruleAction.takeError(), "oracle firewall");
      if (*ruleAction) {
        action = **ruleAction;
        slot = *rule;
      }
    }
    header += llvm::formatv("\tif (saddr == {0:x} && daddr == {1:x} && sport == {2} && "
                            "dport == {3} && protocol == {4}) {{\n\t\t*slot = {5};\n"
                            "\t\treturn {6};\n\t}\n",
                            flow.saddr, flow.daddr, flow.sport, flow.dport,
                            unsigned(flow.protocol), slot, action)
                  .str();
  }
  header += "\treturn -1;\n}\n";
  return buildOracle("oracle-hot" + std::to_string(HotDestinations), "firewall_oracle.bpf.c",
                     "firewall_oracle", header,
                     {"fw_config", "src_prefixes", "dst_prefixes", "protocols", "sport_class",
                      "sport_sets", "dport_class", "dport_sets", "rule_actions", "rule_hits",
                      "fw_stats", "conntrack"},
                     optimizer);
}

} // namespace

Expected<std::vector<OracleProgram>> loadOracles(const Preset &preset,
                                                 const runtime::Optimizer &optimizer,
                                                 const Trace &trace, uint32_t ingress) {
  std::vector<OracleProgram> oracles;
  if (preset.oracle.empty())
    return oracles;
  if (preset.oracle == "l2switch") {
    auto hot = buildL2SwitchOracle(optimizer, trace, ingress);
    if (!hot)
      return hot.takeError();
    oracles.push_back(std::move(*hot));
    return oracles;
  }
  if (preset.oracle == "lb")
    return buildLbOracles(optimizer, trace);
  if (preset.oracle == "nat")
    return buildNatOracles(optimizer, trace, ingress);
  if (preset.oracle == "firewall") {
    auto hot = buildFirewallOracle(optimizer, trace);
    if (!hot)
      return hot.takeError();
    oracles.push_back(std::move(*hot));
    return oracles;
  }
  if (preset.oracle != "router")
    return makeError("{0}: no oracle of kind '{1}' (known: router, l2switch, lb, nat, firewall)",
                     preset.file, preset.oracle);
  auto read = RouterMaps::read(optimizer);
  if (!read)
    return read.takeError();
  const RouterMaps &maps = *read;
  auto hotTable = hotPathTable(maps, hottestDestinations(trace, HotDestinations));
  if (!hotTable)
    return hotTable.takeError();
  auto hot =
      buildRouterOracle("oracle-hot" + std::to_string(HotDestinations), *hotTable, optimizer);
  if (!hot)
    return hot.takeError();
  oracles.push_back(std::move(*hot));
  const std::vector<Route> &routes = maps.routes();
  if (routes.size() <= CompleteOracleRoutes) {
    auto complete = buildRouterOracle("oracle-full", completeTable(maps, routes), optimizer);
    if (!complete)
      return complete.takeError();
    oracles.push_back(std::move(*complete));
  }
  return oracles;
}

} // namespace morpheus::bench
