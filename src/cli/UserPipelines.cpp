#include "cli/UserPipelines.h"

#include "nf/firewall/UserRules.h"
#include "nf/nat/UserNat.h"
#include "nf/router/Control.h"

#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/MemoryBuffer.h>

#include <arpa/inet.h>

#include <algorithm>
#include <cstring>

namespace morpheus::cli {

const std::vector<std::string> &lpmKinds() {
  static const std::vector<std::string> kinds = {"dir24", "linear", "rte"};
  return kinds;
}

const std::vector<std::string> &hashKinds() {
  static const std::vector<std::string> kinds = {"own", "rte"};
  return kinds;
}

std::vector<std::string> builtLpmKinds() {
#ifdef MORPHEUS_WITH_DPDK
  return lpmKinds();
#else
  return {"dir24", "linear"};
#endif
}

namespace {

// The morpheus_user.h kind of an --lpm or --hash name (lpmKinds, hashKinds).
std::string lpmMacro(const std::string &lpm) {
  return lpm == "linear" ? "MU_LPM_LINEAR" : lpm == "rte" ? "MU_LPM_RTE" : "MU_LPM_DIR24";
}
std::string hashMacro(const std::string &hash) {
  return hash == "rte" ? "MU_HASH_RTE" : "MU_HASH";
}

// How many of the trace's hottest keys an oracle answers first.
constexpr size_t OracleHotKeys = 8;

template <typename T> Bytes bytesOfValue(const T &value) {
  Bytes bytes(sizeof value);
  std::memcpy(bytes.data(), &value, sizeof value);
  return bytes;
}

uint32_t maskOf(uint32_t length) { return length ? ~uint32_t(0) << (32 - length) : 0; }

// A statement of a handler's source and what an oracle writes instead.
struct Replacement {
  std::string statement, replacement;
};

// The handler at `handlerPath` with each of `replacements` made and `code`
// (what they use) inserted before its entry `entry`.
Expected<std::string> rewrittenHandler(const std::string &handlerPath, const std::string &entry,
                                       const std::vector<Replacement> &replacements,
                                       const std::string &code) {
  auto buffer = llvm::MemoryBuffer::getFile(handlerPath);
  if (!buffer)
    return makeError("{0}: {1}", handlerPath, buffer.getError().message());
  std::string source = (*buffer)->getBuffer().str();
  const std::string handler = "MU_HANDLER int " + entry + "(";
  if (source.find(handler) == std::string::npos)
    return makeError("{0}: no handler '{1}'", handlerPath, entry);
  for (const Replacement &edit : replacements) {
    size_t at = source.find(edit.statement);
    if (at == std::string::npos)
      return makeError("{0}: no '{1}' in handler '{2}' to replace", handlerPath, edit.statement,
                       entry);
    source.replace(at, edit.statement.size(), edit.replacement);
  }
  source.insert(source.find(handler), code);
  return source;
}

class RouterPipeline : public UserPipeline {
public:
  RouterPipeline(std::string routesFile, std::string neighborsFile, uint32_t ports,
                 std::vector<nf::router::RouteEntry> routes,
                 std::vector<nf::router::NeighborEntry> neighbors)
      : routesFile(std::move(routesFile)), neighborsFile(std::move(neighborsFile)), ports(ports),
        routes(std::move(routes)), neighbors(std::move(neighbors)) {}

  std::string defaultHandler() const override {
    return MORPHEUS_SOURCE_DIR "/nf/router/user/router_user.c";
  }
  std::string entry() const override { return "router"; }
  std::vector<std::string> cflags(const TableKinds &kinds) const override {
    return {"-DROUTER_LPM=" + lpmMacro(kinds.lpm), "-DROUTER_HASH=" + hashMacro(kinds.hash),
            "-DROUTER_USER_MAX_ROUTES=" + std::to_string(std::max<size_t>(routes.size(), 4096))};
  }

  Error configure(user::TableSet &tables) const override {
    user::Guard::Update change(tables.guard());
    for (uint32_t port = 0; port < ports; ++port)
      if (Error err =
              tables.updateUnguarded("ports", bytesOfValue(port), bytesOfValue(uint32_t(1))))
        return err;
    for (const auto &entry : routes)
      if (Error err = tables.updateUnguarded("routes", bytesOfValue(entry.key),
                                             bytesOfValue(entry.value)))
        return withContext(std::move(err), routesFile);
    for (const auto &entry : neighbors)
      if (Error err = tables.updateUnguarded("neighbors", bytesOfValue(entry.key),
                                             bytesOfValue(entry.value)))
        return withContext(std::move(err), neighborsFile);
    return Error::success();
  }

  std::string summary(const user::TableSet &tables) const override {
    return llvm::formatv("{0} routes ({1}), {2} neighbours ({3}), {4} ports", routes.size(),
                         tables.catalog().at("routes").typeName, neighbors.size(),
                         tables.catalog().at("neighbors").typeName, ports)
        .str();
  }

  std::vector<std::string> lpmTables() const override { return {"routes"}; }

  // The route lookup as compares: the hot destinations with a route, and
  // what the table answers them, first, then every route longest first, as
  // a person who knew the routes and the traffic would write it.
  Expected<OracleSource> oracle(const std::string &handlerPath, user::TableSet &twin,
                                const bench::Trace &trace) const override {
    std::vector<uint32_t> hot;
    std::vector<route> hotRoutes;
    user::Table *table = twin.find("routes");
    for (uint32_t address : bench::hottestDestinations(trace, OracleHotKeys)) {
      route_key key{32, htonl(address)};
      if (auto *answer = static_cast<const route *>(table->lookup(&key))) {
        hot.push_back(address);
        hotRoutes.push_back(*answer);
      }
    }
    std::vector<const nf::router::RouteEntry *> longestFirst;
    for (const auto &entry : routes)
      longestFirst.push_back(&entry);
    std::stable_sort(longestFirst.begin(), longestFirst.end(), [](auto *a, auto *b) {
      return a->key.prefixlen > b->key.prefixlen;
    });
    std::string code = "static const struct route oracle_table[] = {\n";
    auto value = [&](const route &r) {
      code += llvm::formatv("\t{{ {0}u, {1}u, {2}u },\n", r.gateway, r.port, r.kind).str();
    };
    for (const route &r : hotRoutes)
      value(r);
    for (const auto *entry : longestFirst)
      value(entry->value);
    code += "};\n\n"
            "static __always_inline const struct route *oracle_route(__be32 daddr)\n{\n"
            "\t__u32 a = ntohl(daddr);\n\n";
    for (size_t i = 0; i < hot.size(); ++i)
      code +=
          llvm::formatv("\tif (a == {0:x}u)\n\t\treturn &oracle_table[{1}];\n", hot[i], i).str();
    for (size_t i = 0; i < longestFirst.size(); ++i) {
      uint32_t mask = maskOf(longestFirst[i]->key.prefixlen);
      uint32_t prefix = ntohl(longestFirst[i]->key.addr) & mask;
      code += llvm::formatv("\tif ((a & {0:x}u) == {1:x}u)\n\t\treturn &oracle_table[{2}];\n",
                            mask, prefix, hot.size() + i)
                  .str();
    }
    code += "\treturn 0;\n}\n\n";
    auto source = rewrittenHandler(handlerPath, entry(),
                                   {{"route = mu_lookup(&routes, &route_key);",
                                     "route = oracle_route(iph->daddr);"}},
                                   code);
    if (!source)
      return source.takeError();
    return OracleSource{std::move(*source),
                        llvm::formatv("the routes as {0} compares, {1} hot destinations first",
                                      routes.size(), hot.size())
                            .str()};
  }

private:
  std::string routesFile, neighborsFile;
  uint32_t ports;
  std::vector<nf::router::RouteEntry> routes;
  std::vector<nf::router::NeighborEntry> neighbors;
};

class FirewallPipeline : public UserPipeline {
public:
  FirewallPipeline(std::string rulesFile, std::vector<nf::firewall::Rule> rules,
                   bool acceptByDefault)
      : rulesFile(std::move(rulesFile)), rules(std::move(rules)),
        defaultAction(acceptByDefault ? FW_ACCEPT : FW_DROP) {}

  std::string defaultHandler() const override {
    return MORPHEUS_SOURCE_DIR "/nf/firewall/user/firewall_user.c";
  }
  std::string entry() const override { return "firewall"; }
  std::vector<std::string> cflags(const TableKinds &kinds) const override {
    return {"-DFW_LPM=" + lpmMacro(kinds.lpm)};
  }

  Error configure(user::TableSet &tables) const override {
    if (Error err = nf::firewall::loadUserRules(tables, rules, defaultAction))
      return withContext(std::move(err), rulesFile);
    return Error::success();
  }

  std::string summary(const user::TableSet &tables) const override {
    return llvm::formatv("{0} rules ({1} prefixes: {2} source, {3} destination), default {4}",
                         rules.size(), tables.catalog().at("src_prefixes").typeName,
                         tables.find("src_prefixes")->size(), tables.find("dst_prefixes")->size(),
                         defaultAction == FW_ACCEPT ? "ACCEPT" : "DROP")
        .str();
  }

  std::vector<std::string> lpmTables() const override { return {"src_prefixes", "dst_prefixes"}; }

  // The classification as compares: the trace's hot flows (their whole
  // 5-tuple) with the rule that matches them first, then every rule in
  // priority order, a compare per field it constrains.
  Expected<OracleSource> oracle(const std::string &handlerPath, user::TableSet &,
                                const bench::Trace &trace) const override {
    using nf::firewall::PacketFields;
    std::vector<PacketFields> hot = bench::hottestFirst<PacketFields>(
        trace, [](const std::vector<uint8_t> &frame) { return nf::firewall::packetFields(frame); });
    if (hot.size() > OracleHotKeys)
      hot.resize(OracleHotKeys);
    std::string code = "static __always_inline __u32 oracle_rule(const struct packet_fields *pkt)\n"
                       "{\n\t__u32 s = ntohl(pkt->saddr), d = ntohl(pkt->daddr);\n\n";
    for (const PacketFields &flow : hot) {
      std::optional<size_t> rule = nf::firewall::firstMatch(rules, flow);
      code += llvm::formatv("\tif (s == {0:x}u && d == {1:x}u && pkt->protocol == {2} && "
                            "pkt->has_ports == {3} && pkt->sport == {4} && pkt->dport == {5})\n"
                            "\t\treturn {6};\n",
                            flow.saddr, flow.daddr, flow.protocol, flow.hasPorts ? 1 : 0,
                            flow.sport, flow.dport, rule ? *rule : size_t(FW_MAX_RULES))
                  .str();
    }
    for (size_t i = 0; i < rules.size(); ++i) {
      const nf::firewall::Rule &rule = rules[i];
      std::vector<std::string> tests;
      if (rule.src.length)
        tests.push_back(
            llvm::formatv("(s & {0:x}u) == {1:x}u", maskOf(rule.src.length), rule.src.address));
      if (rule.dst.length)
        tests.push_back(
            llvm::formatv("(d & {0:x}u) == {1:x}u", maskOf(rule.dst.length), rule.dst.address));
      if (rule.protocol)
        tests.push_back(llvm::formatv("pkt->protocol == {0}", *rule.protocol));
      for (const auto &[field, range] :
           {std::pair{"sport", rule.sport}, std::pair{"dport", rule.dport}})
        if (!range.any())
          tests.push_back(llvm::formatv("pkt->has_ports && pkt->{0} >= {1} && pkt->{0} <= {2}",
                                        field, range.low, range.high));
      std::string condition = tests.empty() ? "1" : tests.front();
      for (size_t t = 1; t < tests.size(); ++t)
        condition += " && " + tests[t];
      code += llvm::formatv("\tif ({0})\n\t\treturn {1};\n", condition, i).str();
    }
    code += "\treturn NO_RULE;\n}\n\n";
    auto source = rewrittenHandler(handlerPath, entry(),
                                   {{"rule = classify(&pkt);", "rule = oracle_rule(&pkt);"}}, code);
    if (!source)
      return source.takeError();
    return OracleSource{std::move(*source),
                        llvm::formatv("the rules as {0} compares, {1} hot flows first",
                                      rules.size(), hot.size())
                            .str()};
  }

private:
  std::string rulesFile;
  std::vector<nf::firewall::Rule> rules;
  fw_action defaultAction;
};

class NatPipeline : public UserPipeline {
public:
  NatPipeline(std::string configFile, nf::nat::NatSettings settings)
      : configFile(std::move(configFile)), settings(std::move(settings)) {}

  std::string defaultHandler() const override {
    return MORPHEUS_SOURCE_DIR "/nf/nat/user/nat_user.c";
  }
  std::string entry() const override { return "nat"; }
  std::vector<std::string> cflags(const TableKinds &kinds) const override {
    return {"-DNAT_LPM=" + lpmMacro(kinds.lpm), "-DNAT_HASH=" + hashMacro(kinds.hash)};
  }

  Error configure(user::TableSet &tables) const override {
    if (Error err = nf::nat::loadUserNat(tables, settings))
      return withContext(std::move(err), configFile);
    return Error::success();
  }

  std::string summary(const user::TableSet &tables) const override {
    return llvm::formatv("{0} inside prefixes ({1}), {2} external addresses, ports {3}-{4}, "
                         "inside port {5}, outside port {6}, bindings ({7})",
                         settings.inside.size(), tables.catalog().at("nat_inside").typeName,
                         settings.external.size(), settings.portMin, settings.portMax,
                         settings.insideIfindex, settings.outsideIfindex,
                         tables.catalog().at("nat_out").typeName)
        .str();
  }

  std::vector<std::string> lpmTables() const override { return {"nat_inside"}; }

  // The configuration as constants: nat_config's value a const global,
  // the inside prefixes as compares. The binding tables stay tables: they
  // are the state the data plane writes, which no one can write in
  // beforehand (answering a hot flow from a constant would skip the
  // insert its first packet makes).
  Expected<OracleSource> oracle(const std::string &handlerPath, user::TableSet &,
                                const bench::Trace &) const override {
    nat_config config = nf::nat::configValue(settings);
    auto bytes = [](const uint8_t *data, size_t size) {
      std::string list;
      for (size_t i = 0; i < size; ++i)
        list += llvm::formatv("{0}0x{1:x-2}", i ? ", " : "", data[i]).str();
      return list;
    };
    std::string code = llvm::formatv("static const struct nat_config oracle_config = {{\n"
                                     "\t.inside_ifindex = {0}u,\n\t.outside_ifindex = {1}u,\n"
                                     "\t.port_min = {2},\n\t.port_max = {3},\n"
                                     "\t.external_count = {4}u,\n\t.external = {{",
                                     config.inside_ifindex, config.outside_ifindex,
                                     config.port_min, config.port_max, config.external_count)
                           .str();
    for (uint32_t i = 0; i < config.external_count; ++i)
      code += llvm::formatv("{0}{1:x}u", i ? ", " : " ", config.external[i]).str();
    code += llvm::formatv(" },\n\t.outside_mac = {{ {0} },\n\t.next_hop_mac = {{ {1} },\n};\n\n",
                          bytes(config.outside_mac, ETH_ALEN),
                          bytes(config.next_hop_mac, ETH_ALEN))
                .str();
    std::string inside;
    for (const nf::Ipv4Prefix &prefix : settings.inside)
      inside += llvm::formatv("{0}(ntohl(addr) & {1:x}u) == {2:x}u", inside.empty() ? "" : " ||\n\t       ",
                              maskOf(prefix.length), prefix.address)
                    .str();
    auto source = rewrittenHandler(
        handlerPath, entry(),
        {{"return mu_lookup(&nat_inside, &key) != 0;", "return " + inside + ";"},
         {"cfg = mu_lookup(&nat_config, &zero);", "cfg = &oracle_config;"}},
        code);
    if (!source)
      return source.takeError();
    return OracleSource{std::move(*source),
                        llvm::formatv("the configuration as constants ({0} inside prefixes as "
                                      "compares, {1} external addresses), the binding tables kept",
                                      settings.inside.size(), settings.external.size())
                            .str()};
  }

private:
  std::string configFile;
  nf::nat::NatSettings settings;
};

} // namespace

Expected<std::unique_ptr<UserPipeline>> routerPipeline(const std::string &routesFile,
                                                       const std::string &neighborsFile,
                                                       uint32_t ports) {
  std::vector<uint32_t> portList;
  for (uint32_t port = 0; port < ports; ++port)
    portList.push_back(port);
  auto routes = nf::router::parseRoutes(routesFile, portList);
  if (!routes)
    return routes.takeError();
  auto neighbors = nf::router::parseNeighbors(neighborsFile);
  if (!neighbors)
    return neighbors.takeError();
  return std::make_unique<RouterPipeline>(routesFile, neighborsFile, ports, std::move(*routes),
                                          std::move(*neighbors));
}

Expected<std::unique_ptr<UserPipeline>> firewallPipeline(const std::string &rulesFile,
                                                         bool acceptByDefault) {
  auto rules = nf::firewall::parseRules(rulesFile);
  if (!rules)
    return rules.takeError();
  return std::make_unique<FirewallPipeline>(rulesFile, std::move(*rules), acceptByDefault);
}

Expected<std::unique_ptr<UserPipeline>> natPipeline(const std::string &configFile) {
  auto settings = nf::nat::parseConfig(configFile, nf::nat::userPorts());
  if (!settings)
    return settings.takeError();
  return std::make_unique<NatPipeline>(configFile, std::move(*settings));
}

} // namespace morpheus::cli

