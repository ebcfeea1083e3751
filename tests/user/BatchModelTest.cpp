// The batching model (backend/user/BatchModel, after the P4C paper's):
// fitted by least squares, it recovers a cost curve it is given exactly,
// picks the burst size that curve makes fastest, and refuses too few
// burst sizes to determine it.
#include "backend/user/BatchModel.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus::user {
namespace {

TEST(BatchModel, FitRecoversTheCurveAndPicksItsMinimum) {
  // 20 ns per packet, 400 ns per burst, 0.05 ns per packet per packet of
  // the burst: fastest near sqrt(400 / 0.05) = 89, so 64 of these.
  auto truth = [](uint32_t burst) { return 20 + 400.0 / burst + 0.05 * burst; };
  std::vector<BatchSample> samples;
  for (uint32_t burst : {8u, 32u, 128u, 256u})
    samples.push_back({burst, truth(burst)});
  auto model = BatchModel::fit(samples);
  ASSERT_THAT_EXPECTED(model, llvm::Succeeded());
  EXPECT_NEAR(model->perPacketNs, 20, 1e-6);
  EXPECT_NEAR(model->perBurstNs, 400, 1e-6);
  EXPECT_NEAR(model->perPacketPerBurstNs, 0.05, 1e-9);
  for (uint32_t burst : {4u, 16u, 64u})
    EXPECT_NEAR(model->predictNs(burst), truth(burst), 1e-6);
  EXPECT_EQ(model->pick({4, 8, 16, 32, 64, 128, 256}), 64u);
  // Without the cache-pressure term, the largest burst wins.
  auto amortised = BatchModel::fit({{8, 20 + 50.0}, {32, 20 + 12.5}, {128, 20 + 3.125}});
  ASSERT_THAT_EXPECTED(amortised, llvm::Succeeded());
  EXPECT_EQ(amortised->pick({8, 32, 128}), 128u);
}

TEST(BatchModel, TwoBurstSizesDoNotDetermineIt) {
  auto model = BatchModel::fit({{8, 30}, {8, 31}, {32, 25}});
  ASSERT_FALSE(model);
  std::string message = toString(model.takeError());
  EXPECT_NE(message.find("three burst sizes or more, got 2"), std::string::npos) << message;
}

} // namespace
} // namespace morpheus::user
