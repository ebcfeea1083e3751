// What every prefetch function (a handler's own MU_PREFETCH function or
// the one derived from its code, core/PrefetchStage.h) must keep:
// the packets and tables exactly as without it.
#pragma once

#include "backend/user/EventLoop.h"
#include "backend/user/Handler.h"

namespace morpheus::user::testing {

// Sub-batches of 1, 3, 8 and 32 with `prefetched`'s prefetch function, in
// bursts of 16, treat every packet of `ring` (verdict, port, bytes) and
// leave the tables as `plain`'s loop without prefetching. The two handlers
// start from equal tables; the ring runs once per sub-batch size.
void expectSubBatchesTreatPacketsAsWithout(Handler &plain, Handler &prefetched,
                                           const ReplayRing &ring);

// `handler`'s prefetch function alone, three times on every frame of
// `ring`, changes no byte of any frame and nothing in the tables.
void expectPrefetchChangesNothing(Handler &handler, const ReplayRing &ring);

} // namespace morpheus::user::testing
