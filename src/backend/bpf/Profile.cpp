#include "backend/bpf/Profile.h"

#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapIO.h"

#include <bpf/bpf.h>

#include <algorithm>
#include <cstring>
#include <unistd.h>

namespace morpheus::bpf {

namespace {

constexpr size_t SiteBytes = sizeof(morpheus_profile_site);
constexpr size_t Stride = (SiteBytes + 7) & ~size_t(7); // per-CPU layout

} // namespace

Expected<ProfileMap> ProfileMap::create() {
  int fd = bpf_map_create(BPF_MAP_TYPE_PERCPU_ARRAY, ProfileMapName, sizeof(uint32_t),
                          SiteBytes, ProfileSites, nullptr);
  if (fd < 0)
    return makeSystemError(errno, "cannot create the traffic profile map");
  return ProfileMap(fd, unsigned(possibleCpus()));
}

ProfileMap::ProfileMap(ProfileMap &&other) noexcept
    : mapFd(std::exchange(other.mapFd, -1)), cpus(other.cpus), seen(std::move(other.seen)) {}

ProfileMap &ProfileMap::operator=(ProfileMap &&other) noexcept {
  if (this != &other) {
    if (mapFd >= 0)
      close(mapFd);
    mapFd = std::exchange(other.mapFd, -1);
    cpus = other.cpus;
    seen = std::move(other.seen);
  }
  return *this;
}

ProfileMap::~ProfileMap() {
  if (mapFd >= 0)
    close(mapFd);
}

Expected<std::vector<uint8_t>> ProfileMap::readSite(unsigned site) const {
  std::vector<uint8_t> raw(Stride * cpus);
  uint32_t key = site;
  if (bpf_map_lookup_elem(mapFd, &key, raw.data()))
    return makeSystemError(errno, "traffic profile: cannot read site {0}", site);
  return raw;
}

Expected<std::vector<ProfileMap::Samples>> ProfileMap::read(unsigned site, uint32_t keySize) {
  auto raw = readSite(site);
  if (!raw)
    return raw.takeError();
  std::vector<uint64_t> &last = seen[site];
  last.resize(cpus, 0);
  std::vector<Samples> out;
  keySize = std::min<uint32_t>(keySize, ProfileKeyBytes);
  for (unsigned cpu = 0; cpu < cpus; ++cpu) {
    morpheus_profile_site state;
    std::memcpy(&state, raw->data() + cpu * Stride, SiteBytes);
    Samples samples;
    samples.cpu = cpu;
    samples.period = state.period;
    // A counter below the last read: the map was rewritten (setPeriod).
    samples.written = state.written >= last[cpu] ? state.written - last[cpu] : state.written;
    uint64_t kept = std::min<uint64_t>(samples.written, ProfileSlots);
    for (uint64_t n = state.written - kept; n < state.written; ++n) {
      const uint8_t *slot = state.keys[n & (ProfileSlots - 1)];
      samples.keys.emplace_back(slot, slot + keySize);
    }
    last[cpu] = state.written;
    out.push_back(std::move(samples));
  }
  return out;
}

Error ProfileMap::setPeriod(unsigned site, uint32_t period) {
  auto raw = readSite(site);
  if (!raw)
    return raw.takeError();
  std::vector<uint64_t> &last = seen[site];
  last.resize(cpus, 0);
  for (unsigned cpu = 0; cpu < cpus; ++cpu) {
    auto *state = reinterpret_cast<morpheus_profile_site *>(raw->data() + cpu * Stride);
    state->period = period;
    state->countdown = period ? std::min(state->countdown ? state->countdown : period, period)
                              : 0;
    // Samples taken after the read above are overwritten: the counter we
    // write is where the next read starts.
    last[cpu] = state->written;
  }
  uint32_t key = site;
  if (bpf_map_update_elem(mapFd, &key, raw->data(), BPF_ANY))
    return makeSystemError(errno, "traffic profile: cannot set the period of site {0}", site);
  return Error::success();
}

Expected<WriteCounts> WriteCounts::create() {
  int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, WritesMapName, sizeof(uint32_t),
                          sizeof(uint64_t), 1u << WriteBucketBits, nullptr);
  if (fd < 0)
    return makeSystemError(errno, "cannot create the write count map");
  return WriteCounts(fd);
}

WriteCounts::WriteCounts(WriteCounts &&other) noexcept
    : mapFd(std::exchange(other.mapFd, -1)) {}

WriteCounts &WriteCounts::operator=(WriteCounts &&other) noexcept {
  if (this != &other) {
    if (mapFd >= 0)
      close(mapFd);
    mapFd = std::exchange(other.mapFd, -1);
  }
  return *this;
}

WriteCounts::~WriteCounts() {
  if (mapFd >= 0)
    close(mapFd);
}

Expected<uint64_t> WriteCounts::read(uint32_t bucket) const {
  uint64_t count = 0;
  if (bpf_map_lookup_elem(mapFd, &bucket, &count))
    return makeSystemError(errno, "cannot read write count bucket {0} of {1}", bucket,
                           WritesMapName);
  return count;
}

Expected<std::unique_ptr<TrafficMaps>> TrafficMaps::create() {
  auto profile = ProfileMap::create();
  if (!profile)
    return profile.takeError();
  auto writes = WriteCounts::create();
  if (!writes)
    return writes.takeError();
  return std::make_unique<TrafficMaps>(std::move(*profile), std::move(*writes));
}

unsigned TrafficMaps::writeBucketBits() const { return WriteBucketBits; }

} // namespace morpheus::bpf
