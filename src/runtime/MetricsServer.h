// Serves metrics to Prometheus over HTTP: `GET /metrics` answers the text
// exposition (Content-Type `text/plain; version=0.0.4; charset=utf-8`),
// `GET /` a page linking to it; anything else is 404.
//
// Why it is shaped this way:
// - The page comes from a callback run for each scrape, so the agent can
//   refresh what it reads rather than counts (a map's entries, the running
//   version's ns/packet) just before runtime/Metrics renders it.
// - start() binds before it returns: an address in use or not of this host
//   fails there, naming the address, before the agent attaches anything.
//   The socket has SO_REUSEADDR but not SO_REUSEPORT (cpp-httplib's
//   default): a second agent on the same port must fail, not share the
//   scrapes with the first.
// - Hosts are numeric (IPv4, or IPv6 in brackets): starting never waits on
//   DNS, and what is bound is what was written. `[::]:PORT` also takes
//   IPv4 connections; 0.0.0.0:PORT takes IPv4 only; port 0 takes any free
//   port (port() says which).
// - A client never takes the process down or holds the agent: one thread
//   accepts, `workers` threads answer, none of them the caller's. A client
//   that is silent mid-request or stops reading loses its connection after
//   `timeout`; a request body over `maxRequestBody` is refused (413), and
//   cpp-httplib bounds the request line and each header line (8 KiB).
//   SIGPIPE is blocked in the server's threads, so a client that hangs up
//   mid-answer costs its connection, not the process; the process's own
//   action on SIGPIPE stays what it was (cpp-httplib would ignore it
//   process-wide).
#pragma once

#include "support/Error.h"

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>

namespace httplib {
class Server;
}

namespace morpheus::runtime::metrics {

struct ServerOptions {
  // Threads answering requests (default 2): Prometheus scrapes one page at
  // a time; a second thread answers while the first waits on a slow client.
  size_t workers = 2;
  // A longer request body is refused with 413 (default 4 KiB; a scrape
  // sends none).
  size_t maxRequestBody = 4096;
  // How long a client may be silent mid-request, or not read the answer,
  // before its connection is closed; also how long an idle keep-alive
  // connection stays open, so at most how long the destructor waits
  // (default 5 s).
  std::chrono::seconds timeout{5};
};

class Server {
public:
  // Serves at `address` (`HOST:PORT` or `[IPv6]:PORT`). Errors name the
  // address: `metrics address '127.0.0.1:9100': cannot listen: Address
  // already in use`.
  static Expected<std::unique_ptr<Server>> start(const std::string &address,
                                                 std::function<std::string()> exposition,
                                                 ServerOptions options = {});
  // Stops accepting, finishes the answers under way, joins the threads.
  ~Server();
  Server(const Server &) = delete;
  Server &operator=(const Server &) = delete;

  // The port bound (the one chosen when the address said 0).
  uint16_t port() const { return boundPort; }
  // `HOST:PORT` as bound, for a log line or a scrape target.
  std::string address() const;

private:
  Server(std::unique_ptr<httplib::Server> http, std::string host, uint16_t port);
  void serve();

  std::unique_ptr<httplib::Server> http;
  std::string host; // without brackets
  uint16_t boundPort;
  std::atomic<bool> listenEnded{false};
  std::thread thread;
};

} // namespace morpheus::runtime::metrics
