#include "backend/user/BatchModel.h"

#include <cmath>
#include <set>

namespace morpheus::user {

Expected<BatchModel> BatchModel::fit(const std::vector<BatchSample> &samples) {
  std::set<uint32_t> bursts;
  for (const BatchSample &sample : samples)
    if (sample.burst)
      bursts.insert(sample.burst);
  if (bursts.size() < 3)
    return makeError("the batch model needs measurements at three burst sizes or more, got {0}",
                     bursts.size());
  // Normal equations of t = a + c/B + e*B: X^T X w = X^T t, rows (1, 1/B, B).
  double m[3][4] = {};
  for (const BatchSample &sample : samples) {
    if (!sample.burst)
      continue;
    double row[3] = {1, 1.0 / sample.burst, double(sample.burst)};
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 3; ++j)
        m[i][j] += row[i] * row[j];
      m[i][3] += row[i] * sample.nsPerPacket;
    }
  }
  // Gaussian elimination with partial pivoting.
  for (int column = 0; column < 3; ++column) {
    int pivot = column;
    for (int row = column + 1; row < 3; ++row)
      if (std::fabs(m[row][column]) > std::fabs(m[pivot][column]))
        pivot = row;
    if (std::fabs(m[pivot][column]) < 1e-12)
      return makeError("the batch model's measurements do not determine it");
    for (int j = 0; j < 4; ++j)
      std::swap(m[column][j], m[pivot][j]);
    for (int row = 0; row < 3; ++row) {
      if (row == column)
        continue;
      double factor = m[row][column] / m[column][column];
      for (int j = column; j < 4; ++j)
        m[row][j] -= factor * m[column][j];
    }
  }
  return BatchModel{m[0][3] / m[0][0], m[1][3] / m[1][1], m[2][3] / m[2][2]};
}

double BatchModel::predictNs(uint32_t burst) const {
  return perPacketNs + perBurstNs / burst + perPacketPerBurstNs * burst;
}

uint32_t BatchModel::pick(const std::vector<uint32_t> &candidates) const {
  uint32_t best = 0;
  for (uint32_t burst : candidates)
    if (burst && (!best || predictNs(burst) < predictNs(best)))
      best = burst;
  return best;
}

} // namespace morpheus::user
