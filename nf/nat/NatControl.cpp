#include "NatControl.h"

#include "client/Transaction.h"

#include <arpa/inet.h>
#include <net/if.h>
#include <net/if_arp.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

static_assert(sizeof(nat_config) == 60 && sizeof(nat_prefix_key) == 8 &&
              sizeof(nat_flow_key) == 16 && sizeof(nat_binding) == 8 &&
              sizeof(nat_origin) == 20);

namespace morpheus::nf::nat {

namespace {

const std::vector<std::string> MapNames = {"nat_config", "nat_inside", "nat_ports", "nat_out",
                                           "nat_in"};

std::string formatIpv4(uint32_t address) {
  return std::to_string(address >> 24) + "." + std::to_string((address >> 16) & 0xff) + "." +
         std::to_string((address >> 8) & 0xff) + "." + std::to_string(address & 0xff);
}

bool contains(const Ipv4Prefix &prefix, uint32_t address) {
  uint32_t mask = prefix.length ? ~uint32_t(0) << (32 - prefix.length) : 0;
  return (address & mask) == prefix.address;
}

// ---- parsing ---------------------------------------------------------------

Expected<uint32_t> resolveInterface(const ConfigLine &line, const std::string &text,
                                    const char *what) {
  char name[IF_NAMESIZE];
  if (std::isdigit(static_cast<unsigned char>(text[0]))) {
    auto index = parseNumber(line, text, what, UINT32_MAX);
    if (!index)
      return index.takeError();
    if (*index == 0 || !if_indextoname(*index, name))
      return line.error("{0}: no interface with index {1}", what, *index);
    return uint32_t(*index);
  }
  unsigned index = if_nametoindex(text.c_str());
  if (!index)
    return line.error("{0}: no interface named '{1}'", what, text);
  return index;
}

Expected<Mac> interfaceMac(const ConfigLine &line, uint32_t ifindex, const char *what) {
  ifreq request = {};
  if (!if_indextoname(ifindex, request.ifr_name))
    return line.error("{0}: interface {1} vanished", what, ifindex);
  int fd = socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return makeSystemError(errno, "{0}:{1}: socket", line.file, line.number);
  int failed = ioctl(fd, SIOCGIFHWADDR, &request);
  int err = errno;
  close(fd);
  if (failed)
    return makeSystemError(err, "{0}:{1}: {2}: reading the MAC address of {3}", line.file,
                           line.number, what, request.ifr_name);
  if (request.ifr_hwaddr.sa_family != ARPHRD_ETHER)
    return line.error("{0}: {1} has no Ethernet address; give mac=MAC", what,
                      request.ifr_name);
  Mac mac;
  std::memcpy(mac.data(), request.ifr_hwaddr.sa_data, mac.size());
  return mac;
}

// Collects the lines of one file; cross-line checks run in finish().
class Parser {
public:
  explicit Parser(const PortResolver &resolver) : resolver(resolver) {}
  Error add(const ConfigLine &line);
  Expected<NatSettings> finish(const std::string &path);

private:
  Error expectWords(const ConfigLine &line, size_t count, const char *usage);
  Error once(const ConfigLine &line);
  Error inside(const ConfigLine &line);
  Error external(const ConfigLine &line);
  Error ports(const ConfigLine &line);
  Error insidePort(const ConfigLine &line);
  Error outsidePort(const ConfigLine &line);

  const PortResolver &resolver;
  NatSettings settings;
  std::map<std::string, unsigned> singleLines; // keyword -> line it was given on
  std::vector<ConfigLine> insideLines, externalLines; // parallel to settings
};

Error Parser::add(const ConfigLine &line) {
  const std::string &keyword = line.words[0];
  if (keyword == "inside")
    return inside(line);
  if (keyword == "external")
    return external(line);
  if (keyword == "ports")
    return ports(line);
  if (keyword == "inside-port")
    return insidePort(line);
  if (keyword == "outside-port")
    return outsidePort(line);
  return line.error("unknown keyword '{0}' (expected inside, external, ports, inside-port or "
                    "outside-port)",
                    keyword);
}

Error Parser::expectWords(const ConfigLine &line, size_t count, const char *usage) {
  if (line.words.size() != count)
    return line.error("usage: {0}", usage);
  return Error::success();
}

Error Parser::once(const ConfigLine &line) {
  auto [previous, inserted] = singleLines.emplace(line.words[0], line.number);
  if (!inserted)
    return line.error("'{0}' given twice (first on line {1})", line.words[0], previous->second);
  return Error::success();
}

Error Parser::inside(const ConfigLine &line) {
  if (Error err = expectWords(line, 2, "inside PREFIX"))
    return err;
  auto prefix = parsePrefix(line, line.words[1], "inside");
  if (!prefix)
    return prefix.takeError();
  for (size_t i = 0; i < settings.inside.size(); ++i)
    if (settings.inside[i].address == prefix->address &&
        settings.inside[i].length == prefix->length)
      return line.error("inside: {0} given twice (first on line {1})", line.words[1],
                        insideLines[i].number);
  if (settings.inside.size() == 256)
    return line.error("inside: more than 256 prefixes");
  settings.inside.push_back(*prefix);
  insideLines.push_back(line);
  return Error::success();
}

Error Parser::external(const ConfigLine &line) {
  if (Error err = expectWords(line, 2, "external ADDRESS"))
    return err;
  auto address = parseIpv4(line, line.words[1], "external");
  if (!address)
    return address.takeError();
  for (size_t i = 0; i < settings.external.size(); ++i)
    if (settings.external[i] == *address)
      return line.error("external: {0} given twice (first on line {1})", line.words[1],
                        externalLines[i].number);
  if (settings.external.size() == NAT_MAX_EXTERNAL)
    return line.error("external: more than {0} addresses", NAT_MAX_EXTERNAL);
  settings.external.push_back(*address);
  externalLines.push_back(line);
  return Error::success();
}

Error Parser::ports(const ConfigLine &line) {
  if (Error err = expectWords(line, 2, "ports LOW-HIGH"))
    return err;
  if (Error err = once(line))
    return err;
  std::string range = line.words[1];
  std::replace(range.begin(), range.end(), '-', ':');
  auto parsed = parsePortRange(line, range, "ports");
  if (!parsed)
    return parsed.takeError();
  if (parsed->first == 0)
    return line.error("ports: port 0 cannot be allocated");
  settings.portMin = parsed->first;
  settings.portMax = parsed->second;
  return Error::success();
}

Error Parser::insidePort(const ConfigLine &line) {
  if (Error err = expectWords(line, 2, "inside-port IFNAME|IFINDEX"))
    return err;
  if (Error err = once(line))
    return err;
  auto index = resolver.port(line, line.words[1], "inside-port");
  if (!index)
    return index.takeError();
  settings.insideIfindex = *index;
  return Error::success();
}

Error Parser::outsidePort(const ConfigLine &line) {
  const char *usage = "outside-port IFNAME|IFINDEX next-hop=MAC [mac=MAC]";
  if (line.words.size() < 3)
    return line.error("usage: {0}", usage);
  if (Error err = once(line))
    return err;
  auto index = resolver.port(line, line.words[1], "outside-port");
  if (!index)
    return index.takeError();
  ConfigLine options = line;
  options.words.erase(options.words.begin(), options.words.begin() + 2);
  auto values = keyValues(options);
  if (!values)
    return values.takeError();
  for (const auto &[key, value] : *values)
    if (key != "next-hop" && key != "mac")
      return line.error("outside-port: unknown option '{0}' (usage: {1})", key, usage);
  if (!values->count("next-hop"))
    return line.error("outside-port: next-hop=MAC is missing (usage: {0})", usage);
  auto nextHop = parseMac(line, values->at("next-hop"), "next-hop");
  if (!nextHop)
    return nextHop.takeError();
  auto own = values->count("mac") ? parseMac(line, values->at("mac"), "mac")
                                  : resolver.mac(line, *index, "outside-port");
  if (!own)
    return own.takeError();
  settings.outsideIfindex = *index;
  settings.nextHopMac = *nextHop;
  settings.outsideMac = *own;
  return Error::success();
}

Expected<NatSettings> Parser::finish(const std::string &path) {
  if (settings.inside.empty())
    return makeError("{0}: no 'inside PREFIX' line", path);
  if (settings.external.empty())
    return makeError("{0}: no 'external ADDRESS' line", path);
  for (const char *keyword : {"ports", "inside-port", "outside-port"})
    if (!singleLines.count(keyword))
      return makeError("{0}: no '{1}' line", path, keyword);
  for (size_t i = 0; i < settings.external.size(); ++i)
    for (size_t j = 0; j < settings.inside.size(); ++j)
      if (contains(settings.inside[j], settings.external[i]))
        return externalLines[i].error("external: {0} lies in the inside prefix {1} (line {2})",
                                      externalLines[i].words[1], insideLines[j].words[1],
                                      insideLines[j].number);
  return settings;
}

// ---- map access --------------------------------------------------------------

// Every entry of one of the tables (nat_out, nat_in), as structs in key
// byte order. The data plane may insert and evict meanwhile; entries
// evicted during the walk are left out.
template <typename Key, typename Value>
Expected<std::vector<std::pair<Key, Value>>> readTable(const client::Map &map) {
  auto entries = map.entriesAs<Key, Value>();
  if (!entries)
    return entries.takeError();
  std::sort(entries->begin(), entries->end(), [](const auto &a, const auto &b) {
    return bytesOf(a.first) < bytesOf(b.first);
  });
  return entries;
}

} // namespace

PortResolver kernelInterfaces() {
  return {resolveInterface, interfaceMac};
}

nat_config configValue(const NatSettings &settings) {
  nat_config config = {};
  config.inside_ifindex = settings.insideIfindex;
  config.outside_ifindex = settings.outsideIfindex;
  config.port_min = settings.portMin;
  config.port_max = settings.portMax;
  config.external_count = settings.external.size();
  for (size_t i = 0; i < settings.external.size(); ++i)
    config.external[i] = htonl(settings.external[i]);
  std::memcpy(config.outside_mac, settings.outsideMac.data(), ETH_ALEN);
  std::memcpy(config.next_hop_mac, settings.nextHopMac.data(), ETH_ALEN);
  return config;
}

bool allowsTranslation(const NatSettings &settings, uint32_t insideAddr, uint32_t externalAddr,
                       uint16_t externalPort) {
  uint32_t inside = ntohl(insideAddr), external = ntohl(externalAddr);
  uint16_t port = ntohs(externalPort);
  return std::any_of(settings.inside.begin(), settings.inside.end(),
                     [&](const Ipv4Prefix &prefix) { return contains(prefix, inside); }) &&
         std::find(settings.external.begin(), settings.external.end(), external) !=
             settings.external.end() &&
         port >= settings.portMin && port <= settings.portMax;
}

Expected<NatSettings> parseConfig(const std::string &path, const PortResolver &ports) {
  auto lines = readConfig(path);
  if (!lines)
    return lines.takeError();
  Parser parser(ports);
  for (const ConfigLine &line : *lines)
    if (Error err = parser.add(line))
      return err;
  return parser.finish(path);
}

Error applyConfig(const NatSettings &settings, const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, MapNames);
  if (!maps)
    return maps.takeError();
  client::Transaction transaction(*maps);

  // Egress ports before the configuration that sends packets to them.
  uint32_t sides[NAT_SIDES] = {settings.insideIfindex, settings.outsideIfindex};
  for (uint32_t side = 0; side < NAT_SIDES; ++side)
    transaction.update("nat_ports", side, sides[side]);

  std::set<Bytes> wanted;
  for (const Ipv4Prefix &prefix : settings.inside)
    wanted.insert(bytesOf(nat_prefix_key{prefix.length, htonl(prefix.address)}));
  auto inside = (*maps)["nat_inside"].entries();
  if (!inside)
    return inside.takeError();
  for (const auto &[key, value] : std::map<Bytes, Bytes>(inside->begin(), inside->end()))
    if (!wanted.count(key))
      transaction.remove("nat_inside", key);
  for (const Bytes &key : wanted)
    transaction.update("nat_inside", key, uint32_t(1));

  transaction.update("nat_config", uint32_t(0), configValue(settings));

  auto out = readTable<nat_flow_key, nat_binding>((*maps)["nat_out"]);
  if (!out)
    return out.takeError();
  for (const auto &[key, binding] : *out)
    if (!allowsTranslation(settings, key.addr, binding.external_addr, binding.external_port))
      transaction.remove("nat_out", key);
  auto in = readTable<nat_flow_key, nat_origin>((*maps)["nat_in"]);
  if (!in)
    return in.takeError();
  for (const auto &[key, origin] : *in)
    if (!allowsTranslation(settings, origin.inside_addr, key.addr, key.port))
      transaction.remove("nat_in", key);
  return transaction.commit();
}

Error loadConfig(const std::string &path, const std::string &pinDir) {
  auto settings = parseConfig(path);
  if (!settings)
    return settings.takeError();
  return applyConfig(*settings, pinDir);
}

Expected<std::vector<Translation>> readTranslations(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"nat_out", "nat_in"});
  if (!maps)
    return maps.takeError();
  auto in = readTable<nat_flow_key, nat_origin>((*maps)["nat_in"]);
  if (!in)
    return in.takeError();
  std::map<Bytes, nat_origin> reverse;
  for (const auto &[key, origin] : *in)
    reverse[bytesOf(key)] = origin;

  auto out = readTable<nat_flow_key, nat_binding>((*maps)["nat_out"]);
  if (!out)
    return out.takeError();
  std::vector<Translation> translations;
  for (const auto &[key, binding] : *out) {
    Translation t;
    t.protocol = key.proto;
    t.insideAddr = ntohl(key.addr);
    t.insidePort = ntohs(key.port);
    t.remoteAddr = ntohl(key.remote_addr);
    t.remotePort = ntohs(key.remote_port);
    t.externalAddr = ntohl(binding.external_addr);
    t.externalPort = ntohs(binding.external_port);
    nat_flow_key back = key;
    back.addr = binding.external_addr;
    back.port = binding.external_port;
    auto match = reverse.find(bytesOf(back));
    if (match != reverse.end() && match->second.inside_addr == key.addr &&
        match->second.inside_port == key.port)
      reverse.erase(match);
    else
      t.halves = Translation::Halves::OutboundOnly;
    translations.push_back(t);
  }
  for (const auto &[bytes, origin] : reverse) {
    auto key = fromBytes<nat_flow_key>(bytes);
    Translation t;
    t.protocol = key.proto;
    t.insideAddr = ntohl(origin.inside_addr);
    t.insidePort = ntohs(origin.inside_port);
    t.remoteAddr = ntohl(key.remote_addr);
    t.remotePort = ntohs(key.remote_port);
    t.externalAddr = ntohl(key.addr);
    t.externalPort = ntohs(key.port);
    t.halves = Translation::Halves::InboundOnly;
    translations.push_back(t);
  }
  return translations;
}

std::string formatTranslations(const std::vector<Translation> &translations) {
  auto order = [](const Translation &t) {
    return std::tie(t.protocol, t.insideAddr, t.insidePort, t.remoteAddr, t.remotePort,
                    t.externalAddr, t.externalPort);
  };
  std::vector<Translation> sorted = translations;
  std::sort(sorted.begin(), sorted.end(),
            [&](const Translation &a, const Translation &b) { return order(a) < order(b); });
  auto endpoint = [](uint32_t address, uint16_t port) {
    return formatIpv4(address) + ":" + std::to_string(port);
  };
  auto column = [](std::string text, size_t width) {
    text.resize(std::max(width, text.size() + 1), ' ');
    return text;
  };
  std::string out = column("proto", 7) + column("inside", 23) + column("external", 23) +
                    column("remote", 23) + "halves\n";
  for (const Translation &t : sorted) {
    const char *protocol = t.protocol == IPPROTO_TCP   ? "tcp"
                           : t.protocol == IPPROTO_UDP ? "udp"
                                                       : "icmp";
    const char *halves = t.halves == Translation::Halves::Both           ? "both"
                         : t.halves == Translation::Halves::OutboundOnly ? "outbound-only"
                                                                         : "inbound-only";
    out += column(protocol, 7) + column(endpoint(t.insideAddr, t.insidePort), 23) +
           column(endpoint(t.externalAddr, t.externalPort), 23) +
           column(endpoint(t.remoteAddr, t.remotePort), 23) + halves + "\n";
  }
  return out;
}

Expected<std::vector<std::pair<std::string, uint64_t>>> readStats(const std::string &pinDir) {
  static const char *const names[] = {
      "outbound",  "inbound",     "new-flow",    "no-mapping",      "not-nat",
      "fragment",  "ip-options",  "ttl-expired", "ports-exhausted", "malformed"};
  static_assert(std::size(names) == NAT_STAT_MAX);
  auto maps = client::PinnedMaps::open(pinDir, {"nat_stats"});
  if (!maps)
    return maps.takeError();
  std::vector<std::pair<std::string, uint64_t>> out;
  for (uint32_t index = 0; index < NAT_STAT_MAX; ++index) {
    auto sum = (*maps)["nat_stats"].sumOverCpus(index);
    if (!sum)
      return sum.takeError();
    out.emplace_back(names[index], *sum);
  }
  return out;
}

} // namespace morpheus::nf::nat
