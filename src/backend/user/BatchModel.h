// The batching part of the P4C performance model (Bhardwaj et al., APSys
// '17), fitted online from measurements of the running loop: the time per
// packet at burst size B is a per-packet cost, plus a per-burst cost
// amortised over the burst (the paper's I/O-memory term, which makes
// larger batches faster), plus a cost growing with the burst (its
// cache-pressure term, which makes batches past some size slower):
//
//   t(B) = perPacketNs + perBurstNs / B + perPacketPerBurstNs * B
//
// fitted by least squares on (B, ns/packet) points the loop measured, and
// used to predict the other burst sizes and pick one; measurement then
// confirms or overrides the pick (user-run --batch-model). The paper's
// sub-batching and prefetching terms are not modelled: the runtime's
// prefetching in sub-batches (EventLoop::prefetching) is chosen by
// measurement alone (user-run --explore).
#pragma once

#include "support/Error.h"

#include <cstdint>
#include <vector>

namespace morpheus::user {

struct BatchSample {
  uint32_t burst = 0;
  double nsPerPacket = 0;
};

struct BatchModel {
  double perPacketNs = 0;
  double perBurstNs = 0;
  double perPacketPerBurstNs = 0;

  // Least squares over `samples`; an error unless they hold at least three
  // distinct burst sizes (three unknowns).
  static Expected<BatchModel> fit(const std::vector<BatchSample> &samples);
  double predictNs(uint32_t burst) const;
  // The candidate the model predicts fastest (the first of equals).
  uint32_t pick(const std::vector<uint32_t> &candidates) const;
};

} // namespace morpheus::user
