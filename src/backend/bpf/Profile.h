// The traffic profile map in user space (dataplane/guard_abi.h,
// struct morpheus_profile_site): Morpheus creates it, shares it with every
// version it runs, never pins it (no control plane sees it), reads the keys
// instrumented sites sampled, and sets each site's sampling period.
#pragma once

#include "backend/bpf/dataplane/guard_abi.h"
#include "core/Tables.h"
#include "support/Error.h"

#include <cstdint>
#include <map>
#include <vector>

namespace morpheus::bpf {

inline constexpr unsigned ProfileSites = MORPHEUS_PROFILE_SITES;
inline constexpr unsigned ProfileSlots = MORPHEUS_PROFILE_SLOTS;
inline constexpr unsigned ProfileKeyBytes = MORPHEUS_PROFILE_KEY_BYTES;

class ProfileMap {
public:
  // A fresh map: every site's sampling off until setPeriod.
  static Expected<ProfileMap> create();
  ProfileMap(ProfileMap &&other) noexcept;
  ProfileMap &operator=(ProfileMap &&other) noexcept;
  ~ProfileMap();

  int fd() const { return mapFd; }

  // One CPU's samples at one site since the previous read.
  struct Samples {
    unsigned cpu = 0;
    std::vector<core::Bytes> keys; // at most ProfileSlots, the latest
    uint64_t written = 0;          // samples taken since the previous read
    uint32_t period = 0;           // the period they were taken at
  };
  // Reads `site` on every CPU; keys are cut to `keySize` bytes.
  Expected<std::vector<Samples>> read(unsigned site, uint32_t keySize);
  // Samples one lookup in `period` at `site` on every CPU (0: none). Samples
  // the data plane takes while this writes are lost, never miscounted.
  Error setPeriod(unsigned site, uint32_t period);

private:
  explicit ProfileMap(int fd, unsigned cpus) : mapFd(fd), cpus(cpus) {}
  // `site`'s value on every CPU, as the kernel returns a per-CPU value.
  Expected<std::vector<uint8_t>> readSite(unsigned site) const;
  int mapFd = -1;
  unsigned cpus = 0;
  // Per site, per CPU: the sample count at the previous read.
  std::map<unsigned, std::vector<uint64_t>> seen;
};

// The write counts of tables the data plane writes (dataplane/guard_abi.h,
// core/passes/GuardTableWrites.cpp): an ARRAY of 64-bit counters Morpheus
// creates and shares with every version it runs, never pinned. User space
// only reads it: a count read before the snapshot is what a fast path is
// built under.
class WriteCounts {
public:
  static Expected<WriteCounts> create();
  WriteCounts(WriteCounts &&other) noexcept;
  WriteCounts &operator=(WriteCounts &&other) noexcept;
  ~WriteCounts();

  int fd() const { return mapFd; }
  // The writes counted in `bucket` so far.
  Expected<uint64_t> read(uint32_t bucket) const;

private:
  explicit WriteCounts(int fd) : mapFd(fd) {}
  int mapFd = -1;
};

} // namespace morpheus::bpf
