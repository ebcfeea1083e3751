// `morpheus run` as an operator runs it: a separate process attached to a
// veth (generic mode here; the swap and demo tests cover native), configured
// through its control socket, stopped with SIGTERM, leaving nothing behind.
#include "KernelSupport.h"
#include "netns/VethPair.h"

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <sstream>
#include <thread>

namespace morpheus::testing {
namespace {

bool waitFor(const std::function<bool()> &condition, std::chrono::seconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (condition())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return condition();
}

// One request, one reply line.
nlohmann::json ask(const std::string &socketPath, const nlohmann::json &request) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  std::strncpy(address.sun_path, socketPath.c_str(), sizeof(address.sun_path) - 1);
  if (connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address))) {
    close(fd);
    return {{"connect_error", strerror(errno)}};
  }
  std::string line = request.dump() + "\n", reply;
  EXPECT_EQ(write(fd, line.data(), line.size()), ssize_t(line.size()));
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n')
    reply += c;
  close(fd);
  return nlohmann::json::parse(reply, nullptr, false);
}

std::string slurp(const std::string &path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(Daemon, ControlSocketUpdatesAndCleanShutdown) {
  VethPair::sweepStale("daemon");
  VethPair veth("daemon");
  PinDir pins("daemon");
  std::string pinDir = pins.path() + "/policy_fwd";
  std::string socketPath = "/tmp/morpheus-test-" + std::to_string(getpid()) + ".sock";
  std::string logPath = "/tmp/morpheus-test-" + std::to_string(getpid()) + ".log";

  pid_t daemon = fork();
  ASSERT_GE(daemon, 0);
  if (daemon == 0) {
    freopen(logPath.c_str(), "w", stdout);
    dup2(fileno(stdout), 2);
    std::string program = sourcePath("examples/policy_fwd.bpf.c");
    std::string morpheus = binPath("morpheus");
    execl(morpheus.c_str(), "morpheus", "run", program.c_str(), "--iface",
          veth.ifB().c_str(), "--netns", veth.nsB().c_str(), "--pin-dir", pinDir.c_str(),
          "--socket", socketPath.c_str(), "--period", "200ms", "--xdp-mode", "generic",
          nullptr);
    _exit(127);
  }
  struct Reaper {
    pid_t pid;
    ~Reaper() {
      if (pid > 0) {
        kill(pid, SIGKILL);
        waitpid(pid, nullptr, 0);
      }
    }
  } reaper{daemon};

  ASSERT_TRUE(waitFor([&] { return access(socketPath.c_str(), F_OK) == 0; },
                      std::chrono::seconds(20)))
      << slurp(logPath);
  struct stat info = {};
  ASSERT_EQ(stat(socketPath.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "only root may talk to the daemon";
  EXPECT_EQ(access((pinDir + "/policy").c_str(), F_OK), 0);
  EXPECT_EQ(access((pinDir + "/morpheus_guard").c_str(), F_OK), 0);

  nlohmann::json before = ask(socketPath, {{"op", "status"}});
  ASSERT_TRUE(before.value("ok", false)) << before.dump();
  uint64_t version = before["status"]["guard_version"];

  nlohmann::json updated = ask(socketPath, {{"op", "update"},
                                            {"map", "config"},
                                            {"key", "00000000"},
                                            {"value", "02000000 01000000"}});
  ASSERT_TRUE(updated.value("ok", false)) << updated.dump();
  EXPECT_GT(updated["version"].get<uint64_t>(), version);

  for (const nlohmann::json &bad :
       {nlohmann::json{{"op", "update"}, {"map", "nosuch"}, {"key", "00"}, {"value", "00"}},
        nlohmann::json{{"op", "update"}, {"map", "config"}, {"key", "00"}, {"value", "00"}},
        nlohmann::json{{"op", "explode"}}}) {
    nlohmann::json reply = ask(socketPath, bad);
    EXPECT_FALSE(reply.value("ok", true)) << bad.dump();
    EXPECT_TRUE(reply.contains("error")) << reply.dump();
  }

  // The daemon re-specializes for the new version on its own.
  uint64_t target = updated["version"];
  EXPECT_TRUE(waitFor(
      [&] {
        nlohmann::json status = ask(socketPath, {{"op", "status"}});
        return status.value("ok", false) &&
               status["status"]["specialized_version"].get<uint64_t>() == target;
      },
      std::chrono::seconds(10)))
      << slurp(logPath);

  ASSERT_EQ(kill(daemon, SIGTERM), 0);
  int status = 0;
  ASSERT_EQ(waitpid(daemon, &status, 0), daemon);
  reaper.pid = 0;
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << slurp(logPath);
  std::string log = slurp(logPath);
  EXPECT_NE(log.find("installed"), std::string::npos) << log;
  EXPECT_NE(access(socketPath.c_str(), F_OK), 0) << "socket left behind";
  EXPECT_NE(access(pinDir.c_str(), F_OK), 0) << "pins left behind";
  std::string link = "ip -n " + veth.nsB() + " link show " + veth.ifB() + " | grep -q xdp";
  EXPECT_NE(std::system(link.c_str()), 0) << "program still attached";
  unlink(logPath.c_str());
}

} // namespace
} // namespace morpheus::testing
