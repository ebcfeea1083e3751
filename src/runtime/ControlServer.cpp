#include "runtime/ControlServer.h"

#include "backend/bpf/MapIO.h"
#include "backend/bpf/MapUpdater.h"

#include <linux/bpf.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

namespace morpheus::runtime {

Expected<std::unique_ptr<ControlServer>>
ControlServer::start(const std::string &path, Optimizer &optimizer,
                     std::function<void()> onChange, std::function<std::string()> status) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  if (path.size() >= sizeof(address.sun_path))
    return makeError("control socket '{0}': path too long", path);
  std::strcpy(address.sun_path, path.c_str());
  if (auto ec = llvm::sys::fs::create_directories(llvm::sys::path::parent_path(path)))
    return makeSystemError(ec.value(), "control socket '{0}': cannot create its directory",
                           path);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0)
    return makeSystemError(errno, "control socket '{0}'", path);
  unlink(path.c_str());
  // Created with mode 0600 from the start: no window where others connect.
  mode_t old = umask(0177);
  int bound = bind(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address));
  umask(old);
  if (bound || listen(fd, 16)) {
    int err = errno;
    close(fd);
    return makeSystemError(err, "control socket '{0}': cannot listen", path);
  }
  std::unique_ptr<ControlServer> server(new ControlServer(path, optimizer, fd));
  server->onChange = std::move(onChange);
  server->status = std::move(status);
  if (pipe2(server->stopPipe, O_CLOEXEC))
    return makeSystemError(errno, "control socket '{0}'", path);
  server->thread = std::thread([raw = server.get()] { raw->serve(); });
  return server;
}

ControlServer::~ControlServer() {
  if (stopPipe[1] >= 0 && write(stopPipe[1], "x", 1) < 0) {
    // The thread also stops when the listening socket closes below.
  }
  if (thread.joinable())
    thread.join();
  close(listenFd);
  unlink(path.c_str());
  for (int fd : stopPipe)
    if (fd >= 0)
      close(fd);
}

void ControlServer::serve() {
  for (;;) {
    pollfd fds[2] = {{listenFd, POLLIN, 0}, {stopPipe[0], POLLIN, 0}};
    if (poll(fds, 2, -1) < 0 && errno != EINTR)
      return;
    if (fds[1].revents)
      return;
    if (!(fds[0].revents & POLLIN))
      continue;
    int client = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0)
      continue;
    // One client at a time: requests are tiny and the order of updates
    // from different clients is theirs to arrange.
    std::string buffer;
    char chunk[4096];
    for (;;) {
      pollfd clientPoll[2] = {{client, POLLIN, 0}, {stopPipe[0], POLLIN, 0}};
      if (poll(clientPoll, 2, 5000) <= 0 || clientPoll[1].revents)
        break;
      ssize_t got = read(client, chunk, sizeof(chunk));
      if (got <= 0)
        break;
      buffer.append(chunk, got);
      size_t newline;
      while ((newline = buffer.find('\n')) != std::string::npos) {
        std::string reply = handle(buffer.substr(0, newline)) + "\n";
        buffer.erase(0, newline + 1);
        if (write(client, reply.data(), reply.size()) < 0)
          break;
      }
      if (buffer.size() > MaxRequestLine) {
        // Nobody sends a request this long honestly; answer, then hang up
        // rather than buffer without bound.
        std::string reply = nlohmann::json({{"ok", false},
                                            {"error", "request line longer than " +
                                                          std::to_string(MaxRequestLine) +
                                                          " bytes; closing the connection"}})
                                .dump() +
                            "\n";
        if (write(client, reply.data(), reply.size()) < 0) {
          // The connection is closed below either way.
        }
        break;
      }
    }
    close(client);
  }
}

std::string ControlServer::handle(const std::string &line) {
  auto failure = [](const std::string &message) {
    return nlohmann::json({{"ok", false}, {"error", message}}).dump();
  };
  nlohmann::json request = nlohmann::json::parse(line, nullptr, false);
  if (request.is_discarded() || !request.is_object() || !request.contains("op"))
    return failure("expected a JSON object with \"op\"");
  std::string op = request.value("op", "");
  if (op == "status")
    return nlohmann::json({{"ok", true}, {"status", nlohmann::json::parse(status())}}).dump();
  if (op != "update" && op != "delete")
    return failure("unknown op '" + op + "' (update, delete, status)");
  std::string map = request.value("map", "");
  int fd = optimizer.mapFd(map);
  if (map.empty() || fd < 0 || !optimizer.spec().catalog().count(map))
    return failure("unknown map '" + map + "'");
  auto updater = bpf::MapUpdater::forMap(fd, map, &optimizer.guard());
  if (!updater)
    return failure(llvm::toString(updater.takeError()));
  if (!request.contains("key"))
    return failure("map '" + map + "': missing \"key\"");
  auto key = bpf::parseJsonBytes(request["key"], "map '" + map + "' key");
  if (!key)
    return failure(llvm::toString(key.takeError()));
  Error result = Error::success();
  if (op == "update") {
    if (!request.contains("value"))
      return failure("map '" + map + "': missing \"value\"");
    auto value = bpf::parseJsonBytes(request["value"], "map '" + map + "' value");
    if (!value)
      return failure(llvm::toString(value.takeError()));
    result = updater->update(*key, *value, request.value("flags", uint64_t(BPF_ANY)));
  } else {
    result = updater->remove(*key);
  }
  if (result)
    return failure(llvm::toString(std::move(result)));
  if (onChange)
    onChange();
  return nlohmann::json({{"ok", true}, {"version", optimizer.guard().version()}}).dump();
}

} // namespace morpheus::runtime
