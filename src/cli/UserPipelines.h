// The network functions `morpheus user-run` replays traces through (--nf):
// what differs between them — the handler and its build flags, what fills
// its tables, the hand-specialized oracle — behind one interface, so that
// loading, specializing, following the traffic, exploring, checking every
// version against the generic twin and timing are one code path for all
// of them (UserRunCommand.cpp).
#pragma once

#include "backend/user/TableSet.h"
#include "bench/Trace.h"
#include "support/Error.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace morpheus::cli {

// The table implementations a handler is built with (user-run's --lpm and
// --hash), for the pipeline's LPM and exact-match tables.
struct TableKinds {
  std::string lpm = "dir24"; // one of lpmKinds()
  std::string hash = "own";  // one of hashKinds()
};
// dir24 (MU_LPM_DIR24), linear (MU_LPM_LINEAR), rte (MU_LPM_RTE, DPDK's
// rte_lpm).
const std::vector<std::string> &lpmKinds();
// own (MU_HASH), rte (MU_HASH_RTE, DPDK's rte_hash).
const std::vector<std::string> &hashKinds();
// The LPM kinds this build makes (rte only with DPDK): the exploration's.
std::vector<std::string> builtLpmKinds();

// A hand-specialized version of a handler, as C.
struct OracleSource {
  std::string source;
  std::string description; // what was written in ("the routes as 20 compares, ...")
};

class UserPipeline {
public:
  virtual ~UserPipeline() = default;

  // The handler's C file in the source tree, and its MU_HANDLER function.
  virtual std::string defaultHandler() const = 0;
  virtual std::string entry() const = 0;
  // The -D flags that build the handler with `kinds` for this
  // configuration's tables (a pipeline without exact-match tables the
  // control plane fills ignores `kinds.hash`).
  virtual std::vector<std::string> cflags(const TableKinds &kinds) const = 0;
  // Fills a freshly loaded handler's tables from the configuration, in one
  // guarded change; an error names the file at fault.
  virtual Error configure(user::TableSet &tables) const = 0;
  // What was configured, for the report's first line.
  virtual std::string summary(const user::TableSet &tables) const = 0;
  // The LPM tables, which --generator's custom generator serves.
  virtual std::vector<std::string> lpmTables() const = 0;
  // The oracle: the handler at `handlerPath` with the lookups of its
  // configuration replaced by compares and constants written for it, the
  // hottest keys of `trace` first with what `twin` (a configured generic
  // instance) answers them where the configuration decides their answer
  // (not where the data plane's own state does: the NAT's bindings).
  virtual Expected<OracleSource> oracle(const std::string &handlerPath, user::TableSet &twin,
                                        const bench::Trace &trace) const = 0;
};

// nf/router/user/router_user.c, from the router's routes and neighbours
// files; ports 0..ports-1 bound.
Expected<std::unique_ptr<UserPipeline>> routerPipeline(const std::string &routes,
                                                       const std::string &neighbors,
                                                       uint32_t ports);

// nf/firewall/user/firewall_user.c, from a rule file of the firewall's
// (ClassBench lines, nf/firewall/Rules.h); `acceptByDefault` when no rule
// matches.
Expected<std::unique_ptr<UserPipeline>> firewallPipeline(const std::string &rules,
                                                         bool acceptByDefault);

// nf/nat/user/nat_user.c, from the NAT's configuration file
// (nf/nat/README.md), its port names the user data plane's ports
// (nf/nat/UserNat.h: userPorts).
Expected<std::unique_ptr<UserPipeline>> natPipeline(const std::string &config);

} // namespace morpheus::cli
