// The traffic profile map in user space (dataplane/guard_abi.h,
// struct morpheus_profile_site): Morpheus creates it, shares it with every
// version it runs, never pins it (no control plane sees it), reads the keys
// instrumented sites sampled, and sets each site's sampling period.
#pragma once

#include "backend/bpf/dataplane/guard_abi.h"
#include "core/Tables.h"
#include "core/TrafficFollowing.h"
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

  // One CPU's samples at one site since the previous read (at most
  // ProfileSlots keys, the latest).
  using Samples = core::TrafficSource::Samples;
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

// Both maps, as what the specialization cycle follows the traffic from
// (core/TrafficFollowing.h).
class TrafficMaps final : public core::TrafficSource {
public:
  TrafficMaps(ProfileMap profile, WriteCounts writes)
      : profile(std::move(profile)), writes(std::move(writes)) {}
  static Expected<std::unique_ptr<TrafficMaps>> create();

  int profileFd() const { return profile.fd(); }
  int writesFd() const { return writes.fd(); }

  Expected<std::vector<Samples>> samples(unsigned site, uint32_t keySize) override {
    return profile.read(site, keySize);
  }
  Error setPeriod(unsigned site, uint32_t period) override {
    return profile.setPeriod(site, period);
  }
  unsigned writeBucketBits() const override;
  Expected<uint64_t> writeCount(uint32_t bucket) override { return writes.read(bucket); }
  // The original program, which packets run until a version is installed
  // and whenever the guard falls back, is loaded as written: no counts.
  bool genericCountsWrites() const override { return false; }

private:
  ProfileMap profile;
  WriteCounts writes;
};

} // namespace morpheus::bpf
