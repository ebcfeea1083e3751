#include "LbLoader.h"

#include "Maglev.h"
#include "client/Transaction.h"

#include <arpa/inet.h>
#include <time.h>

#include <chrono>
#include <cstring>
#include <map>
#include <set>
#include <tuple>

extern "C" {
#include "lb.h"
}

namespace morpheus::nf::lb {

static_assert(sizeof(lb_vip_key) == 8 && sizeof(lb_vip) == 8 && sizeof(lb_real) == 8);
static_assert(sizeof(lb_flow_key) == 16 && sizeof(lb_flow) == 16);
static_assert(sizeof(lb_config) == 20 && offsetof(lb_config, gue_port) == 16);
static_assert(sizeof(lb_vip_counters) == 16);

namespace {

template <typename T> bool sameBytes(const T &a, const T &b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

using VipId = std::tuple<uint32_t, uint16_t, uint8_t>; // host order

lb_vip_key vipKey(const VipId &id) {
  lb_vip_key key = {};
  key.addr = htonl(std::get<0>(id));
  key.port = htons(std::get<1>(id));
  key.proto = std::get<2>(id);
  return key;
}

VipId vipId(const lb_vip_key &key) { return {ntohl(key.addr), ntohs(key.port), key.proto}; }

Expected<std::map<VipId, lb_vip>> readVips(const client::Map &map) {
  auto entries = map.entriesAs<lb_vip_key, lb_vip>();
  if (!entries)
    return entries.takeError();
  std::map<VipId, lb_vip> vips;
  for (const auto &[key, value] : *entries)
    vips[vipId(key)] = value;
  return vips;
}

// What the maps must end up holding, with indexes assigned.
struct Target {
  std::map<uint32_t, uint32_t> realIndex; // address -> index
  std::map<VipId, uint32_t> vipIndex;
  std::set<uint32_t> freedReals; // to deactivate: no longer configured, not reused
};

// Reals keep their index; new ones take a never-used slot first, and only
// then one freed by this load (whose old flows would otherwise follow the
// index to an unrelated server).
Error assignReals(const LbConfig &config, const std::vector<lb_real> &current, Target &target) {
  std::map<uint32_t, uint32_t> present;
  for (uint32_t index = 1; index < current.size(); ++index)
    if (current[index].flags & LB_REAL_ACTIVE)
      present[ntohl(current[index].addr)] = index;
  std::set<uint32_t> wanted;
  for (const VipSpec &vip : config.vips)
    for (const RealSpec &real : vip.reals)
      wanted.insert(real.address);
  for (auto [address, index] : present)
    if (!wanted.count(address))
      target.freedReals.insert(index);

  uint32_t nextFree = 1;
  for (const VipSpec &vip : config.vips)
    for (const RealSpec &real : vip.reals) {
      if (target.realIndex.count(real.address))
        continue;
      if (auto it = present.find(real.address); it != present.end()) {
        target.realIndex[real.address] = it->second;
        continue;
      }
      while (nextFree < current.size() && current[nextFree].flags & LB_REAL_ACTIVE)
        ++nextFree;
      uint32_t index;
      if (nextFree < current.size()) {
        index = nextFree++;
      } else if (!target.freedReals.empty()) {
        index = *target.freedReals.begin();
        target.freedReals.erase(target.freedReals.begin());
      } else {
        return real.line.error("no room for real {0}: the reals table holds {1}",
                               formatIpv4(real.address), current.size() - 1);
      }
      target.realIndex[real.address] = index;
    }
  return Error::success();
}

// VIPs keep their index; new ones take the lowest index no kept VIP uses
// (a removed VIP's entry is deleted before its ring is rewritten).
Error assignVips(const LbConfig &config, const std::map<VipId, lb_vip> &current, uint32_t maxVips,
                 Target &target) {
  std::set<uint32_t> used;
  for (const VipSpec &vip : config.vips) {
    VipId id{vip.address, vip.port, vip.protocol};
    if (auto it = current.find(id); it != current.end() && it->second.index < maxVips) {
      target.vipIndex[id] = it->second.index;
      used.insert(it->second.index);
    }
  }
  uint32_t next = 0;
  for (const VipSpec &vip : config.vips) {
    VipId id{vip.address, vip.port, vip.protocol};
    if (target.vipIndex.count(id))
      continue;
    while (used.count(next))
      ++next;
    if (next >= maxVips)
      return vip.line.error("no room for vip {0}: the vips table holds {1}",
                            describeVip(vip.address, vip.port, vip.protocol), maxVips);
    target.vipIndex[id] = next;
    used.insert(next);
  }
  return Error::success();
}

lb_config configValue(const LbSettings &settings) {
  lb_config value = {};
  value.source = htonl(settings.source);
  value.source_mask = htonl(settings.sourceMask);
  std::memcpy(value.gateway_mac, settings.gateway.data(), sizeof(value.gateway_mac));
  value.ttl = settings.ttl;
  value.gue_port = htons(settings.guePort ? settings.guePort : LB_GUE_DEFAULT_PORT);
  return value;
}

} // namespace

Expected<LoadReport> applyConfig(const LbConfig &config, const std::string &pinDir) {
  auto maps =
      client::PinnedMaps::open(pinDir, {"config", "vips", "rings", "reals", "vip_stats"});
  if (!maps)
    return maps.takeError();
  uint32_t maxVips = (*maps)["vips"].maxEntries();
  uint32_t ringSlots = (*maps)["rings"].maxEntries();
  if (uint64_t(ringSlots) != uint64_t(maxVips) * LB_RING_SIZE)
    return makeError("map 'rings' has {0} slots, not {1} VIPs x {2}: the object was built "
                     "with another ring size than this control plane",
                     ringSlots, maxVips, LB_RING_SIZE);

  auto currentVips = readVips((*maps)["vips"]);
  if (!currentVips)
    return currentVips.takeError();
  auto currentReals =
      (*maps)["reals"].slots<lb_real>(0, (*maps)["reals"].maxEntries());
  if (!currentReals)
    return currentReals.takeError();
  auto currentConfig = (*maps)["config"].slots<lb_config>(0, 1);
  if (!currentConfig)
    return currentConfig.takeError();

  Target target;
  if (Error err = assignReals(config, *currentReals, target))
    return err;
  if (Error err = assignVips(config, *currentVips, maxVips, target))
    return err;

  // Ordered so that the data plane, reading between any two changes, never
  // follows a VIP to an unwritten ring or a ring slot to an unwritten real.
  client::Transaction transaction(*maps);
  LoadReport report;
  for (const auto &[id, value] : *currentVips)
    if (!target.vipIndex.count(id))
      transaction.remove("vips", vipKey(id));

  std::map<uint32_t, bool> gueByAddress;
  for (const VipSpec &vip : config.vips)
    for (const RealSpec &real : vip.reals)
      gueByAddress[real.address] = real.gue;
  for (const auto &[address, index] : target.realIndex) {
    lb_real value = {htonl(address), LB_REAL_ACTIVE | (gueByAddress[address] ? LB_REAL_GUE : 0)};
    if (!sameBytes(value, (*currentReals)[index]))
      transaction.update("reals", index, value);
  }

  for (const VipSpec &vip : config.vips) {
    VipId id{vip.address, vip.port, vip.protocol};
    uint32_t index = target.vipIndex.at(id);
    auto existing = currentVips->find(id);
    if (existing == currentVips->end() || existing->second.index != index)
      transaction.update("vip_stats", index, lb_vip_counters{});

    std::vector<MaglevBackend> backends;
    for (const RealSpec &real : vip.reals)
      backends.push_back({target.realIndex.at(real.address), real.address, real.weight});
    std::vector<uint32_t> ring = buildMaglevTable(std::move(backends), LB_RING_SIZE);
    auto current = (*maps)["rings"].slots<uint32_t>(index * LB_RING_SIZE, LB_RING_SIZE);
    if (!current)
      return current.takeError();
    for (uint32_t slot = 0; slot < LB_RING_SIZE; ++slot)
      if (ring[slot] != (*current)[slot]) {
        transaction.update("rings", index * LB_RING_SIZE + slot, ring[slot]);
        ++report.ringSlots;
      }
  }

  lb_config settings = configValue(config.settings);
  if (!sameBytes(settings, currentConfig->front()))
    transaction.update("config", uint32_t(0), settings);

  for (const VipSpec &vip : config.vips) {
    VipId id{vip.address, vip.port, vip.protocol};
    lb_vip value = {vip.quic ? LB_VIP_QUIC : 0u, target.vipIndex.at(id)};
    auto existing = currentVips->find(id);
    if (existing == currentVips->end() || !sameBytes(existing->second, value))
      transaction.update("vips", vipKey(id), value);
  }

  for (uint32_t index : target.freedReals)
    transaction.update("reals", index, lb_real{});

  auto start = std::chrono::steady_clock::now();
  if (Error err = transaction.commit())
    return err;
  report.commitSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  report.vips = config.vips.size();
  report.reals = target.realIndex.size();
  report.changes = transaction.size();
  return report;
}

Expected<LoadReport> loadConfigFile(const std::string &path, const std::string &pinDir) {
  auto config = parseLbConfig(path);
  if (!config)
    return config.takeError();
  return applyConfig(*config, pinDir);
}

Expected<std::vector<VipStatus>> readVipStatus(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"vips", "vip_stats"});
  if (!maps)
    return maps.takeError();
  auto vips = readVips((*maps)["vips"]);
  if (!vips)
    return vips.takeError();
  std::vector<VipStatus> status;
  for (const auto &[id, value] : *vips) {
    VipStatus entry;
    entry.vip = describeVip(std::get<0>(id), std::get<1>(id), std::get<2>(id));
    entry.index = value.index;
    entry.quic = value.flags & LB_VIP_QUIC;
    auto perCpu = (*maps)["vip_stats"].eachCpu<lb_vip_counters>(value.index);
    if (!perCpu)
      return perCpu.takeError();
    for (const lb_vip_counters &counters : *perCpu) {
      entry.packets += counters.packets;
      entry.bytes += counters.bytes;
    }
    status.push_back(entry);
  }
  std::sort(status.begin(), status.end(),
            [](const VipStatus &a, const VipStatus &b) { return a.index < b.index; });
  return status;
}

Expected<std::vector<uint64_t>> readEvents(const std::string &pinDir) {
  auto maps = client::PinnedMaps::open(pinDir, {"events"});
  if (!maps)
    return maps.takeError();
  std::vector<uint64_t> sums(LB_EV_MAX);
  for (uint32_t event = 0; event < LB_EV_MAX; ++event) {
    auto sum = (*maps)["events"].sumOverCpus(event);
    if (!sum)
      return sum.takeError();
    sums[event] = *sum;
  }
  return sums;
}

const char *eventName(unsigned event) {
  static const char *const names[LB_EV_MAX] = {
      "flow-new", "flow-hit",  "quic-cid", "quic-hashed",
      "no-real",  "malformed", "fragment", "encap-failed",
  };
  return event < LB_EV_MAX ? names[event] : "?";
}

Expected<size_t> expireFlows(const std::string &pinDir, uint64_t idleNs) {
  auto maps = client::PinnedMaps::open(pinDir, {"flows"});
  if (!maps)
    return maps.takeError();
  timespec now = {};
  clock_gettime(CLOCK_MONOTONIC_COARSE, &now);
  uint64_t nowNs = uint64_t(now.tv_sec) * 1000000000ull + now.tv_nsec;

  // Flows evicted while the table is walked are left out.
  auto flows = (*maps)["flows"].entriesAs<lb_flow_key, lb_flow>();
  if (!flows)
    return flows.takeError();
  std::set<Bytes> idle;
  for (const auto &[key, value] : *flows)
    if (value.last_seen_ns <= nowNs && nowNs - value.last_seen_ns > idleNs)
      idle.insert(bytesOf(key));
  client::Transaction transaction(*maps);
  for (const Bytes &flow : idle)
    transaction.remove("flows", flow);
  if (Error err = transaction.commit())
    return err;
  return transaction.size();
}

} // namespace morpheus::nf::lb
