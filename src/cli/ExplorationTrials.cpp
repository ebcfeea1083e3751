#include "cli/ExplorationTrials.h"

namespace morpheus::cli {

user::Dimension dimension::lpmDimension(const std::vector<std::string> &kinds,
                                        const std::string &lpm) {
  user::Dimension dimension{Lpm, {}, true};
  for (size_t i = 0; i < kinds.size(); ++i)
    if (kinds[i] != lpm) {
      dimension.values.push_back(int64_t(i));
      dimension.valueNames.push_back(kinds[i]);
    }
  return dimension;
}

TrialPlan planTrial(const core::PointConfiguration &configuration, const std::string &lpm,
                    const std::vector<std::string> &kinds,
                    const std::set<std::string> &pointNames,
                    const std::vector<std::string> &alwaysLeftOut) {
  using namespace dimension;
  TrialPlan plan;
  plan.burst = uint32_t(configuration.at(Burst));
  if (auto prefetch = configuration.find(Prefetch); prefetch != configuration.end())
    plan.subBatch = uint32_t(prefetch->second);
  auto kind = configuration.find(Lpm);
  plan.lpm = kind == configuration.end() ? lpm : kinds.at(size_t(kind->second));
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
    // The derived tables: the 16-8-8 array and the hashes, one per prefix length.
    plan.passesLeftOut.push_back("lpm-as-array");
    plan.passesLeftOut.push_back("lpm-as-hash");
  }
  if (!configuration.count(Generator))
    plan.passesLeftOut.push_back("custom-generator");
  return plan;
}

} // namespace morpheus::cli
