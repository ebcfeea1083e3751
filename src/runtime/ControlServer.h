// The daemon's local control API: a Unix stream socket (mode 0600, so only
// root can connect) taking one JSON request per line and answering one JSON
// line each, in order; a connection may carry any number of requests.
//
//   {"op": "update", "map": "policy", "key": "0a000001...", "value": "..."}
//   {"op": "delete", "map": "policy", "key": "..."}
//   {"op": "status"}
//
// Requests are checked whole first (ControlRequest.h): whatever a client
// sends gets a reply, an error naming the field when it is wrong; nothing
// a client sends or fails to read ends the process (replies are sent with
// MSG_NOSIGNAL: a client that hung up costs its connection, not a SIGPIPE).
// Updates bump the program guard and wait for the packets that trusted the
// old version to finish before touching the map (MapUpdater), so the next
// packet already sees the change and no packet sees it beside contents
// folded from before it; then they wake the optimizer loop.
//
// Concurrency: one thread runs an event loop over non-blocking connections,
// each with its own input and output buffer, so a client that is slow,
// idle or stopped never delays another; requests are applied one at a time
// on that thread (map changes stay serialized). Memory is bounded: a
// connection reads no further while its reply is unsent, a request line
// longer than maxRequestLine is refused, and at most maxConnections are
// open (a new client closes the one idle the longest).
//
// Ownership: a socket path belongs to one live process. Claiming it takes
// a lock file beside it (`PATH.lock`, flock, held for the server's life,
// holding the owner's pid); a path another process holds or serves is
// refused with that process's pid; a socket left by a process that died is
// replaced. The socket is bound under a temporary name and renamed onto the
// path once it is served, so the path exists exactly while someone serves.
#pragma once

#include "runtime/ControlRequest.h"
#include "runtime/Optimizer.h"

#include <nlohmann/json.hpp>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include <sys/types.h>

namespace morpheus::runtime {

struct ControlServerOptions {
  // Connections open at once (default 32); a client connecting beyond it
  // closes the connection idle the longest (told so when no reply of its
  // own is half sent).
  size_t maxConnections = 32;
  // A longer request line gets an error reply and its connection is closed
  // (default 1 MiB).
  size_t maxRequestLine = size_t(1) << 20;
};

// A control socket path reserved for this process, before anything is
// loaded or attached: a run that cannot have its socket touches nothing.
class ControlSocketClaim {
public:
  // Takes PATH.lock; refuses (EADDRINUSE, naming the pid when it can) a
  // path another process holds or serves, and a path that is not a socket.
  static Expected<ControlSocketClaim> claim(const std::string &path);
  ControlSocketClaim(ControlSocketClaim &&other) noexcept;
  ControlSocketClaim &operator=(ControlSocketClaim &&) = delete;
  ~ControlSocketClaim(); // releases the lock (and removes PATH.lock)

  const std::string &path() const { return socketPath; }
  // A socket no process serves was found at the path (a crash left it):
  // serving replaces it.
  bool replacesStale() const { return stale; }

private:
  ControlSocketClaim(std::string path, int lockFd, bool stale)
      : socketPath(std::move(path)), lockFd(lockFd), stale(stale) {}

  std::string socketPath;
  int lockFd = -1;
  bool stale = false;
};

// `morpheus run`'s socket when none is given. One instance is one pin
// directory (its maps, guard and links), so the socket follows it: the
// default pin directory /sys/fs/bpf/morpheus/PROGRAM serves at
// /run/morpheus/PROGRAM.sock, any other at /run/morpheus/PROGRAM-HASH.sock
// (HASH: 8 hex digits of the directory's absolute path), so two programs of
// one name with their own pin directories never meet on one socket.
std::string defaultControlSocket(const std::string &program, const std::string &pinDir);

// The answer to one checked request, as a reply line (controlReply,
// controlFailure). Runs on the server thread, one request at a time.
using ControlAnswer = std::function<std::string(const ControlRequest &)>;

// Reply lines: {"ok": true, FIELDS...} and {"ok": false, "error": MESSAGE}.
std::string controlReply(nlohmann::json fields);
std::string controlFailure(const std::string &message);

// Applies an update or delete to `optimizer`'s map through its guard
// (MapUpdater), then runs `onChange`; the reply names an unknown map with
// the program's maps.
std::string applyMapChange(Optimizer &optimizer, const ControlRequest &request,
                           const std::function<void()> &onChange);

class ControlServer {
public:
  // Serves the claimed path, each request answered by `answer`.
  static Expected<std::unique_ptr<ControlServer>>
  start(ControlSocketClaim claim, ControlAnswer answer, ControlServerOptions options = {});
  // Serves one program (`morpheus run`): updates applied to `optimizer`'s
  // maps, `onChange` run after each (on the server thread); `status`
  // produces the answer to {"op":"status"}; a request naming another
  // program, and reload, are refused.
  static Expected<std::unique_ptr<ControlServer>>
  start(ControlSocketClaim claim, Optimizer &optimizer, std::function<void()> onChange,
        std::function<std::string()> status, ControlServerOptions options = {});
  ~ControlServer(); // stops serving, removes the socket, releases the claim

  // Answers one request line (without its '\n'); never throws. Public so it
  // can be tested without a socket.
  std::string handle(std::string_view line);

private:
  struct Connection;
  ControlServer(ControlSocketClaim claim, ControlAnswer answer, ControlServerOptions options)
      : claim(std::move(claim)), answerRequest(std::move(answer)), options(options) {}
  void serve();
  // Accepts every waiting client; false when the process is out of file
  // descriptors (accepting pauses a moment).
  bool acceptClients(std::vector<Connection> &connections, uint64_t turn);
  // Reads, answers and sends what `connection` is ready for; false when it
  // is to be closed.
  bool advance(Connection &connection, short events, uint64_t turn);
  // Answers its complete requests while each reply goes out at once, up to
  // a turn's share; false when the client is gone.
  bool answer(Connection &connection, uint64_t turn);
  // Sends what the socket takes of the pending reply; false when the client
  // is gone.
  bool sendReply(Connection &connection, uint64_t turn);

  ControlSocketClaim claim;
  ControlAnswer answerRequest;
  ControlServerOptions options;
  int listenFd = -1;
  // The file the socket was renamed onto: removed on exit only if still
  // there (never a socket someone else has put at the path since).
  std::optional<std::pair<dev_t, ino_t>> served;
  int stopPipe[2] = {-1, -1};
  std::thread thread;
};

} // namespace morpheus::runtime
