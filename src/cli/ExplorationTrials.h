// What one trial of `user-run --explore` runs, from its configuration of
// the exploration's dimensions: which handler (the --lpm kind or another),
// which burst and sub-batch, and whether the Morpheus-specialized
// version runs, with which table passes and which specialization points.
// Kept apart from the loop that measures trials so that what a
// configuration means can be checked without measuring anything.
#pragma once

#include "backend/user/Exploration.h"
#include "core/SpecializationPoints.h"

#include <cstdint>
#include <set>
#include <string>
#include <vector>

namespace morpheus::cli {

// The exploration's own dimensions (the handler's points come beside them).
namespace dimension {
inline const std::string Specialized = "specialized", Burst = "burst",
                         LpmAsCode = "lpm_as_code", LpmAsArray = "lpm_as_array",
                         Prefetch = "prefetch", Generator = "nested_if_lpm",
                         Lpm = "lpm"; // the handler built with another LPM kind
// The LPM template dimension: the kinds of `kinds` (user-run's --lpm
// names) other than `lpm`, each value an index into `kinds`, named by it.
user::Dimension lpmDimension(const std::vector<std::string> &kinds, const std::string &lpm);
} // namespace dimension

struct TrialPlan {
  uint32_t burst = 0;
  uint32_t subBatch = 0; // entries prefetched a sub-batch ahead; 0: none
  std::string lpm; // the LPM kind of the handler the trial runs
  // The specialized version runs (else the generic one). Any pass or point
  // switched on specializes by itself, with the other table passes, as
  // `specialized` does: a greedy step from the generic baseline that turns
  // on only the routes as code must measure them, not the generic handler
  // (the firewall's prefixes pay only as code; its `specialized` alone
  // measures like the generic handler).
  bool specialize = false;
  std::vector<std::string> passesLeftOut; // when specialized
  core::PointConfiguration points;        // the handler's points switched on
};

// `configuration` holds the dimensions switched on (Burst always); `lpm`
// is --lpm's kind and `kinds` the LPM dimension's (lpmDimension);
// `pointNames` are the handler's points; `alwaysLeftOut` the passes the user
// left out (--no-pass).
TrialPlan planTrial(const core::PointConfiguration &configuration, const std::string &lpm,
                    const std::vector<std::string> &kinds,
                    const std::set<std::string> &pointNames,
                    const std::vector<std::string> &alwaysLeftOut);

} // namespace morpheus::cli
