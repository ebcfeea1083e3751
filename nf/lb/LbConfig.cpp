#include "LbConfig.h"

#include <netinet/in.h>

#include <map>
#include <optional>
#include <tuple>

namespace morpheus::nf::lb {

std::string formatIpv4(uint32_t address) {
  return llvm::formatv("{0}.{1}.{2}.{3}", address >> 24, (address >> 16) & 0xff,
                       (address >> 8) & 0xff, address & 0xff)
      .str();
}

std::string describeVip(uint32_t address, uint16_t port, uint8_t protocol) {
  return llvm::formatv("{0}:{1}/{2}", formatIpv4(address), port,
                       protocol == IPPROTO_TCP ? "tcp" : "udp")
      .str();
}

namespace {

// Which directives were seen, for "given twice" and "missing" errors.
struct Seen {
  std::optional<unsigned> source, gateway, ttl, guePort;
};

Error expectWords(const ConfigLine &line, size_t minimum, size_t maximum, const char *usage) {
  if (line.words.size() < minimum || line.words.size() > maximum)
    return line.error("expected '{0}'", usage);
  return Error::success();
}

Error once(const ConfigLine &line, std::optional<unsigned> &seen) {
  if (seen)
    return line.error("'{0}' given twice (first on line {1})", line.words[0], *seen);
  seen = line.number;
  return Error::success();
}

// vip ADDRESS:PORT/PROTO [quic]
Expected<VipSpec> parseVip(const ConfigLine &line) {
  if (Error err = expectWords(line, 2, 3, "vip ADDRESS:PORT/tcp|udp [quic]"))
    return err;
  const std::string &text = line.words[1];
  auto colon = text.find(':');
  auto slash = text.find('/', colon == std::string::npos ? 0 : colon);
  if (colon == std::string::npos || slash == std::string::npos)
    return line.error("vip: '{0}' is not ADDRESS:PORT/tcp|udp", text);
  VipSpec vip;
  vip.line = line;
  auto address = parseIpv4(line, text.substr(0, colon), "vip address");
  if (!address)
    return address.takeError();
  vip.address = *address;
  auto port = parseNumber(line, text.substr(colon + 1, slash - colon - 1), "vip port", 65535);
  if (!port)
    return port.takeError();
  if (*port == 0)
    return line.error("vip port: 0 is not a service port");
  vip.port = *port;
  std::string protocol = text.substr(slash + 1);
  if (protocol == "tcp")
    vip.protocol = IPPROTO_TCP;
  else if (protocol == "udp")
    vip.protocol = IPPROTO_UDP;
  else
    return line.error("vip protocol: '{0}' is neither tcp nor udp", protocol);
  if (line.words.size() == 3) {
    if (line.words[2] != "quic")
      return line.error("vip: unknown flag '{0}' (only 'quic')", line.words[2]);
    if (vip.protocol != IPPROTO_UDP)
      return line.error("vip: quic needs a udp VIP, not {0}", text);
    vip.quic = true;
  }
  return vip;
}

// real ADDRESS [weight=N] [gue]
Expected<RealSpec> parseReal(const ConfigLine &line) {
  if (Error err = expectWords(line, 2, 4, "real ADDRESS [weight=N] [gue]"))
    return err;
  RealSpec real;
  real.line = line;
  auto address = parseIpv4(line, line.words[1], "real address");
  if (!address)
    return address.takeError();
  if (*address == 0)
    return line.error("real address: 0.0.0.0 cannot receive packets");
  real.address = *address;
  bool weighted = false;
  for (size_t i = 2; i < line.words.size(); ++i) {
    const std::string &word = line.words[i];
    if (word == "gue" && !real.gue) {
      real.gue = true;
    } else if (word.rfind("weight=", 0) == 0 && !weighted) {
      auto weight = parseNumber(line, word.substr(7), "real weight", 65535);
      if (!weight)
        return weight.takeError();
      real.weight = *weight;
      weighted = true;
    } else {
      return line.error("real: unexpected '{0}' (expected weight=N or gue, once each)", word);
    }
  }
  return real;
}

Error parseSetting(const ConfigLine &line, LbSettings &settings, Seen &seen) {
  const std::string &directive = line.words[0];
  if (directive == "source") {
    if (Error err = expectWords(line, 2, 2, "source ADDRESS[/PREFIX]"))
      return err;
    if (Error err = once(line, seen.source))
      return err;
    auto prefix = parsePrefix(line, line.words[1], "source");
    if (!prefix)
      return prefix.takeError();
    if (prefix->length == 0)
      return line.error("source: a /0 prefix would use the client's address itself");
    settings.source = prefix->address;
    settings.sourceMask = prefix->length == 32 ? 0 : ~uint32_t(0) >> prefix->length;
    return Error::success();
  }
  if (directive == "gateway") {
    if (Error err = expectWords(line, 2, 2, "gateway MAC"))
      return err;
    if (Error err = once(line, seen.gateway))
      return err;
    auto mac = parseMac(line, line.words[1], "gateway");
    if (!mac)
      return mac.takeError();
    settings.gateway = *mac;
    return Error::success();
  }
  if (directive == "ttl") {
    if (Error err = expectWords(line, 2, 2, "ttl N"))
      return err;
    if (Error err = once(line, seen.ttl))
      return err;
    auto ttl = parseNumber(line, line.words[1], "ttl", 255);
    if (!ttl)
      return ttl.takeError();
    if (*ttl == 0)
      return line.error("ttl: 0 would have the first router drop every packet");
    settings.ttl = *ttl;
    return Error::success();
  }
  if (directive == "gue-port") {
    if (Error err = expectWords(line, 2, 2, "gue-port PORT"))
      return err;
    if (Error err = once(line, seen.guePort))
      return err;
    auto port = parseNumber(line, line.words[1], "gue-port", 65535);
    if (!port)
      return port.takeError();
    if (*port == 0)
      return line.error("gue-port: 0 is not a port");
    settings.guePort = *port;
    return Error::success();
  }
  return line.error("unknown directive '{0}' (expected source, gateway, ttl, gue-port, vip "
                    "or real)",
                    directive);
}

} // namespace

Expected<LbConfig> parseLbConfig(const std::string &path) {
  auto lines = readConfig(path);
  if (!lines)
    return lines.takeError();
  LbConfig config;
  Seen seen;
  std::map<std::tuple<uint32_t, uint16_t, uint8_t>, unsigned> vipLines;
  // The reals table is keyed by address, so one address has one
  // encapsulation: address -> (gue, line first seen).
  std::map<uint32_t, std::pair<bool, unsigned>> encapsulations;
  for (const ConfigLine &line : *lines) {
    const std::string &directive = line.words[0];
    if (directive == "vip") {
      auto vip = parseVip(line);
      if (!vip)
        return vip.takeError();
      auto [it, added] =
          vipLines.emplace(std::make_tuple(vip->address, vip->port, vip->protocol), line.number);
      if (!added)
        return line.error("vip {0} already defined on line {1}",
                          describeVip(vip->address, vip->port, vip->protocol), it->second);
      config.vips.push_back(std::move(*vip));
    } else if (directive == "real") {
      if (config.vips.empty())
        return line.error("real before any vip: reals belong to the vip line above them");
      auto real = parseReal(line);
      if (!real)
        return real.takeError();
      VipSpec &vip = config.vips.back();
      for (const RealSpec &other : vip.reals)
        if (other.address == real->address)
          return line.error("real {0} already listed for this vip on line {1}",
                            formatIpv4(real->address), other.line.number);
      auto [first, added] =
          encapsulations.emplace(real->address, std::make_pair(real->gue, line.number));
      if (!added && first->second.first != real->gue)
        return line.error("real {0} is {1} here but {2} on line {3}; one address has one "
                          "encapsulation",
                          formatIpv4(real->address), real->gue ? "gue" : "ip-in-ip",
                          first->second.first ? "gue" : "ip-in-ip", first->second.second);
      vip.reals.push_back(std::move(*real));
    } else if (Error err = parseSetting(line, config.settings, seen)) {
      return err;
    }
  }
  if (!seen.source)
    return makeError("{0}: no 'source' line (the outer source address)", path);
  if (!seen.gateway)
    return makeError("{0}: no 'gateway' line (the next-hop MAC for encapsulated packets)", path);
  return config;
}

} // namespace morpheus::nf::lb
