#include "runtime/ControlServer.h"

#include "backend/bpf/MapUpdater.h"
#include "support/Excerpt.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/xxhash.h>
#include <nlohmann/json.hpp>
#include <fcntl.h>
#include <poll.h>
#include <sys/file.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>

namespace morpheus::runtime {

namespace {

using nlohmann::json;

// Requests one connection may have answered before the others get a turn:
// a client streaming requests delays nobody by more than this many.
constexpr unsigned RequestsPerTurn = 16;
// How long accepting pauses when the process is out of file descriptors
// (the pending client stays queued; polling on would spin).
constexpr int AcceptPauseMs = 100;

// The name a socket is bound under before it is renamed onto its path.
std::string bindingName(const std::string &path) { return path + ".new"; }
std::string lockName(const std::string &path) { return path + ".lock"; }

// A reply line. Messages quote what clients sent only through
// excerptForMessage; `replace` keeps dump() from throwing whatever a message
// holds.
std::string replyText(const json &reply) {
  return reply.dump(-1, ' ', false, json::error_handler_t::replace);
}

// "process 1234 (morpheus)", as far as /proc tells.
std::string describeProcess(pid_t pid) {
  if (pid <= 0)
    return "another process";
  std::ifstream comm("/proc/" + std::to_string(pid) + "/comm");
  std::string name;
  std::getline(comm, name);
  return "process " + std::to_string(pid) + (name.empty() ? "" : " (" + name + ")");
}

// Who is at a control socket's path.
struct SocketProbe {
  enum State { Absent, Stale, Served, NotASocket } state = Absent;
  pid_t pid = 0; // Served: the serving process, 0 when unknown
};

Expected<SocketProbe> probeSocket(const std::string &path) {
  struct stat info = {};
  if (lstat(path.c_str(), &info) != 0) {
    if (errno == ENOENT)
      return SocketProbe{};
    return makeSystemError(errno, "control socket '{0}'", path);
  }
  if (!S_ISSOCK(info.st_mode))
    return SocketProbe{SocketProbe::NotASocket};
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (fd < 0)
    return makeSystemError(errno, "control socket '{0}'", path);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
  int connected = connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address));
  int err = errno;
  SocketProbe found{SocketProbe::Served};
  if (connected == 0) {
    // The listener's credentials, as they were when it called listen().
    ucred peer = {};
    socklen_t length = sizeof(peer);
    if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &peer, &length) == 0)
      found.pid = peer.pid;
  }
  close(fd);
  if (connected == 0 || err == EAGAIN) // EAGAIN: its backlog is full, it listens
    return found;
  if (err == ECONNREFUSED) // nobody listens: its process is gone
    return SocketProbe{SocketProbe::Stale};
  return makeSystemError(err, "control socket '{0}': cannot tell whether a process serves it",
                         path);
}

// A refusal the caller may tell apart by its code (EADDRINUSE: someone
// else's; EEXIST: not a socket), with the message as it is.
Error refusal(std::errc code, const std::string &message) {
  return llvm::createStringError(std::make_error_code(code), "%s", message.c_str());
}

// The pid the holder of a lock file wrote into it (0 before it has).
pid_t lockHolder(int lockFd) {
  char text[32] = {};
  if (pread(lockFd, text, sizeof(text) - 1, 0) <= 0)
    return 0;
  return pid_t(std::strtol(text, nullptr, 10));
}

} // namespace

std::string defaultControlSocket(const std::string &program, const std::string &pinDir) {
  llvm::SmallString<256> directory(pinDir);
  llvm::sys::fs::make_absolute(directory);
  llvm::sys::path::remove_dots(directory, /*remove_dot_dot=*/true);
  while (directory.size() > 1 && directory.back() == '/')
    directory.pop_back();
  if (directory == "/sys/fs/bpf/morpheus/" + program)
    return "/run/morpheus/" + program + ".sock";
  return llvm::formatv("/run/morpheus/{0}-{1:x-8}.sock", program,
                       uint32_t(llvm::xxh3_64bits(directory.str())))
      .str();
}

// ---- Claiming a path ----

Expected<ControlSocketClaim> ControlSocketClaim::claim(const std::string &path) {
  size_t longest = sizeof(sockaddr_un::sun_path) - 1;
  if (bindingName(path).size() > longest)
    return makeError("control socket '{0}': path too long (at most {1} bytes)", path,
                     longest - (bindingName(path).size() - path.size()));
  llvm::StringRef directory = llvm::sys::path::parent_path(path);
  if (!directory.empty())
    if (auto ec = llvm::sys::fs::create_directories(directory))
      return makeSystemError(ec.value(), "control socket '{0}': cannot create its directory",
                             path);
  std::string lock = lockName(path);
  int fd = -1;
  for (;;) {
    fd = open(lock.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (fd < 0)
      return makeSystemError(errno, "control socket '{0}': cannot open its lock file {1}", path,
                             lock);
    if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
      int err = errno;
      pid_t holder = lockHolder(fd);
      close(fd);
      if (err == EWOULDBLOCK)
        return refusal(std::errc::address_in_use,
                       "control socket '" + path + "' is taken: " + describeProcess(holder) +
                           " holds " + lock + "; stop it or choose another socket path");
      return makeSystemError(err, "control socket '{0}': cannot lock {1}", path, lock);
    }
    // A holder that exits removes the file: a lock taken on a file it
    // removed meanwhile guards nothing, so take the one at the path now.
    struct stat held = {}, named = {};
    if (fstat(fd, &held) == 0 && stat(lock.c_str(), &named) == 0 &&
        held.st_dev == named.st_dev && held.st_ino == named.st_ino)
      break;
    close(fd);
  }
  ControlSocketClaim claimed(path, fd, false);
  std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) != ssize_t(pid.size()))
    return makeSystemError(errno, "control socket '{0}': cannot write {1}", path, lock);
  // Holding the lock, only a server that does not take it (another program,
  // an older Morpheus) can be at the path.
  auto found = probeSocket(path);
  if (!found)
    return found.takeError();
  switch (found->state) {
  case SocketProbe::Absent:
    break;
  case SocketProbe::Stale:
    claimed.stale = true;
    break;
  case SocketProbe::Served:
    return refusal(std::errc::address_in_use,
                   "control socket '" + path + "' is served by " + describeProcess(found->pid) +
                       "; stop it or choose another socket path");
  case SocketProbe::NotASocket:
    return refusal(std::errc::file_exists, "control socket '" + path +
                                               "': the path exists and is not a socket (left "
                                               "as it is)");
  }
  return claimed;
}

ControlSocketClaim::ControlSocketClaim(ControlSocketClaim &&other) noexcept
    : socketPath(std::move(other.socketPath)), lockFd(std::exchange(other.lockFd, -1)),
      stale(other.stale) {}

ControlSocketClaim::~ControlSocketClaim() {
  if (lockFd < 0)
    return;
  // Removed while still held: a process that opened it meanwhile sees the
  // path no longer names what it locked, and retries.
  unlink(lockName(socketPath).c_str());
  close(lockFd);
}

// ---- Serving ----

struct ControlServer::Connection {
  int fd = -1;
  std::string input;    // received; requests from `consumed` on are unanswered
  size_t consumed = 0;
  std::string output;   // the reply not yet sent
  bool peerDone = false; // the client sent EOF: answer what came, then close
  bool closing = false;  // close once `output` is sent (a request too long)
  bool pending = false;  // complete requests wait for the next turn
  uint64_t lastActive = 0;
};

Expected<std::unique_ptr<ControlServer>>
ControlServer::start(ControlSocketClaim claim, Optimizer &optimizer,
                     std::function<void()> onChange, std::function<std::string()> status,
                     ControlServerOptions options) {
  auto answer = [&optimizer, onChange = std::move(onChange),
                 status = std::move(status)](const ControlRequest &request) {
    if (!request.program.empty() && request.program != optimizer.entryName())
      return controlFailure("\"program\": unknown program '" + excerptForMessage(request.program) +
                     "' (this socket serves '" + optimizer.entryName() + "')");
    switch (request.op) {
    case ControlOp::Status:
      return controlReply({{"status", json::parse(status(), nullptr, false)}});
    case ControlOp::History:
      return controlFailure("history: this socket serves one program ('morpheus run'); the agent "
                     "('morpheus daemon') keeps its programs' history");
    case ControlOp::Reload:
      return controlFailure("reload: this socket serves one program ('morpheus run'); the agent "
                     "('morpheus daemon') reloads its configuration");
    case ControlOp::Handover:
      return controlFailure("handover: this socket serves one program ('morpheus run'); only an "
                     "agent ('morpheus daemon') hands over to the next");
    case ControlOp::Update:
    case ControlOp::Delete:
      break;
    }
    return applyMapChange(optimizer, request, onChange);
  };
  return start(std::move(claim), std::move(answer), options);
}

Expected<std::unique_ptr<ControlServer>>
ControlServer::start(ControlSocketClaim claim, ControlAnswer answer, ControlServerOptions options) {
  std::string path = claim.path();
  std::string binding = bindingName(path);
  std::unique_ptr<ControlServer> server(
      new ControlServer(std::move(claim), std::move(answer), options));
  if (pipe2(server->stopPipe, O_CLOEXEC))
    return makeSystemError(errno, "control socket '{0}'", path);
  server->listenFd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  if (server->listenFd < 0)
    return makeSystemError(errno, "control socket '{0}'", path);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, binding.c_str(), sizeof(address.sun_path) - 1);
  unlink(binding.c_str()); // one a crash left between bind and rename: the lock makes it ours
  // Mode 0600 before it listens: nobody else ever connects.
  if (bind(server->listenFd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) ||
      chmod(binding.c_str(), 0600) || listen(server->listenFd, 64)) {
    int err = errno;
    unlink(binding.c_str());
    return makeSystemError(err, "control socket '{0}': cannot listen", path);
  }
  // One step from absent (or stale) to served.
  if (rename(binding.c_str(), path.c_str())) {
    int err = errno;
    unlink(binding.c_str());
    return makeSystemError(err, "control socket '{0}': cannot move {1} there", path, binding);
  }
  struct stat info = {};
  if (lstat(path.c_str(), &info) == 0)
    server->served.emplace(info.st_dev, info.st_ino);
  server->thread = std::thread([raw = server.get()] { raw->serve(); });
  return server;
}

ControlServer::~ControlServer() {
  if (stopPipe[1] >= 0 && write(stopPipe[1], "x", 1) < 0) {
    // The thread also stops when the listening socket closes below.
  }
  if (thread.joinable())
    thread.join();
  struct stat info = {};
  if (served && lstat(claim.path().c_str(), &info) == 0 &&
      *served == std::make_pair(info.st_dev, info.st_ino))
    unlink(claim.path().c_str());
  if (listenFd >= 0)
    close(listenFd);
  for (int fd : stopPipe)
    if (fd >= 0)
      close(fd);
}

void ControlServer::serve() {
  std::vector<Connection> connections;
  std::vector<pollfd> polled;
  uint64_t turn = 0; // orders connections by their last activity
  bool acceptPaused = false;
  for (;;) {
    polled.clear();
    polled.push_back({stopPipe[0], POLLIN, 0});
    polled.push_back({acceptPaused ? -1 : listenFd, POLLIN, 0});
    bool pending = false;
    for (const Connection &connection : connections) {
      // While its reply is unsent a connection reads nothing more.
      polled.push_back({connection.fd, short(connection.output.empty() ? POLLIN : POLLOUT), 0});
      pending |= connection.pending;
    }
    int timeout = pending ? 0 : acceptPaused ? AcceptPauseMs : -1;
    if (poll(polled.data(), polled.size(), timeout) < 0 && errno != EINTR && errno != ENOMEM)
      break;
    if (polled[0].revents)
      break;
    ++turn;
    acceptPaused = false;
    size_t kept = 0;
    for (size_t i = 0; i < connections.size(); ++i) {
      Connection &connection = connections[i];
      short events = polled[i + 2].revents;
      if ((events || connection.pending) && !advance(connection, events, turn)) {
        close(connection.fd);
        continue;
      }
      if (kept != i)
        connections[kept] = std::move(connection);
      ++kept;
    }
    connections.resize(kept);
    if (polled[1].revents & POLLIN)
      acceptPaused = !acceptClients(connections, turn);
  }
  for (const Connection &connection : connections)
    close(connection.fd);
}

bool ControlServer::acceptClients(std::vector<Connection> &connections, uint64_t turn) {
  for (;;) {
    int fd = accept4(listenFd, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0)
      return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ||
             errno == ECONNABORTED;
    if (!connections.empty() && connections.size() >= options.maxConnections) {
      auto idlest = std::min_element(connections.begin(), connections.end(),
                                     [](const Connection &a, const Connection &b) {
                                       return a.lastActive < b.lastActive;
                                     });
      if (idlest->output.empty()) {
        std::string notice =
            controlFailure("connection closed: " + std::to_string(options.maxConnections) +
                    " connections are served at once and this one was idle the longest") +
            "\n";
        if (send(idlest->fd, notice.data(), notice.size(), MSG_NOSIGNAL | MSG_DONTWAIT) < 0) {
          // Closed below either way.
        }
      }
      close(idlest->fd);
      connections.erase(idlest);
    }
    Connection connection;
    connection.fd = fd;
    connection.lastActive = turn;
    connections.push_back(std::move(connection));
  }
}

bool ControlServer::advance(Connection &connection, short events, uint64_t turn) {
  if (!connection.output.empty()) {
    if (events && !sendReply(connection, turn))
      return false;
  } else if (!connection.pending && (events & (POLLIN | POLLHUP | POLLERR))) {
    // Nothing more is read while complete requests wait their turn.
    char chunk[1 << 16];
    ssize_t got = recv(connection.fd, chunk, sizeof(chunk), MSG_DONTWAIT);
    if (got > 0) {
      connection.input.append(chunk, got);
      connection.lastActive = turn;
    } else if (got == 0) {
      connection.peerDone = true;
    } else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
      return false;
    }
  }
  if (!answer(connection, turn))
    return false;
  bool finished = connection.closing || connection.peerDone;
  return !(finished && connection.output.empty() && !connection.pending);
}

bool ControlServer::answer(Connection &connection, uint64_t turn) {
  connection.pending = false;
  for (unsigned answered = 0; connection.output.empty() && !connection.closing; ++answered) {
    std::string_view unanswered(connection.input);
    unanswered.remove_prefix(connection.consumed);
    size_t length = unanswered.find('\n');
    if (length == std::string_view::npos && connection.peerDone && !unanswered.empty())
      length = unanswered.size(); // the last request, sent without its '\n'
    if (length == std::string_view::npos) {
      if (unanswered.size() <= options.maxRequestLine)
        break; // the rest of it is still coming
      length = unanswered.size();
    }
    if (answered == RequestsPerTurn) {
      connection.pending = true;
      break;
    }
    if (length > options.maxRequestLine) {
      // Nobody sends a request this long honestly; answer, then hang up
      // rather than buffer without bound.
      connection.output = controlFailure("request line longer than " +
                                  std::to_string(options.maxRequestLine) +
                                  " bytes; closing the connection") +
                          "\n";
      connection.closing = true;
    } else {
      connection.output = handle(unanswered.substr(0, length)) + "\n";
    }
    connection.consumed += std::min(length + 1, unanswered.size());
    if (!sendReply(connection, turn))
      return false;
  }
  connection.input.erase(0, connection.consumed);
  connection.consumed = 0;
  return true;
}

bool ControlServer::sendReply(Connection &connection, uint64_t turn) {
  while (!connection.output.empty()) {
    // MSG_NOSIGNAL: a client that hung up is an EPIPE here, not a SIGPIPE.
    ssize_t sent = send(connection.fd, connection.output.data(), connection.output.size(),
                        MSG_NOSIGNAL | MSG_DONTWAIT);
    if (sent < 0) {
      if (errno == EINTR)
        continue;
      return errno == EAGAIN || errno == EWOULDBLOCK; // the rest when it can take it
    }
    connection.output.erase(0, sent);
    connection.lastActive = turn;
  }
  return true;
}

// ---- Requests ----

std::string ControlServer::handle(std::string_view line) {
  auto request = parseControlRequest(line);
  if (!request)
    return controlFailure(llvm::toString(request.takeError()));
  return answerRequest(*request);
}

std::string controlReply(json fields) {
  fields["ok"] = true;
  return replyText(fields);
}

std::string controlFailure(const std::string &message) {
  return replyText({{"ok", false}, {"error", message}});
}

std::string applyMapChange(Optimizer &optimizer, const ControlRequest &request,
                           const std::function<void()> &onChange) {
  const core::TableCatalog &catalog = optimizer.spec().catalog();
  int fd = optimizer.mapFd(request.map);
  if (fd < 0 || !catalog.count(request.map)) {
    std::vector<std::string> names;
    for (const auto &[name, info] : catalog)
      names.push_back(name);
    return controlFailure("\"map\": unknown map '" + excerptForMessage(request.map) +
                   "' (the program's maps: " + llvm::join(names, ", ") + ")");
  }
  auto updater = bpf::MapUpdater::forMap(fd, request.map, &optimizer.guard());
  if (!updater)
    return controlFailure(llvm::toString(updater.takeError()));
  Error result = request.op == ControlOp::Update
                     ? updater->update(request.key, request.value, request.flags)
                     : updater->remove(request.key);
  if (result)
    return controlFailure(llvm::toString(std::move(result)));
  if (onChange)
    onChange();
  return controlReply({{"version", optimizer.guard().version()}});
}

} // namespace morpheus::runtime
