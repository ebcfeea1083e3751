#include "SubBatches.h"

#include <gtest/gtest.h>

#include <string>

namespace morpheus::user::testing {

void expectSubBatchesTreatPacketsAsWithout(Handler &plain, Handler &prefetched,
                                           const ReplayRing &ring) {
  ASSERT_TRUE(prefetched.prefetcher());
  for (uint32_t subBatch : {1u, 3u, 8u, 32u}) {
    SCOPED_TRACE("sub-batch " + std::to_string(subBatch));
    auto expected = EventLoop(plain.trampoline(), 16).collect(ring);
    auto actual = EventLoop(prefetched.trampoline(), 16)
                      .prefetching(prefetched.prefetcher(), subBatch)
                      .collect(ring);
    ASSERT_EQ(actual.size(), expected.size());
    for (size_t i = 0; i < expected.size(); ++i)
      ASSERT_EQ(actual[i], expected[i]) << "packet " << i;
    EXPECT_TRUE(prefetched.tables().dump() == plain.tables().dump()) << "the tables differ";
  }
}

void expectPrefetchChangesNothing(Handler &handler, const ReplayRing &ring) {
  ASSERT_TRUE(handler.prefetcher());
  auto tables = handler.tables().dump();
  for (unsigned round = 0; round < 3; ++round)
    for (size_t i = 0; i < ring.frames.size(); ++i) {
      Bytes frame = ring.frames[i];
      mu_packet packet{frame.data(), uint32_t(frame.size()), ring.ingressPort};
      handler.prefetcher()(&packet);
      ASSERT_EQ(frame, ring.frames[i]) << "frame " << i << " written";
      ASSERT_EQ(packet.port, ring.ingressPort) << "frame " << i << "'s port written";
    }
  EXPECT_TRUE(handler.tables().dump() == tables) << "the tables changed";
}

} // namespace morpheus::user::testing
