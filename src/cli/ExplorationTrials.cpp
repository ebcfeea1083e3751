#include "cli/ExplorationTrials.h"

namespace morpheus::cli {

std::string dimension::otherLpm(const std::string &lpm) {
  return lpm == "linear" ? "lpm_dir24" : "lpm_linear";
}

TrialPlan planTrial(const core::PointConfiguration &configuration, const std::string &lpm,
                    const std::set<std::string> &pointNames,
                    const std::vector<std::string> &alwaysLeftOut) {
  using namespace dimension;
  TrialPlan plan;
  plan.burst = uint32_t(configuration.at(Burst));
  if (auto prefetch = configuration.find(Prefetch); prefetch != configuration.end())
    plan.subBatch = uint32_t(prefetch->second);
  plan.otherLpm = configuration.count(otherLpm(lpm)) > 0;
  bool passOrPoint = false;
  for (const auto &[name, value] : configuration) {
    if (pointNames.count(name))
      plan.points[name] = value;
    passOrPoint |= name == LpmAsCode || name == LpmAsArray || name == Generator ||
                   pointNames.count(name);
  }
  plan.specialize = configuration.count(Specialized) || passOrPoint;
  if (!plan.specialize)
    return plan;
  plan.passesLeftOut = alwaysLeftOut;
  if (!configuration.count(LpmAsCode))
    plan.passesLeftOut.push_back("lpm-as-code");
  if (!configuration.count(LpmAsArray)) {
    // The derived tables: the 16-8-8 array and, for one prefix length, the hash.
    plan.passesLeftOut.push_back("lpm-as-array");
    plan.passesLeftOut.push_back("lpm-as-hash");
  }
  if (!configuration.count(Generator))
    plan.passesLeftOut.push_back("custom-generator");
  return plan;
}

} // namespace morpheus::cli
