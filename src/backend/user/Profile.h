// The traffic profile of the user-space backend: where instrumented lookup
// sites (the core's instrument-table-sites) record sampled keys, in the
// process's memory. The eBPF backend keeps the same per-site state in a
// PERCPU_ARRAY map; here one loop thread runs the handler, so there is one
// state per site, no atomics. Every JIT-compiled version reaches it through
// the symbol `morpheus_user_profile` (Jit binds it) and the slot function
// linkSlotFunction adds to each specialized module; the optimizer side
// (Handler) reads the samples and sets the periods between bursts, on the
// loop's thread, as it changes tables.
#pragma once

#include "backend/user/WriteCounters.h"
#include "core/Tables.h"
#include "core/TrafficFollowing.h"

#include <llvm/IR/Module.h>

#include <cstdint>
#include <memory>
#include <vector>

namespace morpheus::user {

class Profile {
public:
  static constexpr unsigned Sites = 64;    // site ids below this are profiled
  static constexpr unsigned Slots = 64;    // keys kept per site (a power of two)
  static constexpr unsigned KeyBytes = 32; // longer keys are not profiled
  static constexpr const char *StorageSymbol = "morpheus_user_profile";
  static constexpr const char *SlotFunction = "morpheus_user_profile_slot";

  // One site's state. `countdown` lookups until the next sample (0:
  // sampling off); a sample reloads it around `period` (a power of two,
  // jittered from the sample count so traffic repeating with the period is
  // not aliased onto one key) and writes the key into slot
  // `written % Slots`.
  struct Site {
    uint32_t countdown;
    uint32_t period;
    uint64_t written;
    uint8_t keys[Slots][KeyBytes];
  };

  Profile();
  const void *storage() const { return sites.get(); }

  // The samples `site` took since the previous read.
  struct Samples {
    std::vector<core::Bytes> keys; // at most Slots, the latest, cut to keySize
    uint64_t written = 0;          // samples taken since the previous read
    uint32_t period = 0;           // the period they were taken at
  };
  Samples read(unsigned site, uint32_t keySize);
  // One lookup in `period` sampled at `site` from now on (0: none).
  void setPeriod(unsigned site, uint32_t period);

  // Adds `SlotFunction` (`ptr (i32 site)`: the slot this lookup's key goes
  // to, or null when it is not sampled; internal, always inlined) to
  // `module`, over the storage declared as `StorageSymbol`.
  static void linkSlotFunction(llvm::Module &module);

private:
  std::unique_ptr<Site[]> sites;
  std::vector<uint64_t> seen; // per site: `written` at the previous read
};

// The profile and the write counters, as what the specialization cycle
// follows the traffic from (core/TrafficFollowing.h): one loop thread runs
// the handler, so every sample is CPU 0's, and reading never fails.
class TrafficStorage final : public core::TrafficSource {
public:
  TrafficStorage(Profile &profile, const WriteCounters &writes)
      : profile(&profile), writes(&writes) {}

  Expected<std::vector<Samples>> samples(unsigned site, uint32_t keySize) override;
  Error setPeriod(unsigned site, uint32_t period) override {
    profile->setPeriod(site, period);
    return Error::success();
  }
  unsigned writeBucketBits() const override { return WriteCounters::BucketBits; }
  Expected<uint64_t> writeCount(uint32_t bucket) override { return writes->read(bucket); }
  // Every version counts writes, the generic one included (WriteCounters.h).
  bool genericCountsWrites() const override { return true; }

private:
  Profile *profile;
  const WriteCounters *writes;
};

} // namespace morpheus::user
