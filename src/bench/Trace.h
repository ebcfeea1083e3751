// A packet trace in the form the trace driver replays: the distinct frames
// (each padded to one common length) and the order packets use them in.
#pragma once

#include "support/Error.h"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::bench {

struct Trace {
  std::string name;          // what tables and plots call it ("high", a file)
  uint32_t frameLength = 0;  // every frame's length, a multiple of 8
  std::vector<std::vector<uint8_t>> frames; // distinct frames, frameLength each
  std::vector<uint32_t> sequence;           // packet i is frames[sequence[i]]
};

// Reads a classic pcap file (libpcap; Ethernet link type). Frames shorter
// than the longest are padded with zero bytes, which every protocol here
// reads as Ethernet padding; truncated captures, frames longer than the
// driver can write and traces larger than its maps are errors naming the
// packet.
Expected<Trace> readPcapTrace(const std::string &path, const std::string &name);

// How many times the trace sends each of its frames.
std::vector<uint64_t> packetsPerFrame(const Trace &trace);

// The keys `keyOf` finds in the trace's frames (none: the frame counts for
// nothing), most packets first; of two as hot, the larger key first.
template <typename Key>
std::vector<Key>
hottestFirst(const Trace &trace,
             const std::function<std::optional<Key>(const std::vector<uint8_t> &)> &keyOf) {
  std::vector<uint64_t> perFrame = packetsPerFrame(trace);
  std::map<Key, uint64_t> perKey;
  for (size_t i = 0; i < trace.frames.size(); ++i)
    if (std::optional<Key> key = keyOf(trace.frames[i]))
      perKey[*key] += perFrame[i];
  std::vector<std::pair<uint64_t, Key>> ranked;
  for (const auto &[key, packets] : perKey)
    ranked.emplace_back(packets, key);
  std::sort(ranked.rbegin(), ranked.rend());
  std::vector<Key> keys;
  for (auto &[packets, key] : ranked)
    keys.push_back(std::move(key));
  return keys;
}

// The destinations of the trace's IPv4 packets (host order), most packets
// first (equal counts: the higher address first), at most `count`.
std::vector<uint32_t> hottestDestinations(const Trace &trace, size_t count);

// Share of the packets that go to the `top` most frequent frames (a
// trace's locality at a glance, printed beside its results).
double topShare(const Trace &trace, size_t top);

} // namespace morpheus::bench
