// The router's control plane: loading routes, neighbours and ports into the
// maps of a running router (pinned by `morpheus run` or a test), each file
// validated whole and applied in one client::Transaction, or not at all.
#pragma once

#include "client/Transaction.h"
#include "nf/common/ConfigFile.h"
#include "support/Error.h"

#include <array>
#include <cstdint>
#include <string>
#include <vector>

extern "C" {
#include "router.h"
}

namespace morpheus::nf::router {

static_assert(sizeof(route_key) == 8 && sizeof(route) == 12);
static_assert(sizeof(neighbor_key) == 8 && sizeof(neighbor) == 12);

inline constexpr const char *DefaultPinDir = "/sys/fs/bpf/morpheus/router";

route_key routeKey(const Ipv4Prefix &prefix);

struct LoadOptions {
  std::string pinDir = DefaultPinDir;
  // Remove the entries the file does not list; otherwise the file's entries
  // are added to (or overwrite) what the map holds.
  bool replace = false;
};

struct LoadSummary {
  size_t written = 0;
  size_t removed = 0;
};

// One entry of the routes or the neighbours table, as a file line gives it.
struct RouteEntry {
  route_key key;
  route value;
};
struct NeighborEntry {
  neighbor_key key;
  neighbor value;
};

// The files below, parsed and validated whole (errors name FILE:LINE);
// routes without a PORT get hashedPort(prefix, ports). Also what the
// user-space router (`morpheus user-run router`) is configured from.
Expected<std::vector<RouteEntry>> parseRoutes(const std::string &path,
                                              const std::vector<uint32_t> &ports);
Expected<std::vector<NeighborEntry>> parseNeighbors(const std::string &path);

// Routes file: `PREFIX NEXTHOP [PORT]` per line, NEXTHOP an IPv4 gateway,
// `direct` (on-link: the destination is the neighbour) or `local` (an
// address of the router; no PORT). Without PORT a route gets
// hashedPort(prefix, the ports configured now).
Expected<LoadSummary> loadRoutes(const std::string &path, const LoadOptions &options);

// Neighbours file: `ADDRESS DST-MAC SRC-MAC PORT` per line.
Expected<LoadSummary> loadNeighbors(const std::string &path, const LoadOptions &options);

// Binds port `port` to the interface `ifindex` (of the caller's network
// namespace), or unbinds it.
Error setPort(const std::string &pinDir, uint32_t port, uint32_t ifindex);
Error unsetPort(const std::string &pinDir, uint32_t port);

// The ports that have an interface, ascending.
Expected<std::vector<uint32_t>> configuredPorts(const std::string &pinDir);

// ports[FNV-1a(address bytes in network order, prefix length) % ports.size()]:
// deterministic, and spreads routes to one gateway evenly over the ports.
uint32_t hashedPort(const Ipv4Prefix &prefix, const std::vector<uint32_t> &ports);

// Every outcome's counter, summed over the CPUs.
inline constexpr std::array<const char *, STAT_MAX> StatNames = {
    "forwarded",    "local",      "no-route", "no-neighbor", "no-port",
    "ttl-exceeded", "ip-options", "not-ipv4", "malformed"};
Expected<std::array<uint64_t, STAT_MAX>> readStats(const std::string &pinDir);

} // namespace morpheus::nf::router
