// The client side of the control socket (runtime/ControlServer), for
// `morpheus status`: one request line out, one reply line back.
#pragma once

#include "support/Error.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <string>

namespace morpheus::runtime {

// Sends `request` to the socket at `path` and returns the reply, parsed.
// Errors name the socket: nobody serving it, no reply within `timeout`,
// a reply that is not JSON, or {"ok": false} (its error).
Expected<nlohmann::json> askControlSocket(const std::string &path, const nlohmann::json &request,
                                          std::chrono::milliseconds timeout);

} // namespace morpheus::runtime
