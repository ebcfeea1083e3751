// The control socket (runtime/ControlServer) served in process for
// examples/policy_fwd.bpf.c, driven by raw clients that do what real ones
// may: send every JSON type in every field, hang up before their reply,
// dribble a byte at a time, sit idle, never read, or start a second server
// on the same path. Whatever they do, the server answers the others and
// never ends the process (a SIGPIPE here would end this test binary).
#include "ChildProcess.h"
#include "KernelSupport.h"
#include "PolicyFwd.h"
#include "runtime/ControlServer.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <nlohmann/json.hpp>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>
#include <thread>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;
using nlohmann::json;

// A directory of the test's own for socket paths, removed with its content.
class SocketDir {
public:
  SocketDir() {
    char pattern[] = "/tmp/morpheus-test-socket-XXXXXX";
    dir = mkdtemp(pattern) ? pattern : "";
  }
  ~SocketDir() { std::filesystem::remove_all(dir); }
  std::string path(const std::string &name) const { return dir + "/" + name; }

private:
  std::string dir;
};

// One connection of a client whose every byte is the test's choice.
class RawClient {
public:
  explicit RawClient(const std::string &path) : fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0)) {
    sockaddr_un address = unixAddress(path);
    connected = connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)) == 0;
  }
  ~RawClient() { hangUp(); }

  bool connected = false;

  bool send(std::string_view bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      ssize_t wrote = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
      if (wrote <= 0)
        return false;
      sent += wrote;
    }
    return true;
  }
  // Sends what the socket takes at once (a client that never reads its
  // replies would wait forever for the rest).
  void sendWhatFits(std::string_view bytes) {
    for (size_t sent = 0; sent < bytes.size();) {
      ssize_t wrote =
          ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
      if (wrote <= 0)
        return;
      sent += wrote;
    }
  }
  // The next line the server sends, without its '\n'; none when nothing
  // comes within `limit` or the server closed the connection.
  std::optional<std::string> line(std::chrono::milliseconds limit = 10s) {
    auto until = std::chrono::steady_clock::now() + limit;
    for (;;) {
      if (size_t end = buffered.find('\n'); end != std::string::npos) {
        std::string found = buffered.substr(0, end);
        buffered.erase(0, end + 1);
        return found;
      }
      auto left = std::chrono::duration_cast<std::chrono::milliseconds>(
          until - std::chrono::steady_clock::now());
      pollfd ready = {fd, POLLIN, 0};
      if (left.count() <= 0 || poll(&ready, 1, int(left.count())) <= 0)
        return std::nullopt;
      char chunk[4096];
      ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
      if (got <= 0)
        return std::nullopt;
      buffered.append(chunk, got);
    }
  }
  // The next reply parsed; an object either way ({"no_reply": TEXT} when
  // none came or it is not JSON), so a test can ask it for "ok".
  json reply(std::chrono::milliseconds limit = 10s) {
    std::optional<std::string> text = line(limit);
    json parsed = text ? json::parse(*text, nullptr, false) : json();
    return parsed.is_object() ? parsed : json{{"no_reply", text.value_or("")}};
  }
  json ask(const std::string &request) {
    return send(request + "\n") ? reply() : json{{"cannot_send", request}};
  }
  // Whether the server closed its side (EOF within `limit`).
  bool closedByServer(std::chrono::milliseconds limit) {
    auto until = std::chrono::steady_clock::now() + limit;
    while (std::chrono::steady_clock::now() < until) {
      pollfd ready = {fd, POLLIN, 0};
      if (poll(&ready, 1, 50) <= 0)
        continue;
      char chunk[4096];
      ssize_t got = recv(fd, chunk, sizeof(chunk), 0);
      if (got <= 0)
        return true;
      buffered.append(chunk, got);
    }
    return false;
  }
  void hangUp() {
    if (fd >= 0)
      close(fd);
    fd = -1;
  }
  int fd;

private:
  std::string buffered;
};

// policy_fwd optimized in this process, its socket served by a ControlServer.
class Served {
public:
  explicit Served(const std::string &tag, runtime::ControlServerOptions options = {})
      : pins(tag), fwd(pins.path()), socketPath(sockets.path("control.sock")) {
    if (!fwd.ok())
      return;
    auto claim = runtime::ControlSocketClaim::claim(socketPath);
    EXPECT_THAT_EXPECTED(claim, llvm::Succeeded());
    if (!claim)
      return;
    runtime::Optimizer &opt = fwd.opt();
    auto started = runtime::ControlServer::start(
        std::move(*claim), opt, [this] { ++changes; },
        [&opt] { return json({{"guard_version", opt.guard().version()}}).dump(); }, options);
    EXPECT_THAT_EXPECTED(started, llvm::Succeeded());
    if (started)
      server = std::move(*started);
  }
  bool ok() const { return server != nullptr; }
  uint64_t guardVersion() { return fwd.opt().guard().version(); }
  // The config map's entry 0, as the program reads it.
  Bytes configEntry() {
    Bytes value(sizeof(config));
    uint32_t zero = 0;
    EXPECT_EQ(bpf_map_lookup_elem(fwd.opt().mapFd("config"), &zero, value.data()), 0);
    return value;
  }

  SocketDir sockets;
  PinDir pins;
  PolicyFwd fwd;
  std::string socketPath;
  std::atomic<unsigned> changes{0};
  std::unique_ptr<runtime::ControlServer> server;
};

bool isAscii(const std::string &text) {
  return std::all_of(text.begin(), text.end(),
                     [](char c) { return static_cast<unsigned char>(c) < 0x80; });
}

// A request line from (field, JSON text) pairs in order, so a test can put
// any text, even what nlohmann cannot hold (2^64), in any field.
std::string requestLine(const std::vector<std::pair<std::string, std::string>> &fields) {
  std::string line = "{";
  for (const auto &[name, value] : fields)
    line += (line.size() > 1 ? "," : "") + json(name).dump() + ":" + value;
  return line + "}";
}

// Every JSON type, and the values of each type that mean something to one
// field or another (an integer in and out of range, hex of odd length,
// non-hex and non-ASCII text, arrays of the wrong items).
const std::vector<std::string> &jsonOfEveryType() {
  static const std::vector<std::string> values = {
      "null", "true", "false", "0", "7", "-1", "1.5", "1e300", "18446744073709551616",
      "\"\"", "\"x\"", "\"\\u00e9t\\u00e9\"", "\"\xc3\xa9\"", "\"\\u0000\"", "\"0a0\"", "\"zz\"",
      "\"0a\"", "\"0x\"", "[]", "[1]", "[\"0x0a\"]", "[\"0x0a\", null]", "[[\"0a\"]]", "{}",
      "{\"op\":\"status\"}"};
  return values;
}

// A malformed request of every JSON type in every field of every op, each
// missing field, an unknown field, every type as the whole request, text
// that is not JSON or not UTF-8, nesting, and a line over the limit: each
// gets an error reply naming what is wrong, on one connection or its own,
// nothing changes, and the server serves valid requests afterwards.
TEST(ControlServer, EveryMalformedRequestIsAnsweredNamingItsField) {
  runtime::ControlServerOptions options;
  options.maxRequestLine = 1 << 16;
  Served served("ctlmalformed", options);
  ASSERT_TRUE(served.ok());
  uint64_t version = served.guardVersion();
  Bytes config = served.configEntry();

  struct Case {
    std::string line;
    std::string names; // what the error must name
  };
  std::vector<Case> cases;
  using Fields = std::vector<std::pair<std::string, std::string>>;
  // A valid request of each op, every field given.
  const std::vector<std::pair<std::string, Fields>> valid = {
      {"status", {{"op", "\"status\""}}},
      {"delete", {{"op", "\"delete\""}, {"map", "\"policy\""}, {"key", "\"0a00000100500011\""}}},
      {"update",
       {{"op", "\"update\""},
        {"map", "\"config\""},
        {"key", "\"00000000\""},
        {"value", "\"0200000001000000\""},
        {"flags", "0"}}}};
  for (const auto &[op, fields] : valid) {
    for (size_t field = 0; field < fields.size(); ++field) {
      const std::string &name = fields[field].first;
      for (const std::string &value : jsonOfEveryType()) {
        // Values the field takes are not malformed (key and value of a
        // size the map does not have are tested below).
        bool takes = (name == "flags" && (value == "0" || value == "7")) ||
                     ((name == "key" || name == "value") &&
                      (value == "\"0a\"" || value == "[\"0x0a\"]"));
        if (takes)
          continue;
        auto changed = fields;
        changed[field].second = value;
        cases.push_back({requestLine(changed), "\"" + name + "\""});
      }
      if (name != "flags") {
        auto missing = fields;
        missing.erase(missing.begin() + field);
        cases.push_back({requestLine(missing), "\"" + name + "\""});
      }
    }
    auto extra = fields;
    extra.push_back({"flag", "1"});
    cases.push_back({requestLine(extra), "\"flag\""});
  }
  for (const std::string &value : jsonOfEveryType())
    if (value != "{\"op\":\"status\"}")
      cases.push_back({value, value == "{}" ? "\"op\"" : "JSON object"});
  for (const std::string &text :
       {std::string(""), std::string("{"), std::string("op=status"), std::string("\xff\xfe{}"),
        std::string("{\"op\":\"\xff\"}"), std::string("{\"op\":\"status\"} {}"),
        std::string(4000, '[') + std::string(4000, ']')})
    cases.push_back({text, "JSON object"});
  cases.push_back({requestLine({{"op", "\"update\""},
                                {"map", "\"config\""},
                                {"key", "\"00\""},
                                {"value", "\"0200000001000000\""}}),
                   "key has 1 bytes"});
  cases.push_back({requestLine({{"op", "\"update\""},
                                {"map", "\"config\""},
                                {"key", "\"00000000\""},
                                {"value", "\"02\""}}),
                   "value has 1 bytes"});
  ASSERT_GT(cases.size(), 250u) << "every type in every field of every op";

  // All on one connection, in order, then each on a connection of its own.
  RawClient together(served.socketPath);
  ASSERT_TRUE(together.connected);
  std::string all;
  for (const Case &bad : cases)
    all += bad.line + "\n";
  ASSERT_TRUE(together.send(all));
  for (const Case &bad : cases) {
    std::optional<std::string> text = together.line();
    ASSERT_TRUE(text) << "no reply to " << bad.line;
    json reply = json::parse(*text, nullptr, false);
    EXPECT_FALSE(reply.value("ok", true)) << bad.line << " -> " << *text;
    std::string error = reply.value("error", "");
    EXPECT_NE(error.find(bad.names), std::string::npos) << bad.line << " -> " << *text;
    EXPECT_TRUE(isAscii(*text)) << "a reply quotes what it got as \\xNN: " << *text;
  }
  for (size_t i = 0; i < cases.size(); i += 7) {
    RawClient alone(served.socketPath);
    json reply = alone.ask(cases[i].line);
    EXPECT_FALSE(reply.value("ok", true)) << cases[i].line << " -> " << reply.dump();
  }

  // The old parser took "flags":1.5 as 1.
  RawClient client(served.socketPath);
  json fractional = client.ask(requestLine({{"op", "\"update\""},
                                            {"map", "\"config\""},
                                            {"key", "\"00000000\""},
                                            {"value", "\"0200000001000000\""},
                                            {"flags", "1.5"}}));
  EXPECT_EQ(fractional.value("error", ""),
            "\"flags\": expected an integer from 0 to 18446744073709551615, got the number 1.5");

  // A line over the limit: an error, then the server hangs up.
  RawClient flood(served.socketPath);
  ASSERT_TRUE(flood.send(std::string(options.maxRequestLine + 10, ' ')));
  json tooLong = flood.reply();
  EXPECT_NE(tooLong.value("error", "").find("request line longer than"), std::string::npos)
      << tooLong.dump();
  EXPECT_TRUE(flood.closedByServer(10s));

  EXPECT_EQ(served.guardVersion(), version) << "a malformed request bumped the guard";
  EXPECT_EQ(served.configEntry(), config) << "a malformed request changed a map";
  EXPECT_EQ(served.changes, 0u);

  // Still serving, on the connection that sent them all and on a new one.
  json status = together.ask("{\"op\":\"status\"}");
  EXPECT_TRUE(status.value("ok", false)) << status.dump();
  json updated = client.ask(requestLine({{"op", "\"update\""},
                                         {"map", "\"config\""},
                                         {"key", "\"00000000\""},
                                         {"value", "\"0200000001000000\""},
                                         {"flags", "0"}}));
  ASSERT_TRUE(updated.value("ok", false)) << updated.dump();
  EXPECT_GT(updated["version"].get<uint64_t>(), version);
  EXPECT_EQ(served.configEntry(), (Bytes{2, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_EQ(served.changes, 1u);
}

// Several requests on one connection are answered in order; the last one
// may come without its '\n' before the client shuts its side.
TEST(ControlServer, RequestsOnOneConnectionAreAnsweredInOrder) {
  Served served("ctlorder");
  ASSERT_TRUE(served.ok());
  RawClient client(served.socketPath);
  ASSERT_TRUE(client.send("{\"op\":\"status\"}\n{\"op\":\"nosuch\"}\n"
                          "{\"op\":\"update\",\"map\":\"config\",\"key\":\"00000000\","
                          "\"value\":\"0200000001000000\"}\n{\"op\":\"status\"}"));
  ASSERT_EQ(shutdown(client.fd, SHUT_WR), 0);
  json first = client.reply(), second = client.reply(), third = client.reply(),
       fourth = client.reply();
  EXPECT_TRUE(first.value("ok", false)) << first.dump();
  EXPECT_NE(second.value("error", "").find("unknown op 'nosuch'"), std::string::npos)
      << second.dump();
  ASSERT_TRUE(third.value("ok", false)) << third.dump();
  EXPECT_EQ(fourth["status"]["guard_version"], third["version"]) << fourth.dump();
  EXPECT_TRUE(client.closedByServer(10s));
}

// A client that hangs up before its replies are sent (never reading them,
// so they cannot all be sent before it closes) costs its connection: the
// server's next send fails with EPIPE, not a SIGPIPE that would end this
// process, and the next client is served.
TEST(ControlServer, ClientsThatHangUpBeforeTheirReplyCostOnlyTheirConnection) {
  Served served("ctlhangup");
  ASSERT_TRUE(served.ok());
  std::string many;
  for (int i = 0; i < 20000; ++i)
    many += "{\"op\":\"status\"}\n";
  for (int round = 0; round < 3; ++round) {
    RawClient rude(served.socketPath);
    ASSERT_TRUE(rude.connected);
    rude.sendWhatFits(many);
    if (round == 1) {
      // An abortive close (RST) this time.
      linger abort = {1, 0};
      setsockopt(rude.fd, SOL_SOCKET, SO_LINGER, &abort, sizeof(abort));
    }
    if (round == 2)
      std::this_thread::sleep_for(200ms); // the server blocked on a full buffer
    rude.hangUp();
    RawClient next(served.socketPath);
    json status = next.ask("{\"op\":\"status\"}");
    EXPECT_TRUE(status.value("ok", false)) << "round " << round << ": " << status.dump();
  }
  // An update whose client is gone before the reply: applied, nothing else.
  uint64_t version = served.guardVersion();
  {
    RawClient gone(served.socketPath);
    ASSERT_TRUE(gone.send("{\"op\":\"update\",\"map\":\"config\",\"key\":\"00000000\","
                          "\"value\":\"0200000001000000\"}\n"));
  }
  EXPECT_TRUE(waitFor([&] { return served.changes == 1u; }, 10s));
  EXPECT_GT(served.guardVersion(), version);
  RawClient after(served.socketPath);
  EXPECT_TRUE(after.ask("{\"op\":\"status\"}").value("ok", false));
}

// No client waits on another: beside one that dribbles a request a byte at
// a time, one that sits idle after connecting, and one that sends requests
// and never reads its replies, a fourth is answered while all three are
// still connected; then the dribbling one finishes and gets its answer.
TEST(ControlServer, SlowIdleAndStuckClientsDoNotDelayAnother) {
  Served served("ctlslow");
  ASSERT_TRUE(served.ok());
  RawClient idle(served.socketPath), dribbling(served.socketPath), stuck(served.socketPath);
  ASSERT_TRUE(idle.connected && dribbling.connected && stuck.connected);
  std::string many;
  for (int i = 0; i < 20000; ++i)
    many += "{\"op\":\"status\"}\n";
  stuck.sendWhatFits(many);

  std::atomic<bool> fastServed{false}, dribbleDone{false};
  // JSON allows blanks before the closing brace: the request stays
  // unfinished until the fast client is served (or 60 s have passed).
  std::thread dribble([&] {
    dribbling.send("{\"op\":\"status\"");
    for (int i = 0; i < 300 && !fastServed; ++i) {
      dribbling.send(" ");
      std::this_thread::sleep_for(200ms);
    }
    dribbleDone = true;
  });
  RawClient fast(served.socketPath);
  json reply = fast.ask("{\"op\":\"status\"}");
  bool dribblingStillSending = !dribbleDone;
  fastServed = true;
  dribble.join();
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  EXPECT_TRUE(dribblingStillSending) << "the fast client was answered only after the slow one";
  json second = fast.ask("{\"op\":\"status\"}");
  EXPECT_TRUE(second.value("ok", false)) << second.dump();

  // Still connected, all of them: the dribbling one gets its answer.
  ASSERT_TRUE(dribbling.send("}\n"));
  json late = dribbling.reply();
  EXPECT_TRUE(late.value("ok", false)) << late.dump();
  EXPECT_FALSE(idle.closedByServer(100ms));
}

// Beyond maxConnections, a new client closes the connection idle the
// longest (which is told why) and is served.
TEST(ControlServer, ConnectionsAreBoundedByClosingTheIdlest) {
  runtime::ControlServerOptions options;
  options.maxConnections = 3;
  Served served("ctlbound", options);
  ASSERT_TRUE(served.ok());
  RawClient oldest(served.socketPath), middle(served.socketPath), newest(served.socketPath);
  // The oldest is the idlest; the others have asked something.
  ASSERT_TRUE(middle.ask("{\"op\":\"status\"}").value("ok", false));
  ASSERT_TRUE(newest.ask("{\"op\":\"status\"}").value("ok", false));
  RawClient late(served.socketPath);
  json reply = late.ask("{\"op\":\"status\"}");
  EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
  json notice = oldest.reply();
  EXPECT_NE(notice.value("error", "").find("3 connections are served at once"),
            std::string::npos)
      << notice.dump();
  EXPECT_TRUE(oldest.closedByServer(10s));
  EXPECT_TRUE(middle.ask("{\"op\":\"status\"}").value("ok", false));
}

// A path belongs to one live process: a second claim is refused naming the
// holder; a socket another program serves (without the lock) is refused
// naming its pid; a file that is not a socket is left alone; a socket
// whose process is gone is replaced. The socket and its lock file go with
// the server.
TEST(ControlServer, ASocketPathIsClaimedByOneLiveProcess) {
  Served served("ctlclaim");
  ASSERT_TRUE(served.ok());
  std::string pid = std::to_string(getpid());

  auto second = runtime::ControlSocketClaim::claim(served.socketPath);
  ASSERT_FALSE(bool(second));
  ErrorDetails refused = takeErrorDetails(second.takeError());
  EXPECT_EQ(refused.code, std::errc::address_in_use);
  EXPECT_EQ(refused.message, "control socket '" + served.socketPath + "' is taken: process " +
                                 pid + " (kernel_tests) holds " + served.socketPath +
                                 ".lock; stop it or choose another socket path");
  EXPECT_TRUE(RawClient(served.socketPath).ask("{\"op\":\"status\"}").value("ok", false))
      << "the first server still serves";

  // Another program serving a socket at the path, without the lock.
  std::string foreign = served.sockets.path("foreign.sock");
  Fd listener(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address = unixAddress(foreign);
  ASSERT_EQ(bind(listener.fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)), 0);
  ASSERT_EQ(listen(listener.fd, 4), 0);
  auto onForeign = runtime::ControlSocketClaim::claim(foreign);
  ASSERT_FALSE(bool(onForeign));
  refused = takeErrorDetails(onForeign.takeError());
  EXPECT_EQ(refused.code, std::errc::address_in_use);
  EXPECT_EQ(refused.message, "control socket '" + foreign + "' is served by process " + pid +
                                 " (kernel_tests); stop it or choose another socket path");

  // Stale: the listener gone, its socket file left behind.
  close(std::exchange(listener.fd, -1));
  ASSERT_EQ(access(foreign.c_str(), F_OK), 0);
  {
    auto claim = runtime::ControlSocketClaim::claim(foreign);
    ASSERT_THAT_EXPECTED(claim, llvm::Succeeded());
    EXPECT_TRUE(claim->replacesStale());
    auto server = runtime::ControlServer::start(
        std::move(*claim), served.fwd.opt(), nullptr, [] { return std::string("{}"); });
    ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
    EXPECT_TRUE(RawClient(foreign).ask("{\"op\":\"status\"}").value("ok", false));
    struct stat info = {};
    ASSERT_EQ(stat(foreign.c_str(), &info), 0);
    EXPECT_EQ(info.st_mode & 0777, 0600u);
  }
  EXPECT_NE(access(foreign.c_str(), F_OK), 0) << "the socket stays after its server";
  EXPECT_NE(access((foreign + ".lock").c_str(), F_OK), 0) << "the lock file stays";

  std::string file = served.sockets.path("file.sock");
  std::ofstream(file) << "not a socket\n";
  auto onFile = runtime::ControlSocketClaim::claim(file);
  ASSERT_FALSE(bool(onFile));
  refused = takeErrorDetails(onFile.takeError());
  EXPECT_EQ(refused.code, std::errc::file_exists);
  EXPECT_EQ(refused.message, "control socket '" + file +
                                 "': the path exists and is not a socket (left as it is)");
  std::ifstream kept(file);
  std::string content;
  std::getline(kept, content);
  EXPECT_EQ(content, "not a socket");
}

// Claims racing for one path: exactly one wins, whoever comes first.
TEST(ControlServer, ClaimsRacingForOnePathHaveOneWinner) {
  SocketDir sockets;
  for (int round = 0; round < 20; ++round) {
    std::string path = sockets.path("race" + std::to_string(round) + ".sock");
    std::atomic<int> go{0};
    std::vector<std::optional<runtime::ControlSocketClaim>> claims(4);
    std::vector<std::string> errors(claims.size());
    std::vector<std::thread> threads;
    for (size_t i = 0; i < claims.size(); ++i)
      threads.emplace_back([&, i] {
        while (!go)
          ;
        auto claim = runtime::ControlSocketClaim::claim(path);
        if (claim)
          claims[i].emplace(std::move(*claim));
        else
          errors[i] = llvm::toString(claim.takeError());
      });
    go = 1;
    for (std::thread &thread : threads)
      thread.join();
    size_t winners = std::count_if(claims.begin(), claims.end(),
                                   [](const auto &claim) { return claim.has_value(); });
    EXPECT_EQ(winners, 1u) << "round " << round;
    for (const std::string &error : errors) {
      if (!error.empty()) {
        EXPECT_NE(error.find("is taken"), std::string::npos) << error;
      }
    }
  }
}

} // namespace
} // namespace morpheus::testing
