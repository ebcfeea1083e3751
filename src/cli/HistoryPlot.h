// `morpheus status --plot FILE`: the agent's history (runtime/AgentHistory)
// drawn as one self-contained SVG, a panel per program stacked on one time
// axis: ns/packet of each status period as a line, blue where the generic
// program ran the period and orange where the specialized one did, and a
// dashed vertical line at each install labelled with its version. Written
// in C++ (no Python, no fonts or scripts fetched) because the agent runs in
// minimal containers and the file must open in any browser.
//
// Each panel has its own ns/packet scale (from 0, so gains read as
// heights); the time axis is shared so swaps of different programs line
// up. Periods without a figure (no packet, or bpf_stats off) break the
// line instead of drawing a zero.
#pragma once

#include "runtime/AgentHistory.h"

#include <string>
#include <vector>

namespace morpheus::cli {

struct PlottedProgram {
  std::string name;
  runtime::ProgramHistory history;
};

// The SVG document.
std::string plotHistory(const std::vector<PlottedProgram> &programs);

// "YYYY-MM-DD HH:MM:SS" in UTC, or "HH:MM:SS" without the date: the
// history's times as the plot and `status --history` print them.
std::string utcTime(double unixSeconds, bool withDate = true);

} // namespace morpheus::cli
