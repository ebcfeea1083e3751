// The sample program examples/policy_fwd.bpf.c under Morpheus, configured
// through Morpheus's map API, for the kernel tests.
#pragma once

#include "KernelSupport.h"
#include "backend/bpf/MapUpdater.h"
#include "runtime/Optimizer.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

extern "C" {
#include "policy_fwd.h"
}

namespace morpheus::testing {

static_assert(sizeof(policy_key) == 8 && sizeof(policy_value) == 16 &&
              sizeof(config) == 8);

inline policy_key policyKey(uint32_t daddr, uint16_t dport, uint8_t proto) {
  policy_key key = {};
  key.daddr = htonl(daddr);
  key.dport = htons(dport);
  key.proto = proto;
  return key;
}

inline policy_value policyValue(uint32_t action, uint8_t tag = 0) {
  policy_value value = {};
  value.action = action;
  for (int i = 0; i < ETH_ALEN; ++i) {
    value.dmac[i] = 0x10 + tag + i;
    value.smac[i] = 0x20 + tag + i;
  }
  return value;
}

class PolicyFwd {
public:
  explicit PolicyFwd(std::string pinDir = "") : PolicyFwd(withPins(std::move(pinDir))) {}
  explicit PolicyFwd(runtime::OptimizerOptions options) {
    auto created =
        runtime::Optimizer::create(sourcePath("examples/policy_fwd.bpf.c"), options);
    if (!created) {
      ADD_FAILURE() << llvm::toString(created.takeError());
      return;
    }
    optimizer = std::move(*created);
  }

  bool ok() const { return optimizer != nullptr; }
  runtime::Optimizer &opt() { return *optimizer; }

  bpf::MapUpdater updater(const std::string &map) {
    auto updater =
        bpf::MapUpdater::forMap(optimizer->mapFd(map), map, &optimizer->guard());
    EXPECT_THAT_EXPECTED(updater, llvm::Succeeded());
    return std::move(*updater);
  }

  void setConfig(uint32_t flags, uint32_t defaultAction) {
    config value = {flags, defaultAction};
    uint32_t zero = 0;
    ASSERT_FALSE(bool(updater("config").update(bytesOf(zero), bytesOf(value))));
  }

  void setPolicy(const policy_key &key, const policy_value &value) {
    llvm::Error err = updater("policy").update(bytesOf(key), bytesOf(value));
    ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  }

  void removePolicy(const policy_key &key) {
    ASSERT_FALSE(bool(updater("policy").remove(bytesOf(key))));
  }

  std::vector<uint64_t> stats() { return perCpuCounters(optimizer->mapFd("stats"), STAT_MAX); }

  // Runs a cycle and expects a new specialized program to be installed.
  core::CycleReport specialize() {
    core::CycleReport report = optimizer->runCycle();
    EXPECT_TRUE(report.installed()) << report.describe();
    return report;
  }

  // Whether the specialization replaced a lookup of `table` (the map stays
  // referenced by the generic copy the guard falls back to). constant-fields
  // and branch-injection specialize around a lookup they keep.
  static bool inlined(const core::CycleReport &report, const std::string &table) {
    for (const core::SiteDecision &decision : report.log.decisions)
      if (decision.table == table && decision.applied && decision.pass != "constant-fields" &&
          decision.pass != "branch-injection")
        return true;
    return false;
  }

  bool references(int programFd, const std::string &map) {
    uint32_t id = mapIdOf(optimizer->mapFd(map));
    for (uint32_t used : mapIdsOf(programFd))
      if (used == id)
        return true;
    return false;
  }

private:
  static runtime::OptimizerOptions withPins(std::string pinDir) {
    runtime::OptimizerOptions options;
    options.pinDir = std::move(pinDir);
    return options;
  }

  std::unique_ptr<runtime::Optimizer> optimizer;
};

} // namespace morpheus::testing
