// The batching and sub-batching part of the P4C performance model
// (Bhardwaj et al., APSys '17), fitted online from measurements of the
// running loop and used to pick the burst size B and the sub-batch size b
// (the loop runs each burst in sub-batches of b packets, the next one's
// table entries prefetched first: EventLoop::prefetching); measurement
// then confirms or overrides the pick (user-run --batch-model).
//
// The paper models throughput as the slowest of three servers (CPU, the
// CPU-memory interface whose rate sub-batching raises, the DMA interface
// whose rate batching raises) and leaves the shapes of those functions to
// be read off measurements. Here the time per packet is written as a sum
// of terms, each a known function of (B, b) times an unknown cost, so that
// least squares fits the costs (linear in them) and a fit says which terms
// this handler, table and trace pay. Without prefetching (b = none):
//
//   t(B) = perPacketNs + perBurstNs / B + perPacketPerBurstNs * B
//
// a per-packet cost, a per-burst cost amortised over the burst (the
// paper's I/O-memory term: larger batches faster) and a cost growing with
// the burst (its cache-pressure term: batches past some size slower).
// With sub-batches of b, b' = min(b, B) being the sub-batch the loop runs
// (at the start of each sub-batch the next one's entries are prefetched;
// the first sub-batch of a burst is prefetched just before it runs):
//
//   t(B, b) = t(B) + prefetchPerPacketNs + perSubBatchNs / b'
//             + firstSubBatchStallNs / B + footprintPerPacketNs * b'
//
// - prefetchPerPacketNs: the prefetch call every packet pays, minus the
//   memory stall prefetching hides once a packet's entry was asked for a
//   sub-batch of the handler's work ahead (negative when prefetching pays);
// - perSubBatchNs / b': what each sub-batch costs (its prefetch loop),
//   and, for sub-batches shorter than the work that covers a miss, the
//   part of the stall they leave, both shrinking as b' grows;
// - firstSubBatchStallNs / B: the first packets of every burst have their
//   entries asked for just before they run, with little work to cover
//   them: a stall per burst, amortised over the burst (the one term by
//   which prefetching makes larger bursts pay more);
// - footprintPerPacketNs * b': entries for up to 2b' packets held in the
//   cache and the fill buffers at once, the paper's "too large a sub-batch
//   dips" term; with perSubBatchNs it puts the best b near
//   sqrt(perSubBatchNs / footprintPerPacketNs) whatever B is, which is
//   why the paper finds the best b below the best B.
//
// Every term is a function the loop's structure fixes, so the fit needs
// no knowledge of the handler: a compute-bound one fits a positive
// prefetchPerPacketNs and no stall, and the model picks no prefetching.
// The fit is least squares (modified Gram-Schmidt on scaled columns) over
// at least three burst sizes without prefetching and, for the sub-batch
// terms, at least four distinct (B, b') points with it.
#pragma once

#include "support/Error.h"

#include <compare>
#include <cstdint>
#include <optional>
#include <vector>

namespace morpheus::user {

// A configuration of the loop: bursts of `burst` packets, run in
// sub-batches of `subBatch` with prefetching (0: no prefetching).
struct BatchPoint {
  uint32_t burst = 0;
  uint32_t subBatch = 0;

  // The sub-batch the loop runs: never more than the burst.
  uint32_t effectiveSubBatch() const { return subBatch < burst ? subBatch : burst; }
  auto operator<=>(const BatchPoint &) const = default;
};

struct BatchSample {
  BatchPoint point;
  double nsPerPacket = 0;
};

// A fitted sample: what was measured and what the fitted model predicts.
struct BatchResidual {
  BatchPoint point;
  double measuredNs = 0;
  double predictedNs = 0;
};

// The terms sub-batches with prefetching add (see the header comment).
struct SubBatchTerms {
  double prefetchPerPacketNs = 0;
  double perSubBatchNs = 0;
  double firstSubBatchStallNs = 0;
  double footprintPerPacketNs = 0;
};

struct BatchModel {
  double perPacketNs = 0;
  double perBurstNs = 0;
  double perPacketPerBurstNs = 0;
  // Present when the fit had samples with prefetching.
  std::optional<SubBatchTerms> subBatching;
  // One per sample the model was fitted on.
  std::vector<BatchResidual> residuals;

  // Least squares over `samples`; an error for a burst of 0, a time that
  // is not a positive number, fewer than three burst sizes without
  // prefetching, or samples with prefetching that do not determine the
  // sub-batch terms.
  static Expected<BatchModel> fit(const std::vector<BatchSample> &samples);
  // ns/packet at `point`; a point with a sub-batch needs subBatching.
  double predictNs(BatchPoint point) const;
  // The candidate the model predicts fastest (the first of equals).
  BatchPoint pick(const std::vector<BatchPoint> &candidates) const;
  // The root mean square of the residuals.
  double rmsResidualNs() const;
};

// The points to measure: every burst without prefetching, with each
// sub-batch size below it, and with sub-batches of the whole burst (b = B),
// in the order given.
std::vector<BatchPoint> batchGrid(const std::vector<uint32_t> &bursts,
                                  const std::vector<uint32_t> &subBatches);

} // namespace morpheus::user
