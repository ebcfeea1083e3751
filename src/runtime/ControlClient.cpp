#include "runtime/ControlClient.h"

#include "support/FileDescriptor.h"

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace morpheus::runtime {

Expected<nlohmann::json> askControlSocket(const std::string &path, const nlohmann::json &request,
                                          std::chrono::milliseconds timeout) {
  sockaddr_un address = {};
  if (path.size() >= sizeof(address.sun_path))
    return makeError("control socket '{0}': path longer than a socket's {1} bytes", path,
                     sizeof(address.sun_path) - 1);
  FileDescriptor fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (!fd.valid())
    return makeSystemError(errno, "control socket '{0}'", path);
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  if (connect(fd.get(), reinterpret_cast<sockaddr *>(&address), sizeof(address)))
    return makeSystemError(errno, "control socket '{0}': nobody serves it (is the agent "
                                  "running, and is this its --socket?)",
                           path);
  std::string line = request.dump() + "\n";
  for (size_t sent = 0; sent < line.size();) {
    ssize_t n = send(fd.get(), line.data() + sent, line.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR)
      continue;
    if (n < 0)
      return makeSystemError(errno, "control socket '{0}': sending the request", path);
    sent += size_t(n);
  }
  std::string reply;
  auto deadline = std::chrono::steady_clock::now() + timeout;
  while (reply.find('\n') == std::string::npos) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
        deadline - std::chrono::steady_clock::now());
    pollfd ready = {fd.get(), POLLIN, 0};
    int polled = left.count() > 0 ? poll(&ready, 1, int(left.count())) : 0;
    if (polled < 0 && errno == EINTR)
      continue;
    if (polled <= 0)
      return makeError("control socket '{0}': no reply within {1} ms", path, timeout.count());
    char chunk[4096];
    ssize_t n = recv(fd.get(), chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR)
      continue;
    if (n <= 0)
      return makeError("control socket '{0}': closed before replying", path);
    reply.append(chunk, size_t(n));
  }
  reply.resize(reply.find('\n'));
  nlohmann::json parsed = nlohmann::json::parse(reply, nullptr, /*allow_exceptions=*/false);
  if (parsed.is_discarded() || !parsed.is_object())
    return makeError("control socket '{0}': a reply that is not a JSON object", path);
  auto ok = parsed.find("ok");
  if (ok == parsed.end() || !ok->is_boolean())
    return makeError("control socket '{0}': a reply without \"ok\"", path);
  if (!ok->get<bool>()) {
    auto error = parsed.find("error");
    return makeError("control socket '{0}': {1}", path,
                     error != parsed.end() && error->is_string() ? error->get<std::string>()
                                                                 : "refused, no reason given");
  }
  return parsed;
}

} // namespace morpheus::runtime
