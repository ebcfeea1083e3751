#include "netns/VethPair.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <filesystem>
#include <random>
#include <stdexcept>
#include <system_error>
#include <thread>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace morpheus::testing {
namespace {

constexpr const char *kNetnsDir = "/run/netns/";

[[noreturn]] void throwErrno(const std::string &what, int err = errno) {
  throw std::system_error(err, std::generic_category(), what);
}

class FileDescriptor {
public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  ~FileDescriptor() {
    if (fd_ >= 0)
      ::close(fd_);
  }
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;

  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

private:
  int fd_;
};

std::string joinArgs(const std::vector<std::string> &argv) {
  std::string text;
  for (const std::string &arg : argv) {
    if (!text.empty())
      text += ' ';
    text += arg;
  }
  return text;
}

struct CommandResult {
  int status; // as from waitpid()
  std::string output; // stdout and stderr, interleaved
};

// posix_spawn rather than std::system: no shell to quote for, and it is safe
// in the multi-threaded processes gtest binaries tend to be.
CommandResult runCommand(const std::vector<std::string> &argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    throwErrno("pipe2");
  FileDescriptor readEnd(fds[0]);
  FileDescriptor writeEnd(fds[1]);

  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, writeEnd.get(), STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, writeEnd.get(), STDERR_FILENO);
  std::vector<char *> args;
  for (const std::string &arg : argv)
    args.push_back(const_cast<char *>(arg.c_str()));
  args.push_back(nullptr);
  pid_t pid;
  int err = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(),
                           environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0)
    throwErrno("cannot run `" + joinArgs(argv) + "`", err);
  ::close(writeEnd.release()); // so the read below sees EOF when the child exits

  CommandResult result{0, {}};
  char buffer[512];
  for (;;) {
    ssize_t n = ::read(readEnd.get(), buffer, sizeof buffer);
    if (n > 0)
      result.output.append(buffer, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  while (::waitpid(pid, &result.status, 0) < 0) {
    if (errno != EINTR)
      throwErrno("waitpid for `" + joinArgs(argv) + "`");
  }
  while (!result.output.empty() && result.output.back() == '\n')
    result.output.pop_back();
  return result;
}

void run(const std::vector<std::string> &argv) {
  CommandResult result = runCommand(argv);
  if (WIFEXITED(result.status) && WEXITSTATUS(result.status) == 0)
    return;
  std::string how = WIFEXITED(result.status)
                        ? "exit status " + std::to_string(WEXITSTATUS(result.status))
                        : "killed by signal " + std::to_string(WTERMSIG(result.status));
  throw std::runtime_error("`" + joinArgs(argv) + "` failed (" + how +
                           "): " + result.output);
}

std::string namePrefix(std::string_view tag) {
  for (char c : tag) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
              (c >= '0' && c <= '9') || c == '_';
    // '-' separates the name's fields, so sweepStale() could misparse it.
    if (!ok)
      throw std::invalid_argument("VethPair tag '" + std::string(tag) +
                                  "' may only hold letters, digits and '_'");
  }
  if (tag.empty())
    throw std::invalid_argument("VethPair tag must not be empty");
  return "mph-" + std::string(tag) + "-";
}

std::string namespaceName(std::string_view tag, const std::string &hex) {
  return namePrefix(tag) + std::to_string(::getpid()) + "-" + hex;
}

std::string randomHex() {
  std::random_device source;
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(source()));
  return text;
}

bool netnsExists(const std::string &name) {
  return ::access((kNetnsDir + name).c_str(), F_OK) == 0;
}

// New devices copy the namespace's `default` settings, so doing this before
// the veth exists keeps its ends from ever sending router solicitations, DAD
// probes or MLD reports that a test counting packets would trip over.
void disableIpv6(const std::string &netns) {
  runInNetns(netns, [&] {
    for (const char *path : {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                             "/proc/sys/net/ipv6/conf/default/disable_ipv6"}) {
      FileDescriptor fd(::open(path, O_WRONLY | O_CLOEXEC));
      if (fd.get() < 0 && errno == ENOENT)
        return; // kernel without IPv6: nothing will be sent anyway
      if (fd.get() < 0 || ::write(fd.get(), "1", 1) != 1)
        throwErrno(std::string("netns ") + netns + ": writing " + path);
    }
  });
}

void deleteNamespace(const std::string &ns) noexcept {
  if (!netnsExists(ns))
    return;
  try {
    run({"ip", "netns", "del", ns});
  } catch (const std::exception &e) {
    std::fprintf(stderr, "warning: cleanup of netns %s: %s\n", ns.c_str(), e.what());
  }
}

} // namespace

VethPair::VethPair(std::string_view tag) {
  std::string hex = randomHex();
  std::string base = namespaceName(tag, hex);
  nsA_ = base + "-a";
  nsB_ = base + "-b";
  ifA_ = "mph" + hex.substr(0, 6) + "a";
  ifB_ = "mph" + hex.substr(0, 6) + "b";

  // The destructor only runs for a fully constructed object.
  try {
    run({"ip", "netns", "add", nsA_});
    run({"ip", "netns", "add", nsB_});
    disableIpv6(nsA_);
    disableIpv6(nsB_);
    // Created inside A with the peer pushed straight into B: the names never
    // appear in the caller's namespace, so they cannot clash with its devices.
    run({"ip", "-n", nsA_, "link", "add", ifA_, "type", "veth", "peer", "name",
         ifB_, "netns", nsB_});
    for (const auto &[ns, iface] : {std::pair{nsA_, ifA_}, std::pair{nsB_, ifB_}}) {
      run({"ip", "-n", ns, "link", "set", "lo", "up"});
      run({"ip", "-n", ns, "link", "set", iface, "up"});
    }
    runInNetns(nsA_, [&] {
      ifindexA_ = interfaceIndex(ifA_);
      macA_ = interfaceMac(ifA_);
    });
    runInNetns(nsB_, [&] {
      ifindexB_ = interfaceIndex(ifB_);
      macB_ = interfaceMac(ifB_);
    });
  } catch (...) {
    destroy();
    throw;
  }
}

VethPair::~VethPair() { destroy(); }

void VethPair::destroy() noexcept {
  deleteNamespace(nsA_);
  deleteNamespace(nsB_);
}

ScratchNamespace::ScratchNamespace(std::string_view tag)
    : name_(namespaceName(tag, randomHex())) {
  try {
    run({"ip", "netns", "add", name_});
    disableIpv6(name_);
    run({"ip", "-n", name_, "link", "set", "lo", "up"});
  } catch (...) {
    deleteNamespace(name_);
    throw;
  }
}

ScratchNamespace::~ScratchNamespace() { deleteNamespace(name_); }

std::string ScratchNamespace::addInterface(const std::string &iface) {
  std::string peer = "mphpeer" + std::to_string(peers_++);
  run({"ip", "-n", name_, "link", "add", iface, "type", "veth", "peer", "name", peer});
  run({"ip", "-n", name_, "link", "set", peer, "up"});
  run({"ip", "-n", name_, "link", "set", iface, "up"});
  return peer;
}

unsigned VethPair::sweepStale(std::string_view tag) {
  const std::string prefix = namePrefix(tag);
  std::error_code ec;
  std::filesystem::directory_iterator it(kNetnsDir, ec);
  if (ec)
    return 0; // no namespace was ever created through `ip netns`
  unsigned deleted = 0;
  for (const auto &entry : it) {
    std::string name = entry.path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    size_t pidEnd = name.find('-', prefix.size());
    if (pidEnd == std::string::npos || pidEnd == prefix.size())
      continue;
    std::string pidText = name.substr(prefix.size(), pidEnd - prefix.size());
    if (pidText.find_first_not_of("0123456789") != std::string::npos)
      continue;
    pid_t pid = static_cast<pid_t>(std::stol(pidText));
    // EPERM means the process exists but belongs to someone else.
    if (pid == ::getpid() || ::kill(pid, 0) == 0 || errno != ESRCH)
      continue;
    try {
      run({"ip", "netns", "del", name});
      ++deleted;
    } catch (const std::exception &e) {
      std::fprintf(stderr, "warning: VethPair::sweepStale: %s\n", e.what());
    }
  }
  return deleted;
}

NetnsGuard::NetnsGuard(const std::string &name) {
  std::string path = kNetnsDir + name;
  FileDescriptor target(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (target.get() < 0)
    throwErrno("netns " + name + ": open " + path);
  // /proc/self would name the thread-group leader's namespace, which differs
  // from this thread's when this thread has been moved before.
  FileDescriptor previous(::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC));
  if (previous.get() < 0)
    throwErrno("netns " + name + ": open /proc/thread-self/ns/net");
  if (::setns(target.get(), CLONE_NEWNET) != 0)
    throwErrno("netns " + name + ": setns");
  previous_ = previous.release();
}

NetnsGuard::~NetnsGuard() {
  // A thread stranded in a namespace that is about to be deleted would make
  // every later network call on it quietly wrong; stopping is safer.
  if (::setns(previous_, CLONE_NEWNET) != 0) {
    std::perror("NetnsGuard: cannot return to the previous network namespace");
    std::abort();
  }
  ::close(previous_);
}

void runInNetns(const std::string &name, const std::function<void()> &fn) {
  std::exception_ptr error;
  std::thread worker([&] {
    try {
      NetnsGuard guard(name);
      fn();
    } catch (...) {
      error = std::current_exception();
    }
  });
  worker.join();
  if (error)
    std::rethrow_exception(error);
}

int interfaceIndex(const std::string &iface) {
  unsigned index = ::if_nametoindex(iface.c_str());
  if (index == 0)
    throwErrno("interface " + iface);
  return static_cast<int>(index);
}

MacAddress interfaceMac(const std::string &iface) {
  if (iface.size() >= IFNAMSIZ)
    throw std::invalid_argument("interface name '" + iface + "' is too long");
  FileDescriptor sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0)
    throwErrno("interface " + iface + ": socket");
  ifreq request{};
  std::memcpy(request.ifr_name, iface.c_str(), iface.size());
  if (::ioctl(sock.get(), SIOCGIFHWADDR, &request) != 0)
    throwErrno("interface " + iface + ": SIOCGIFHWADDR");
  MacAddress mac;
  std::memcpy(mac.data(), request.ifr_hwaddr.sa_data, mac.size());
  return mac;
}

} // namespace morpheus::testing
