#include "Control.h"

#include <arpa/inet.h>
#include <net/if.h>

#include <map>
#include <set>
#include <utility>

namespace morpheus::nf::router {

namespace {

// Queues the entries and, when replacing, the removal of every key the map
// holds that the entries do not. Keys compare as raw bytes, which is sound
// because the layouts have no padding (Control.h checks their sizes).
template <typename Entry>
Expected<LoadSummary> queue(client::Transaction &transaction, const client::Map &map,
                            const std::string &name, const std::vector<Entry> &entries,
                            bool replace) {
  LoadSummary summary;
  std::set<Bytes> listed;
  for (const Entry &entry : entries) {
    listed.insert(bytesOf(entry.key));
    transaction.update(name, entry.key, entry.value);
    ++summary.written;
  }
  if (!replace)
    return summary;
  if (Error err = map.forEachKey([&](const Bytes &key) {
        if (!listed.count(key)) {
          transaction.remove(name, key);
          ++summary.removed;
        }
        return true;
      }))
    return err;
  return summary;
}

// The ports that have an interface, ascending.
Expected<std::vector<uint32_t>> portsOf(const client::Map &ports) {
  std::vector<uint32_t> bound;
  for (uint32_t port = 0; port < ports.maxEntries(); ++port) {
    auto ifindex = ports.lookup<uint32_t>(port);
    if (!ifindex)
      return ifindex.takeError();
    if (*ifindex)
      bound.push_back(port);
  }
  return bound;
}

Expected<uint32_t> parsePort(const ConfigLine &line, const std::string &text) {
  auto port = parseNumber(line, text, "port", ROUTER_MAX_PORTS - 1);
  if (!port)
    return port.takeError();
  return uint32_t(*port);
}

Error checkPort(uint32_t port) {
  if (port >= ROUTER_MAX_PORTS)
    return makeError("port {0}: ports are 0 to {1}", port, ROUTER_MAX_PORTS - 1);
  return Error::success();
}

} // namespace

Expected<std::vector<RouteEntry>> parseRoutes(const std::string &path,
                                              const std::vector<uint32_t> &ports) {
  auto lines = readConfig(path);
  if (!lines)
    return lines.takeError();
  std::vector<RouteEntry> entries;
  std::map<std::pair<uint32_t, uint8_t>, unsigned> seen; // prefix -> line
  for (const ConfigLine &line : *lines) {
    const std::vector<std::string> &words = line.words;
    if (words.size() < 2 || words.size() > 3)
      return line.error("expected 'PREFIX NEXTHOP [PORT]', got {0} words", words.size());
    auto prefix = parsePrefix(line, words[0], "prefix");
    if (!prefix)
      return prefix.takeError();
    auto [first, fresh] = seen.emplace(std::pair(prefix->address, prefix->length), line.number);
    if (!fresh)
      return line.error("prefix {0} already given on line {1}", words[0], first->second);

    RouteEntry entry{routeKey(*prefix), {}};
    if (words[1] == "local") {
      if (words.size() == 3)
        return line.error("a local route takes no port");
      entry.value.kind = ROUTE_LOCAL;
      entries.push_back(entry);
      continue;
    }
    entry.value.kind = ROUTE_FORWARD;
    if (words[1] != "direct") {
      auto gateway = parseIpv4(line, words[1], "next hop");
      if (!gateway)
        return gateway.takeError();
      if (*gateway == 0)
        return line.error("next hop: 0.0.0.0 is not a gateway (write 'direct' for an "
                          "on-link route)");
      entry.value.gateway = htonl(*gateway);
    }
    if (words.size() == 3) {
      auto port = parsePort(line, words[2]);
      if (!port)
        return port.takeError();
      entry.value.port = *port;
    } else if (ports.empty()) {
      return line.error("no PORT given and no port is configured to spread routes over "
                        "(bind ports first: 'morpheus nf router set-port')");
    } else {
      entry.value.port = hashedPort(*prefix, ports);
    }
    entries.push_back(entry);
  }
  return entries;
}

Expected<std::vector<NeighborEntry>> parseNeighbors(const std::string &path) {
  auto lines = readConfig(path);
  if (!lines)
    return lines.takeError();
  std::vector<NeighborEntry> entries;
  std::map<std::pair<uint32_t, uint32_t>, unsigned> seen; // (address, port) -> line
  for (const ConfigLine &line : *lines) {
    const std::vector<std::string> &words = line.words;
    if (words.size() != 4)
      return line.error("expected 'ADDRESS DST-MAC SRC-MAC PORT', got {0} words", words.size());
    auto address = parseIpv4(line, words[0], "neighbor");
    if (!address)
      return address.takeError();
    auto dst = parseMac(line, words[1], "destination MAC");
    if (!dst)
      return dst.takeError();
    auto src = parseMac(line, words[2], "source MAC");
    if (!src)
      return src.takeError();
    auto port = parsePort(line, words[3]);
    if (!port)
      return port.takeError();
    auto [first, fresh] = seen.emplace(std::pair(*address, *port), line.number);
    if (!fresh)
      return line.error("neighbor {0} on port {1} already given on line {2}", words[0], *port,
                        first->second);
    NeighborEntry entry{{htonl(*address), *port}, {}};
    std::copy(dst->begin(), dst->end(), entry.value.dst_mac);
    std::copy(src->begin(), src->end(), entry.value.src_mac);
    entries.push_back(entry);
  }
  return entries;
}

route_key routeKey(const Ipv4Prefix &prefix) {
  return route_key{prefix.length, htonl(prefix.address)};
}

uint32_t hashedPort(const Ipv4Prefix &prefix, const std::vector<uint32_t> &ports) {
  const uint8_t bytes[] = {uint8_t(prefix.address >> 24), uint8_t(prefix.address >> 16),
                           uint8_t(prefix.address >> 8), uint8_t(prefix.address), prefix.length};
  uint32_t hash = 2166136261u;
  for (uint8_t byte : bytes)
    hash = (hash ^ byte) * 16777619u;
  return ports[hash % ports.size()];
}

Expected<std::vector<uint32_t>> configuredPorts(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"ports"});
  if (!maps)
    return maps.takeError();
  return portsOf((*maps)["ports"]);
}

Expected<LoadSummary> loadRoutes(const std::string &path, const LoadOptions &options) {
  auto maps = client::PinnedMaps::open(options.pinDir, {"routes", "ports"});
  if (!maps)
    return maps.takeError();
  auto ports = portsOf((*maps)["ports"]);
  if (!ports)
    return ports.takeError();
  auto entries = parseRoutes(path, *ports);
  if (!entries)
    return entries.takeError();
  client::Transaction transaction(*maps);
  auto summary = queue(transaction, (*maps)["routes"], "routes", *entries, options.replace);
  if (!summary)
    return summary.takeError();
  if (Error err = transaction.commit())
    return withContext(std::move(err), path);
  return summary;
}

Expected<LoadSummary> loadNeighbors(const std::string &path, const LoadOptions &options) {
  auto maps = client::PinnedMaps::open(options.pinDir, {"neighbors"});
  if (!maps)
    return maps.takeError();
  auto entries = parseNeighbors(path);
  if (!entries)
    return entries.takeError();
  client::Transaction transaction(*maps);
  auto summary =
      queue(transaction, (*maps)["neighbors"], "neighbors", *entries, options.replace);
  if (!summary)
    return summary.takeError();
  if (Error err = transaction.commit())
    return withContext(std::move(err), path);
  return summary;
}

Error setPort(const std::string &pinDir, uint32_t port, uint32_t ifindex) {
  if (Error err = checkPort(port))
    return err;
  char name[IF_NAMESIZE];
  if (!if_indextoname(ifindex, name))
    return makeError("port {0}: no interface with index {1} in this network namespace", port,
                     ifindex);
  auto maps = client::PinnedMaps::open(pinDir, {"ports"});
  if (!maps)
    return maps.takeError();
  client::Transaction transaction(*maps);
  transaction.update("ports", port, ifindex);
  return withContext(transaction.commit(), "port " + std::to_string(port));
}

Error unsetPort(const std::string &pinDir, uint32_t port) {
  if (Error err = checkPort(port))
    return err;
  auto maps = client::PinnedMaps::open(pinDir, {"ports"});
  if (!maps)
    return maps.takeError();
  client::Transaction transaction(*maps);
  transaction.remove("ports", port);
  return withContext(transaction.commit(), "port " + std::to_string(port));
}

Expected<std::array<uint64_t, STAT_MAX>> readStats(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"stats"});
  if (!maps)
    return maps.takeError();
  std::array<uint64_t, STAT_MAX> totals{};
  for (uint32_t index = 0; index < STAT_MAX; ++index) {
    auto total = (*maps)["stats"].sumOverCpus(index);
    if (!total)
      return total.takeError();
    totals[index] = *total;
  }
  return totals;
}

} // namespace morpheus::nf::router
