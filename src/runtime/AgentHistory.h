// A program's recent past as the node agent saw it, for `morpheus status
// --history` and `--plot`: one sample per status period (when the period
// ended, the packets the program ran in it, whether the generic or the
// specialized program ran them and its ns/packet: Daemon::RunTime, kernel
// bpf_stats) and every install with the guard version it was built for.
//
// Why it is shaped this way:
// - Bounded by count, not by time: at most `capacity` samples (3 hours at
//   the default 1 s period), the oldest dropped first, and the installs
//   before the oldest sample kept go with them (never more than `capacity`
//   installs either), so an agent's memory does not grow with its uptime
//   (40 bytes a sample: 430 KB a program at the default).
// - Times are Unix seconds (the wall clock), so a script can line them up
//   with the operator's other monitoring.
// - One JSON form, written here (toJson, the control socket's "history"
//   op) and read here (fromJson, the CLI's plot), so the two never drift;
//   reading refuses what is not that form, naming the field.
#pragma once

#include "support/Error.h"

#include <nlohmann/json.hpp>

#include <cstddef>
#include <cstdint>
#include <deque>
#include <optional>

namespace morpheus::runtime {

struct HistorySample {
  double time = 0;          // Unix seconds: the end of the status period
  uint64_t packets = 0;     // run in the period
  bool specialized = false; // which program ran them
  // Of the program that ran; none when no packet ran (or bpf_stats is off,
  // which counts none).
  std::optional<double> nsPerPacket;
  bool operator==(const HistorySample &) const = default;
};

struct HistoryInstall {
  double time = 0;      // Unix seconds
  uint64_t version = 0; // the guard version the installed code was built for
  bool operator==(const HistoryInstall &) const = default;
};

class ProgramHistory {
public:
  // Three hours of the default 1 s status period.
  static constexpr size_t DefaultCapacity = 3 * 3600;

  explicit ProgramHistory(size_t capacity = DefaultCapacity) : capacity(capacity) {}

  void sample(const HistorySample &sample);
  void install(const HistoryInstall &install);

  const std::deque<HistorySample> &samples() const { return sampled; }
  const std::deque<HistoryInstall> &installs() const { return installed; }

  // {"samples": [{"time", "packets", "program": "generic"|"specialized",
  // ["ns_per_packet"]}...], "installs": [{"time", "version"}...]}, oldest
  // first.
  nlohmann::json toJson() const;
  // The same back (capacity: as many as it holds).
  static Expected<ProgramHistory> fromJson(const nlohmann::json &json);

private:
  size_t capacity;
  std::deque<HistorySample> sampled;
  std::deque<HistoryInstall> installed;
};

} // namespace morpheus::runtime
