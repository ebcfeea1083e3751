// The batching and sub-batching model (backend/user/BatchModel, after the
// P4C paper's): fitted by least squares, it recovers a cost curve it is
// given exactly, and closely from samples with noise; it picks the (B, b)
// that curve makes fastest, prefetching for a memory-bound curve and none
// for a compute-bound one; and it refuses measurements that do not
// determine it, saying why.
#include "backend/user/BatchModel.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

#include <cmath>
#include <random>

namespace morpheus::user {
namespace {

// A known model: every cost, and the curve it gives.
struct Truth {
  double perPacket, perBurst, perPacketPerBurst;
  SubBatchTerms sub;

  double ns(BatchPoint point) const {
    double t = perPacket + perBurst / point.burst + perPacketPerBurst * point.burst;
    if (point.subBatch) {
      double b = point.effectiveSubBatch();
      t += sub.prefetchPerPacketNs + sub.perSubBatchNs / b + sub.firstSubBatchStallNs / point.burst +
           sub.footprintPerPacketNs * b;
    }
    return t;
  }
};

// Memory-bound: 15 ns of stall a packet that prefetching hides, for 3 ns
// of prefetch call (so -12 when covered), 20 ns a sub-batch, 150 ns of
// the stall left in each burst's first sub-batch.
const Truth MemoryBound{30, 400, 0.02, {-12, 20, 150, 0.05}};
// Compute-bound: nothing to hide, the call costs 3 ns a packet.
const Truth ComputeBound{30, 400, 0.02, {3, 20, 0, 0.05}};

// user-run --batch-model's grid: B = 4..256, b = none, 2, 4, 8, 16, B.
std::vector<BatchPoint> grid() { return batchGrid({4, 8, 16, 32, 64, 128, 256}, {2, 4, 8, 16}); }

// Its fitted points: B = 8, 32, 128 at b = none, 2, 8, B.
std::vector<BatchSample> fitted(const Truth &truth) {
  std::vector<BatchSample> samples;
  for (BatchPoint point : batchGrid({8, 32, 128}, {2, 8}))
    samples.push_back({point, truth.ns(point)});
  return samples;
}

BatchPoint fastest(const Truth &truth, const std::vector<BatchPoint> &points) {
  BatchPoint best = points.front();
  for (BatchPoint point : points)
    if (truth.ns(point) < truth.ns(best))
      best = point;
  return best;
}

TEST(BatchModel, FitRecoversTheCurveAndPicksItsMinimum) {
  // Without prefetching: 20 ns per packet, 400 ns per burst, 0.05 ns per
  // packet per packet of the burst: fastest near sqrt(400 / 0.05) = 89,
  // so 64 of these.
  Truth batching{20, 400, 0.05, {}};
  std::vector<BatchSample> samples;
  for (uint32_t burst : {8u, 32u, 128u, 256u})
    samples.push_back({{burst}, batching.ns({burst})});
  auto model = BatchModel::fit(samples);
  ASSERT_THAT_EXPECTED(model, llvm::Succeeded());
  EXPECT_NEAR(model->perPacketNs, 20, 1e-6);
  EXPECT_NEAR(model->perBurstNs, 400, 1e-6);
  EXPECT_NEAR(model->perPacketPerBurstNs, 0.05, 1e-9);
  EXPECT_FALSE(model->subBatching); // no sample with prefetching
  for (uint32_t burst : {4u, 16u, 64u})
    EXPECT_NEAR(model->predictNs({burst}), batching.ns({burst}), 1e-6);
  EXPECT_EQ(model->pick({{4}, {8}, {16}, {32}, {64}, {128}, {256}}), (BatchPoint{64}));
  ASSERT_EQ(model->residuals.size(), 4u);
  EXPECT_NEAR(model->rmsResidualNs(), 0, 1e-9);

  // With prefetching: all seven costs back from the eleven points.
  for (const Truth &truth : {MemoryBound, ComputeBound}) {
    auto both = BatchModel::fit(fitted(truth));
    ASSERT_THAT_EXPECTED(both, llvm::Succeeded());
    ASSERT_TRUE(both->subBatching);
    EXPECT_NEAR(both->perPacketNs, truth.perPacket, 1e-6);
    EXPECT_NEAR(both->perBurstNs, truth.perBurst, 1e-6);
    EXPECT_NEAR(both->perPacketPerBurstNs, truth.perPacketPerBurst, 1e-9);
    EXPECT_NEAR(both->subBatching->prefetchPerPacketNs, truth.sub.prefetchPerPacketNs, 1e-6);
    EXPECT_NEAR(both->subBatching->perSubBatchNs, truth.sub.perSubBatchNs, 1e-6);
    EXPECT_NEAR(both->subBatching->firstSubBatchStallNs, truth.sub.firstSubBatchStallNs, 1e-6);
    EXPECT_NEAR(both->subBatching->footprintPerPacketNs, truth.sub.footprintPerPacketNs, 1e-9);
    for (BatchPoint point : grid())
      EXPECT_NEAR(both->predictNs(point), truth.ns(point), 1e-6);
    EXPECT_EQ(both->pick(grid()), fastest(truth, grid()));
  }
  // Memory-bound, prefetching in sub-batches below the burst pays; compute-
  // bound, it never does.
  BatchPoint memoryPick = BatchModel::fit(fitted(MemoryBound))->pick(grid());
  EXPECT_NE(memoryPick.subBatch, 0u);
  EXPECT_LT(memoryPick.subBatch, memoryPick.burst);
  EXPECT_EQ(BatchModel::fit(fitted(ComputeBound))->pick(grid()).subBatch, 0u);
}

TEST(BatchModel, TheGridRunsEveryBurstWithoutAndWithEachSubBatchUpToIt) {
  std::vector<BatchPoint> expected = {{8, 0},  {8, 2},  {8, 8},   {32, 0},
                                      {32, 2}, {32, 8}, {32, 32}};
  EXPECT_EQ(batchGrid({8, 32}, {2, 8}), expected);
  EXPECT_EQ(batchGrid({8, 32}, {}), (std::vector<BatchPoint>{{8, 0}, {32, 0}}));
  EXPECT_EQ(grid().size(), 3u + 4 + 5 + 6 + 6 + 6 + 6);
  EXPECT_EQ(fitted(MemoryBound).size(), 11u);
}

TEST(BatchModel, FitWithNoiseStaysNearTheCurve) {
  // Every grid point measured three times with 2 % noise (a fixed seed):
  // the costs come back within a few ns, every prediction within 3 %, the
  // pick within 1 % of the true minimum's time, and the residuals are
  // the noise's size.
  std::mt19937 random(13);
  std::normal_distribution<double> noise(0, 0.02);
  std::vector<BatchSample> samples;
  for (int repeat = 0; repeat < 3; ++repeat)
    for (BatchPoint point : grid())
      samples.push_back({point, MemoryBound.ns(point) * (1 + noise(random))});
  auto model = BatchModel::fit(samples);
  ASSERT_THAT_EXPECTED(model, llvm::Succeeded());
  EXPECT_NEAR(model->perPacketNs, MemoryBound.perPacket, 2);
  EXPECT_NEAR(model->subBatching->prefetchPerPacketNs, MemoryBound.sub.prefetchPerPacketNs, 2);
  EXPECT_NEAR(model->subBatching->perSubBatchNs, MemoryBound.sub.perSubBatchNs, 5);
  for (BatchPoint point : grid())
    EXPECT_NEAR(model->predictNs(point) / MemoryBound.ns(point), 1, 0.03)
        << point.burst << " " << point.subBatch;
  BatchPoint best = fastest(MemoryBound, grid());
  EXPECT_LT(MemoryBound.ns(model->pick(grid())), MemoryBound.ns(best) * 1.01);
  EXPECT_EQ(model->residuals.size(), samples.size());
  EXPECT_GT(model->rmsResidualNs(), 0.1);
  EXPECT_LT(model->rmsResidualNs(), 2.5); // 2 % of 30-140 ns
}

std::string fitError(const std::vector<BatchSample> &samples) {
  auto model = BatchModel::fit(samples);
  if (model)
    return "fitted";
  return toString(model.takeError());
}

TEST(BatchModel, MeasurementsThatDoNotDetermineItAreRefused) {
  EXPECT_NE(fitError({{{8}, 30}, {{8}, 31}, {{32}, 25}})
                .find("three burst sizes or more without prefetching, got 2"),
            std::string::npos);
  EXPECT_NE(fitError({{{0}, 30}, {{8}, 31}, {{32}, 25}, {{128}, 25}}).find("a burst of 0"),
            std::string::npos);
  std::string negative = fitError({{{8}, 30}, {{32}, -1}, {{128}, 25}});
  EXPECT_NE(negative.find("-1.00 ns/packet at B=32: not a time"), std::string::npos) << negative;
  EXPECT_NE(fitError({{{8}, 30}, {{32}, NAN}, {{128}, 25}}).find("not a time"), std::string::npos);
  // Three (B, b) points with prefetching for four sub-batch terms; b = 16
  // and b = 32 at B = 8 are the same sub-batch (the burst).
  std::vector<BatchSample> few = {{{8}, 30},     {{32}, 25},     {{128}, 25},
                                  {{8, 2}, 28},  {{32, 2}, 24},  {{8, 16}, 29}, {{8, 32}, 29}};
  EXPECT_NE(fitError(few).find("four (B, b) points or more with prefetching, got 3"),
            std::string::npos)
      << fitError(few);
  // Four points, all at one burst: the first sub-batch's stall per burst
  // is not told apart from the prefetch's cost per packet.
  std::vector<BatchSample> oneBurst = {{{8}, 30},     {{32}, 25},     {{128}, 25},
                                       {{32, 2}, 24}, {{32, 4}, 23}, {{32, 8}, 22}, {{32, 16}, 23}};
  EXPECT_NE(fitError(oneBurst).find("do not determine its first sub-batch stall term"),
            std::string::npos)
      << fitError(oneBurst);
}

} // namespace
} // namespace morpheus::user
