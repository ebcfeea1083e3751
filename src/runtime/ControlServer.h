// The daemon's local control API: a Unix stream socket (mode 0600, so only
// root can connect) taking one JSON request per line and answering one JSON
// line each.
//
//   {"op": "update", "map": "policy", "key": "0a000001...", "value": "..."}
//   {"op": "delete", "map": "policy", "key": "..."}
//   {"op": "status"}
//
// Updates bump the program guard and wait for the packets that trusted the
// old version to finish before touching the map (MapUpdater), so the next
// packet already sees the change and no packet sees it beside contents
// folded from before it; then they wake the optimizer loop.
#pragma once

#include "runtime/Optimizer.h"

#include <atomic>
#include <functional>
#include <string>
#include <thread>

namespace morpheus::runtime {

class ControlServer {
public:
  // `onChange` runs (on the server thread) after every applied update;
  // `status` produces the answer to {"op":"status"}.
  static Expected<std::unique_ptr<ControlServer>>
  start(const std::string &path, Optimizer &optimizer, std::function<void()> onChange,
        std::function<std::string()> status);
  ~ControlServer();

  // Longer request lines are refused and the connection closed.
  static constexpr size_t MaxRequestLine = 1 << 20;

  // Handles one request line; public so it can be tested without a socket.
  std::string handle(const std::string &line);

private:
  ControlServer(std::string path, Optimizer &optimizer, int listenFd)
      : path(std::move(path)), optimizer(optimizer), listenFd(listenFd) {}
  void serve();

  std::string path;
  Optimizer &optimizer;
  int listenFd;
  int stopPipe[2] = {-1, -1};
  std::function<void()> onChange;
  std::function<std::string()> status;
  std::thread thread;
};

} // namespace morpheus::runtime
