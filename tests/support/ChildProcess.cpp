#include "ChildProcess.h"
#include "KernelSupport.h"

#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <sys/mount.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

namespace morpheus::testing {

namespace {

// In the child, before exec: only async-signal-safe calls.
bool enterMounts(const ChildMounts &mounts) {
  switch (mounts.kind) {
  case ChildMounts::Inherited:
    return true;
  case ChildMounts::PrivateBpffs:
    return unshare(CLONE_NEWNS) == 0 &&
           mount(nullptr, "/", nullptr, MS_REC | MS_PRIVATE, nullptr) == 0 &&
           mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700") == 0;
  case ChildMounts::SameAs: {
    char path[64];
    snprintf(path, sizeof(path), "/proc/%d/ns/mnt", int(mounts.of));
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    return fd >= 0 && setns(fd, CLONE_NEWNS) == 0;
  }
  }
  return false;
}

} // namespace

ChildProcess::ChildProcess(const std::string &tag, std::vector<std::string> argv,
                           ChildMounts mounts) {
  std::random_device random;
  logPath = "/tmp/morpheus-test-" + tag + "-" + std::to_string(getpid()) + "-" +
            std::to_string(random() % 1000000) + ".log";
  std::vector<char *> args;
  for (std::string &argument : argv)
    args.push_back(argument.data());
  args.push_back(nullptr);
  child = fork();
  if (child == 0) {
    int log = open(logPath.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    if (log < 0 || dup2(log, 1) < 0 || dup2(log, 2) < 0 || !enterMounts(mounts))
      _exit(126);
    execv(args[0], args.data());
    _exit(127);
  }
}

ChildProcess::~ChildProcess() {
  if (child > 0) {
    kill(child, SIGKILL);
    waitpid(child, nullptr, 0);
  }
  unlink(logPath.c_str());
}

bool ChildProcess::alive() const { return child > 0 && waitpid(child, nullptr, WNOHANG) == 0; }

std::optional<int> ChildProcess::wait(std::chrono::seconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (child > 0) {
    int status = 0;
    pid_t done = waitpid(child, &status, WNOHANG);
    if (done == child) {
      child = -1;
      if (WIFEXITED(status))
        return WEXITSTATUS(status);
      return std::nullopt;
    }
    if (std::chrono::steady_clock::now() >= until)
      return std::nullopt;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return std::nullopt;
}

bool ChildProcess::stop() {
  if (child <= 0 || kill(child, SIGTERM))
    return false;
  std::optional<int> status = wait(std::chrono::seconds(30));
  return status && *status == 0;
}

std::string ChildProcess::log() const {
  std::ifstream in(logPath);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

std::string ChildProcess::seenByChild(const std::string &path) const {
  return "/proc/" + std::to_string(child) + "/root" + path;
}

bool waitFor(const std::function<bool()> &condition, std::chrono::milliseconds limit) {
  auto until = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < until) {
    if (condition())
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return condition();
}

std::string askControlSocketRaw(const std::string &socketPath, const std::string &line) {
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un address = unixAddress(socketPath);
  if (connect(fd, reinterpret_cast<sockaddr *>(&address), sizeof(address))) {
    close(fd);
    return nlohmann::json({{"connect_error", strerror(errno)}}).dump();
  }
  std::string request = line + "\n", reply;
  // The server may hang up before reading all of an oversized line.
  for (size_t sent = 0; sent < request.size();) {
    ssize_t wrote = send(fd, request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (wrote <= 0)
      break;
    sent += wrote;
  }
  char c;
  while (read(fd, &c, 1) == 1 && c != '\n')
    reply += c;
  close(fd);
  return reply;
}

nlohmann::json askControlSocket(const std::string &socketPath, const nlohmann::json &request) {
  std::string raw = askControlSocketRaw(socketPath, request.dump());
  nlohmann::json reply = nlohmann::json::parse(raw, nullptr, false);
  // An object either way, so tests can ask it for "ok" (a daemon that died
  // answers nothing).
  if (reply.is_discarded())
    return {{"no_reply", raw}};
  return reply;
}

} // namespace morpheus::testing
