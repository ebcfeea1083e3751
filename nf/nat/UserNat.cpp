#include "nf/nat/UserNat.h"

#include <arpa/inet.h>

#include <cctype>
#include <cstring>
#include <map>
#include <memory>
#include <set>

namespace morpheus::nf::nat {

namespace {

template <typename T> T valueAt(const void *bytes) {
  T value;
  std::memcpy(&value, bytes, sizeof value);
  return value;
}

} // namespace

PortResolver userPorts() {
  auto names = std::make_shared<std::map<std::string, uint32_t>>();
  auto port = [names](const ConfigLine &line, const std::string &value,
                      const char *what) -> Expected<uint32_t> {
    if (std::isdigit(static_cast<unsigned char>(value[0]))) {
      auto number = parseNumber(line, value, what, UINT32_MAX);
      if (!number)
        return number.takeError();
      return uint32_t(*number);
    }
    return names->emplace(value, uint32_t(names->size())).first->second;
  };
  auto mac = [](const ConfigLine &, uint32_t port, const char *) -> Expected<Mac> {
    return userPortMac(port);
  };
  return {port, mac};
}

Mac userPortMac(uint32_t port) {
  // Locally administered, unicast, the port in the low bytes.
  return {0x02, 0x00, 0x5e, uint8_t(port >> 16), uint8_t(port >> 8), uint8_t(port)};
}

Error loadUserNat(TableWrites &tables, const NatSettings &settings) {
  return tables.change([&]() -> Error {
    if (Error err = tables.set("nat_config", bytesOf(uint32_t(0)), bytesOf(configValue(settings))))
      return err;

    std::set<Bytes> prefixes;
    for (const Ipv4Prefix &prefix : settings.inside)
      prefixes.insert(bytesOf(nat_prefix_key{prefix.length, htonl(prefix.address)}));
    if (Error err = tables.removeWhere(
            "nat_inside", [&](const Bytes &key, const void *) { return !prefixes.count(key); }))
      return err;
    for (const Bytes &key : prefixes)
      if (Error err = tables.set("nat_inside", key, bytesOf(uint32_t(1))))
        return err;

    if (Error err = tables.removeWhere("nat_out", [&](const Bytes &key, const void *value) {
          auto binding = valueAt<nat_binding>(value);
          return !allowsTranslation(settings, valueAt<nat_flow_key>(key.data()).addr,
                                    binding.external_addr, binding.external_port);
        }))
      return err;
    return tables.removeWhere("nat_in", [&](const Bytes &key, const void *value) {
      auto flow = valueAt<nat_flow_key>(key.data());
      return !allowsTranslation(settings, valueAt<nat_origin>(value).inside_addr, flow.addr,
                                flow.port);
    });
  });
}

} // namespace morpheus::nf::nat
