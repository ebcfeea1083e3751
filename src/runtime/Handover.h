// Taking a control socket over from the agent that serves it (`morpheus
// daemon --take-over`: an upgrade with the data planes running). The next
// agent asks the running one over the socket ({"op":"handover"}); that one
// stops its programs leaving every data plane exactly as it is (runtime/
// Agent::handOver) and releases its claim last. So a claim that succeeds
// after the handover means every link, pin and trampoline is left for the
// next agent's programs to take over, and one agent at a time ever acts
// on a data plane: the claim's lock is what orders them.
#pragma once

#include "runtime/ControlServer.h"

#include <sys/types.h>

#include <chrono>
#include <string>

namespace morpheus::runtime {

struct TakenOver {
  ControlSocketClaim claim;
  pid_t from = 0; // the agent that handed over; 0 when nobody served the socket
};

// Claims `path`, asking the agent holding it to hand over first, and
// waiting at most `limit` for it to release the claim. Nobody at the path
// is not an error (there is nothing to take over); a holder that refuses
// (a `morpheus run`, an agent already stopping) or does not let go in
// time is, naming it.
Expected<TakenOver> takeOverControlSocket(const std::string &path,
                                          std::chrono::milliseconds limit);

} // namespace morpheus::runtime
