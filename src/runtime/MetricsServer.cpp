// runtime/MetricsServer.h over cpp-httplib (Debian's libcpp-httplib).
#include "runtime/MetricsServer.h"

#include <httplib.h>

#include <arpa/inet.h>
#include <charconv>
#include <csignal>
#include <pthread.h>
#include <sys/socket.h>

namespace morpheus::runtime::metrics {

namespace {

constexpr const char *ExpositionType = "text/plain; version=0.0.4; charset=utf-8";

constexpr const char *IndexPage =
    "<!DOCTYPE html>\n<html><head><meta charset=\"utf-8\"><title>Morpheus</title></head>\n"
    "<body><h1>Morpheus</h1><p><a href=\"/metrics\">Metrics</a></p></body></html>\n";

struct ListenAddress {
  std::string host; // without brackets
  uint16_t port;
};

Expected<ListenAddress> parseAddress(const std::string &address) {
  auto fail = [&](const std::string &why) {
    return makeError("metrics address '{0}': {1}", address, why);
  };
  ListenAddress parsed;
  std::string port;
  if (address.starts_with('[')) {
    size_t close = address.find(']');
    if (close == std::string::npos || address.compare(close + 1, 1, ":") != 0)
      return fail("expected [IPv6]:PORT");
    parsed.host = address.substr(1, close - 1);
    port = address.substr(close + 2);
    in6_addr ignored;
    if (inet_pton(AF_INET6, parsed.host.c_str(), &ignored) != 1)
      return fail("'" + parsed.host + "' is not an IPv6 address");
  } else {
    size_t colon = address.rfind(':');
    if (colon == std::string::npos)
      return fail("expected HOST:PORT or [IPv6]:PORT");
    parsed.host = address.substr(0, colon);
    port = address.substr(colon + 1);
    in_addr ignored;
    if (inet_pton(AF_INET, parsed.host.c_str(), &ignored) != 1)
      return fail("'" + parsed.host +
                  "' is not an IPv4 address (names are not resolved; IPv6 goes in brackets, "
                  "[::1]:PORT)");
  }
  auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), parsed.port);
  if (port.empty() || ec != std::errc() || end != port.data() + port.size())
    return fail("'" + port + "' is not a port (0 to 65535, 0 for any free one)");
  return parsed;
}

// cpp-httplib's default sets SO_REUSEPORT, which would let a second server
// bind a port in use and share its connections.
void reuseAddressOnly(int fd) {
  int yes = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &yes, sizeof yes);
}

} // namespace

Expected<std::unique_ptr<Server>> Server::start(const std::string &address,
                                                std::function<std::string()> exposition,
                                                ServerOptions options) {
  auto parsed = parseAddress(address);
  if (!parsed)
    return parsed.takeError();
  // cpp-httplib's constructor ignores SIGPIPE for the whole process; the
  // process keeps the disposition it had, and the server's own threads
  // block SIGPIPE instead (serve()).
  struct sigaction pipeAction;
  sigaction(SIGPIPE, nullptr, &pipeAction);
  auto http = std::make_unique<httplib::Server>();
  sigaction(SIGPIPE, &pipeAction, nullptr);
  http->set_socket_options(reuseAddressOnly);
  http->set_read_timeout(options.timeout);
  http->set_write_timeout(options.timeout);
  http->set_keep_alive_timeout(options.timeout.count());
  http->set_payload_max_length(options.maxRequestBody);
  size_t workers = options.workers;
  http->new_task_queue = [workers] { return new httplib::ThreadPool(workers); };
  http->Get("/metrics", [exposition = std::move(exposition)](const httplib::Request &,
                                                             httplib::Response &response) {
    response.set_content(exposition(), ExpositionType);
  });
  http->Get("/", [](const httplib::Request &, httplib::Response &response) {
    response.set_content(IndexPage, "text/html; charset=utf-8");
  });

  // cpp-httplib reports a failed bind as false (or -1) alone; the errno of
  // the bind() or listen() that failed is still set.
  errno = 0;
  int port = parsed->port;
  bool bound = port == 0 ? (port = http->bind_to_any_port(parsed->host)) >= 0
                         : http->bind_to_port(parsed->host, port);
  if (!bound) {
    if (errno != 0)
      return makeSystemError(errno, "metrics address '{0}': cannot listen", address);
    return makeError("metrics address '{0}': cannot listen", address);
  }
  std::unique_ptr<Server> server(new Server(std::move(http), parsed->host, uint16_t(port)));
  server->thread = std::thread([raw = server.get()] { raw->serve(); });
  return server;
}

Server::Server(std::unique_ptr<httplib::Server> http, std::string host, uint16_t port)
    : http(std::move(http)), host(std::move(host)), boundPort(port) {}

void Server::serve() {
  // The answering threads are made by this one (new_task_queue runs in
  // listen_after_bind) and inherit the mask.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  http->listen_after_bind();
  listenEnded = true;
}

Server::~Server() {
  // stop() does nothing before listen_after_bind() has begun to run.
  while (!http->is_running() && !listenEnded)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  http->stop();
  thread.join();
}

std::string Server::address() const {
  std::string port = std::to_string(boundPort);
  return host.find(':') == std::string::npos ? host + ":" + port : "[" + host + "]:" + port;
}

} // namespace morpheus::runtime::metrics
