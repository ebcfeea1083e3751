#include "Trace.h"

#include "trace_driver.h"

#include <pcap/pcap.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>

namespace morpheus::bench {

Expected<Trace> readPcapTrace(const std::string &path, const std::string &name) {
  char message[PCAP_ERRBUF_SIZE] = "";
  std::unique_ptr<pcap_t, decltype(&pcap_close)> capture(
      pcap_open_offline(path.c_str(), message), pcap_close);
  if (!capture)
    return makeError("trace {0}: {1}", path, message);
  if (pcap_datalink(capture.get()) != DLT_EN10MB)
    return makeError("trace {0}: link type {1} is not Ethernet", path,
                     pcap_datalink(capture.get()));

  Trace trace;
  trace.name = name;
  std::map<std::vector<uint8_t>, uint32_t> indexOf;
  pcap_pkthdr *header;
  const u_char *bytes;
  int status;
  uint64_t packet = 0;
  while ((status = pcap_next_ex(capture.get(), &header, &bytes)) == 1) {
    ++packet;
    if (header->caplen < header->len)
      return makeError("trace {0}: packet {1} was captured truncated ({2} of {3} bytes)",
                       path, packet, header->caplen, header->len);
    if (header->len > TRACE_FRAME_MAX || header->len < 14)
      return makeError("trace {0}: packet {1} has {2} bytes; the trace driver replays "
                       "frames of 14 to {3} bytes",
                       path, packet, header->len, TRACE_FRAME_MAX);
    if (trace.sequence.size() == TRACE_PACKETS_MAX)
      return makeError("trace {0}: more than {1} packets", path, TRACE_PACKETS_MAX);
    std::vector<uint8_t> frame(bytes, bytes + header->len);
    auto [it, added] = indexOf.emplace(std::move(frame), uint32_t(indexOf.size()));
    if (added && indexOf.size() > TRACE_FRAMES_MAX)
      return makeError("trace {0}: more than {1} distinct frames (at packet {2})", path,
                       TRACE_FRAMES_MAX, packet);
    trace.sequence.push_back(it->second);
    trace.frameLength = std::max<uint32_t>(trace.frameLength, header->len);
  }
  if (status == PCAP_ERROR)
    return makeError("trace {0}: packet {1}: {2}", path, packet + 1,
                     pcap_geterr(capture.get()));
  if (trace.sequence.empty())
    return makeError("trace {0}: no packets", path);
  trace.frameLength = (trace.frameLength + 7) / 8 * 8;
  trace.frames.resize(indexOf.size());
  for (auto &[frame, index] : indexOf) {
    trace.frames[index] = frame;
    trace.frames[index].resize(trace.frameLength, 0);
  }
  return trace;
}

std::vector<uint64_t> packetsPerFrame(const Trace &trace) {
  std::vector<uint64_t> perFrame(trace.frames.size());
  for (uint32_t index : trace.sequence)
    ++perFrame[index];
  return perFrame;
}

std::vector<uint32_t> hottestDestinations(const Trace &trace, size_t count) {
  std::vector<uint32_t> hottest = hottestFirst<uint32_t>(
      trace, [](const std::vector<uint8_t> &f) -> std::optional<uint32_t> {
        if (f.size() < 34 || f[12] != 0x08 || f[13] != 0x00)
          return std::nullopt;
        return uint32_t(f[30]) << 24 | f[31] << 16 | f[32] << 8 | f[33];
      });
  if (hottest.size() > count)
    hottest.resize(count);
  return hottest;
}

double topShare(const Trace &trace, size_t top) {
  std::vector<uint64_t> counts = packetsPerFrame(trace);
  size_t n = std::min(top, counts.size());
  std::partial_sort(counts.begin(), counts.begin() + n, counts.end(), std::greater<>());
  uint64_t hits = 0;
  for (size_t i = 0; i < n; ++i)
    hits += counts[i];
  return double(hits) / double(trace.sequence.size());
}

} // namespace morpheus::bench
