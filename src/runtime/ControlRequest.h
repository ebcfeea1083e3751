// One request of the control socket (ControlServer), checked whole before
// anything runs: the only code that reads a client's JSON. Whatever a
// client sends, parsing returns a typed request or an error naming the
// field and what it must be; it never throws (nlohmann's typed getters are
// called only on values whose type was checked) and never quotes more of
// the request than a short, printable excerpt.
//
// Fields by op (any other field is an error, so a misspelt "flag" is not
// silently ignored):
//   status: op, [program]
//   history: op, [program] (the agent's per-program history: runtime/AgentHistory)
//   delete: op, [program], map, key
//   update: op, [program], map, key, value, [flags]
//   reload: op (the agent re-reads its configuration)
//   handover: op (the agent stops, leaving every data plane as it is, for
//     the next agent: `morpheus daemon --take-over`)
// program: the name of one of the agent's programs (`morpheus daemon`); a
// socket serving one program (`morpheus run`) takes its entry's name.
// map: a non-empty string; key, value: hex as `morpheus map` takes it (a
// string, or an array of strings like "0x0a"); flags: an integer from 0
// to 2^64-1 (not 1.5, not "1", not -1), as bpf_map_update_elem takes it.
// Whether the map exists and the sizes fit is for the one who applies it.
#pragma once

#include "support/Bytes.h"
#include "support/Error.h"

#include <cstdint>
#include <string>
#include <string_view>

namespace morpheus::runtime {

enum class ControlOp { Status, History, Update, Delete, Reload, Handover };

struct ControlRequest {
  ControlOp op = ControlOp::Status;
  std::string program; // "" = the socket's only program (or, for status, all)
  std::string map;     // update, delete
  Bytes key;           // update, delete
  Bytes value;         // update
  uint64_t flags = 0;  // update; 0 = BPF_ANY
};

// Parses one request line (without its '\n').
Expected<ControlRequest> parseControlRequest(std::string_view line);

} // namespace morpheus::runtime
