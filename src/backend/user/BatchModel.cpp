#include "backend/user/BatchModel.h"

#include <array>
#include <cassert>
#include <cmath>
#include <set>

namespace morpheus::user {

namespace {

// The model's terms in the order of its costs: the functions of (B, b)
// each cost multiplies (the design matrix's columns).
constexpr std::array<const char *, 7> TermNames = {
    "per packet",    "per burst",    "per packet per burst", "prefetch per packet",
    "per sub-batch", "first sub-batch stall", "prefetch footprint"};

std::array<double, 7> terms(BatchPoint point) {
  double burst = point.burst;
  if (!point.subBatch)
    return {1, 1 / burst, burst, 0, 0, 0, 0};
  double sub = point.effectiveSubBatch();
  return {1, 1 / burst, burst, 1, 1 / sub, 1 / burst, sub};
}

// The least-squares solution of rows * w = values over the first `count`
// columns: modified Gram-Schmidt on columns scaled to unit length (the
// terms range from 1/256 to 256), then back substitution. An error names
// the first column the others (and before it) leave undetermined.
Expected<std::vector<double>> leastSquares(const std::vector<std::array<double, 7>> &rows,
                                           std::vector<double> values, size_t count) {
  size_t n = rows.size();
  std::vector<std::vector<double>> columns(count, std::vector<double>(n));
  std::vector<double> scale(count);
  for (size_t j = 0; j < count; ++j) {
    double norm = 0;
    for (size_t i = 0; i < n; ++i)
      norm += rows[i][j] * rows[i][j];
    scale[j] = std::sqrt(norm);
    if (scale[j] == 0)
      return makeError("the batch model's measurements do not determine its {0} term",
                       TermNames[j]);
    for (size_t i = 0; i < n; ++i)
      columns[j][i] = rows[i][j] / scale[j];
  }
  std::vector<std::vector<double>> r(count, std::vector<double>(count));
  std::vector<double> z(count);
  auto dot = [n](const std::vector<double> &x, const std::vector<double> &y) {
    double sum = 0;
    for (size_t i = 0; i < n; ++i)
      sum += x[i] * y[i];
    return sum;
  };
  for (size_t k = 0; k < count; ++k) {
    r[k][k] = std::sqrt(dot(columns[k], columns[k]));
    // What is left of a unit column once the ones before it are taken out:
    // near nothing means it is (nearly) a combination of them.
    if (r[k][k] < 1e-6)
      return makeError("the batch model's measurements do not determine its {0} term",
                       TermNames[k]);
    for (double &x : columns[k])
      x /= r[k][k];
    for (size_t j = k + 1; j < count; ++j) {
      r[k][j] = dot(columns[k], columns[j]);
      for (size_t i = 0; i < n; ++i)
        columns[j][i] -= r[k][j] * columns[k][i];
    }
    z[k] = dot(columns[k], values);
    for (size_t i = 0; i < n; ++i)
      values[i] -= z[k] * columns[k][i];
  }
  std::vector<double> w(count);
  for (size_t k = count; k-- > 0;) {
    double sum = z[k];
    for (size_t j = k + 1; j < count; ++j)
      sum -= r[k][j] * w[j];
    w[k] = sum / r[k][k];
  }
  for (size_t j = 0; j < count; ++j)
    w[j] /= scale[j];
  return w;
}

} // namespace

Expected<BatchModel> BatchModel::fit(const std::vector<BatchSample> &samples) {
  std::set<uint32_t> bursts;
  std::set<std::pair<uint32_t, uint32_t>> subBatched; // distinct (B, b')
  for (const BatchSample &sample : samples) {
    if (!sample.point.burst)
      return makeError("the batch model got a measurement at a burst of 0 packets");
    if (!std::isfinite(sample.nsPerPacket) || sample.nsPerPacket <= 0)
      return makeError("the batch model got {0} ns/packet at B={1}: not a time",
                       sample.nsPerPacket, sample.point.burst);
    if (sample.point.subBatch)
      subBatched.insert({sample.point.burst, sample.point.effectiveSubBatch()});
    else
      bursts.insert(sample.point.burst);
  }
  if (bursts.size() < 3)
    return makeError("the batch model needs measurements at three burst sizes or more without "
                     "prefetching, got {0}",
                     bursts.size());
  if (!subBatched.empty() && subBatched.size() < 4)
    return makeError("the batch model's sub-batch terms need measurements at four (B, b) "
                     "points or more with prefetching, got {0}",
                     subBatched.size());
  std::vector<std::array<double, 7>> rows;
  std::vector<double> values;
  for (const BatchSample &sample : samples) {
    rows.push_back(terms(sample.point));
    values.push_back(sample.nsPerPacket);
  }
  auto w = leastSquares(rows, values, subBatched.empty() ? 3 : 7);
  if (!w)
    return w.takeError();
  BatchModel model;
  model.perPacketNs = (*w)[0];
  model.perBurstNs = (*w)[1];
  model.perPacketPerBurstNs = (*w)[2];
  if (!subBatched.empty())
    model.subBatching = SubBatchTerms{(*w)[3], (*w)[4], (*w)[5], (*w)[6]};
  for (const BatchSample &sample : samples)
    model.residuals.push_back({sample.point, sample.nsPerPacket, model.predictNs(sample.point)});
  return model;
}

double BatchModel::predictNs(BatchPoint point) const {
  assert(point.burst && (!point.subBatch || subBatching) && "a point the model cannot predict");
  std::array<double, 7> term = terms(point);
  double ns = perPacketNs * term[0] + perBurstNs * term[1] + perPacketPerBurstNs * term[2];
  if (point.subBatch)
    ns += subBatching->prefetchPerPacketNs * term[3] + subBatching->perSubBatchNs * term[4] +
          subBatching->firstSubBatchStallNs * term[5] + subBatching->footprintPerPacketNs * term[6];
  return ns;
}

BatchPoint BatchModel::pick(const std::vector<BatchPoint> &candidates) const {
  BatchPoint best;
  for (BatchPoint point : candidates)
    if (point.burst && (!best.burst || predictNs(point) < predictNs(best)))
      best = point;
  return best;
}

double BatchModel::rmsResidualNs() const {
  if (residuals.empty())
    return 0;
  double sum = 0;
  for (const BatchResidual &residual : residuals) {
    double error = residual.measuredNs - residual.predictedNs;
    sum += error * error;
  }
  return std::sqrt(sum / residuals.size());
}

std::vector<BatchPoint> batchGrid(const std::vector<uint32_t> &bursts,
                                  const std::vector<uint32_t> &subBatches) {
  std::vector<BatchPoint> points;
  for (uint32_t burst : bursts) {
    points.push_back({burst, 0});
    for (uint32_t subBatch : subBatches)
      if (subBatch < burst)
        points.push_back({burst, subBatch});
    if (!subBatches.empty())
      points.push_back({burst, burst});
  }
  return points;
}

} // namespace morpheus::user
