// The router's oracles: oracles/router_oracle.bpf.c compiled with a table
// generated here from the live maps (what the maps answer is what the
// oracle must answer) and the trace (which destinations are hot).
#include "Oracle.h"

#include "backend/bpf/MapIO.h"
#include "nf/router/router.h"

#include <bpf/bpf.h>

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <arpa/inet.h>
#include <cstdio>
#include <cstring>
#include <map>
#include <optional>

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

template <typename T> T as(const core::Bytes &bytes) {
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

struct Route {
  route_key key;
  route value;
};

class RouterMaps {
public:
  RouterMaps(const runtime::Optimizer &optimizer)
      : routesFd(optimizer.mapFd("routes")), neighborsFd(optimizer.mapFd("neighbors")) {}

  std::vector<Route> routes() const {
    std::vector<Route> all;
    bpf::forEachKey(routesFd, sizeof(route_key), [&](const core::Bytes &key) {
      Route entry{as<route_key>(key), {}};
      if (bpf_map_lookup_elem(routesFd, key.data(), &entry.value) == 0)
        all.push_back(entry);
      return true;
    });
    return all;
  }

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
    bpf::forEachKey(neighborsFd, sizeof(neighbor_key), [&](const core::Bytes &bytes) {
      neighbor_key key = as<neighbor_key>(bytes);
      if (key.port == r.port)
        code += "if (daddr == bpf_htonl(0x" + hex32(ntohl(key.addr)) + ")) { " +
                neighborCode(key) + " } ";
      return true;
    });
    return code + "return ORACLE_NO_NEIGHBOR;";
  }

  std::optional<route> lookup(uint32_t daddrHost) const {
    route_key key = {32, htonl(daddrHost)};
    route value;
    if (bpf_map_lookup_elem(routesFd, &key, &value))
      return std::nullopt;
    return value;
  }

private:
  std::string neighborCode(const neighbor_key &key) const {
    neighbor value;
    if (bpf_map_lookup_elem(neighborsFd, &key, &value))
      return "return ORACLE_NO_NEIGHBOR;";
    return llvm::formatv("hop->port = {0}; __builtin_memcpy(hop->dst_mac, {1}, 6); "
                         "__builtin_memcpy(hop->src_mac, {2}, 6); return ORACLE_FORWARD;",
                         key.port, macLiteral(value.dst_mac), macLiteral(value.src_mac))
        .str();
  }

  int routesFd, neighborsFd;
};

// Destinations of the trace's IPv4 packets, most packets first.
std::vector<uint32_t> hottestDestinations(const Trace &trace, size_t count) {
  std::vector<uint64_t> perFrame(trace.frames.size());
  for (uint32_t index : trace.sequence)
    ++perFrame[index];
  std::map<uint32_t, uint64_t> perDestination;
  for (size_t i = 0; i < trace.frames.size(); ++i) {
    const std::vector<uint8_t> &f = trace.frames[i];
    if (f.size() >= 34 && f[12] == 0x08 && f[13] == 0x00)
      perDestination[uint32_t(f[30]) << 24 | f[31] << 16 | f[32] << 8 | f[33]] += perFrame[i];
  }
  std::vector<std::pair<uint64_t, uint32_t>> ranked;
  for (auto [daddr, packets] : perDestination)
    ranked.emplace_back(packets, daddr);
  std::sort(ranked.rbegin(), ranked.rend());
  std::vector<uint32_t> hottest;
  for (size_t i = 0; i < ranked.size() && i < count; ++i)
    hottest.push_back(ranked[i].second);
  return hottest;
}

std::string hotPathTable(const RouterMaps &maps, const std::vector<uint32_t> &hottest) {
  std::string body;
  for (uint32_t daddr : hottest) {
    std::optional<route> r = maps.lookup(daddr);
    body += "\tif (daddr == bpf_htonl(0x" + hex32(daddr) + ")) { " +
            (r ? maps.outcomeCode(*r, daddr, true) : "return ORACLE_NO_ROUTE;") + " }\n";
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

Expected<OracleProgram> buildRouterOracle(const std::string &name, const std::string &table,
                                          const runtime::Optimizer &optimizer) {
  llvm::SmallString<128> dir;
  if (std::error_code ec = llvm::sys::fs::createUniqueDirectory("morpheus-oracle", dir))
    return makeSystemError(ec.value(), "oracle {0}: cannot create a build directory", name);
  std::string header = std::string(dir) + "/table.h";
  std::string object = std::string(dir) + "/oracle.o";
  {
    std::error_code ec;
    llvm::raw_fd_ostream out(header, ec);
    if (ec)
      return makeSystemError(ec.value(), "oracle {0}: writing {1}", name, header);
    out << "/* Generated by tools/bench/Oracle.cpp for one benchmark run. */\n"
        << "static __always_inline int oracle_resolve(__be32 daddr, struct oracle_hop *hop)\n"
        << "{\n"
        << table << "}\n";
  }
  std::string source = MORPHEUS_SOURCE_DIR "/tools/bench/oracles/router_oracle.bpf.c";
  std::vector<std::string> args = {MORPHEUS_CLANG, "-O2", "-g", "-target", "bpf",
                                   "-I/usr/include/x86_64-linux-gnu",
                                   "-I" MORPHEUS_SOURCE_DIR "/nf/router",
                                   "-DORACLE_TABLE=\"" + header + "\"", "-c", source, "-o",
                                   object};
  std::vector<llvm::StringRef> refs(args.begin(), args.end());
  std::string message;
  int status = llvm::sys::ExecuteAndWait(args[0], refs, std::nullopt, {}, 0, 0, &message);
  auto elf = llvm::MemoryBuffer::getFile(object);
  llvm::sys::fs::remove_directories(dir);
  if (status != 0 || !elf)
    return makeError("oracle {0}: compiling {1} failed ({2})", name, source,
                     message.empty() ? "exit " + std::to_string(status) : message);
  bpf::LoadOptions shared;
  for (const char *map : {"routes", "neighbors", "ports", "stats"})
    shared.maps[map] = optimizer.mapFd(map);
  auto loaded = bpf::LoadedObject::load(
      llvm::ArrayRef<char>((*elf)->getBufferStart(), (*elf)->getBufferSize()), "router_oracle",
      shared);
  if (!loaded)
    return withContext(loaded.takeError(), "oracle " + name);
  return OracleProgram{name, std::move(*loaded), "router_oracle"};
}

} // namespace

Expected<std::vector<OracleProgram>> loadOracles(const Preset &preset,
                                                 const runtime::Optimizer &optimizer,
                                                 const Trace &trace) {
  std::vector<OracleProgram> oracles;
  if (preset.oracle.empty())
    return oracles;
  if (preset.oracle != "router")
    return makeError("{0}: no oracle of kind '{1}' (known: router)", preset.file, preset.oracle);
  RouterMaps maps(optimizer);
  auto hot = buildRouterOracle(
      "oracle-hot" + std::to_string(HotDestinations),
      hotPathTable(maps, hottestDestinations(trace, HotDestinations)), optimizer);
  if (!hot)
    return hot.takeError();
  oracles.push_back(std::move(*hot));
  std::vector<Route> routes = maps.routes();
  if (routes.size() <= CompleteOracleRoutes) {
    auto complete = buildRouterOracle("oracle-full", completeTable(maps, routes), optimizer);
    if (!complete)
      return complete.takeError();
    oracles.push_back(std::move(*complete));
  }
  return oracles;
}

} // namespace morpheus::bench
