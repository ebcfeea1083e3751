#include "support/Netns.h"

#include "support/FileDescriptor.h"
#include "support/Log.h"

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <random>
#include <thread>
#include <utility>

#include <fcntl.h>
#include <linux/ethtool.h>
#include <linux/netlink.h>
#include <linux/rtnetlink.h>
#include <linux/sockios.h>
#include <net/if.h>
#include <sched.h>
#include <signal.h>
#include <spawn.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

namespace morpheus::netns {
namespace {

constexpr const char *NetnsDir = "/run/netns/";

std::string joinArgs(const std::vector<std::string> &argv) {
  std::string text;
  for (const std::string &arg : argv)
    text += (text.empty() ? "" : " ") + arg;
  return text;
}

bool netnsExists(const std::string &name) {
  return ::access((NetnsDir + name).c_str(), F_OK) == 0;
}

Error disableIpv6(const std::string &netns) {
  return runInNetns(netns, [&]() -> Error {
    for (const char *path : {"/proc/sys/net/ipv6/conf/all/disable_ipv6",
                             "/proc/sys/net/ipv6/conf/default/disable_ipv6"}) {
      FileDescriptor fd(::open(path, O_WRONLY | O_CLOEXEC));
      if (fd.get() < 0 && errno == ENOENT)
        return Error::success(); // a kernel without IPv6 sends none anyway
      if (fd.get() < 0 || ::write(fd.get(), "1", 1) != 1)
        return makeSystemError(errno, "network namespace '{0}': writing {1}", netns, path);
    }
    return Error::success();
  });
}

// The receive queues `name` has in use (the kernel's real_num_rx_queues,
// what BPF_PROG_TEST_RUN checks an XDP context's queue against), at most
// `allocated` (its num_rx_queues, which rtnetlink reports and which may be
// more: a veth made without numrxqueues allocates one per CPU and uses
// one): its channels as ethtool reports them, receive-only and combined;
// 1 when the driver reports none (lo), which every device has.
uint32_t receiveQueuesInUse(int sock, const std::string &name, uint32_t allocated) {
  ethtool_channels channels = {};
  channels.cmd = ETHTOOL_GCHANNELS;
  ifreq request = {};
  std::strncpy(request.ifr_name, name.c_str(), IFNAMSIZ - 1);
  request.ifr_data = reinterpret_cast<char *>(&channels);
  if (::ioctl(sock, SIOCETHTOOL, &request) < 0)
    return 1;
  return std::clamp<uint32_t>(channels.rx_count + channels.combined_count, 1,
                              std::max<uint32_t>(allocated, 1));
}

} // namespace

Expected<std::vector<Interface>> interfaces() {
  FileDescriptor sock(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, NETLINK_ROUTE));
  if (sock.get() < 0)
    return makeSystemError(errno, "cannot open a netlink socket");
  struct {
    nlmsghdr header;
    ifinfomsg info;
  } request = {};
  request.header.nlmsg_len = sizeof(request);
  request.header.nlmsg_type = RTM_GETLINK;
  request.header.nlmsg_flags = NLM_F_REQUEST | NLM_F_DUMP;
  request.header.nlmsg_seq = 1;
  request.info.ifi_family = AF_UNSPEC;
  if (::send(sock.get(), &request, sizeof(request), 0) < 0)
    return makeSystemError(errno, "cannot ask netlink for the interfaces");
  // Created in the calling thread's namespace, as the netlink socket is.
  FileDescriptor channels(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (channels.get() < 0)
    return makeSystemError(errno, "cannot open a socket to ask for receive queues");
  std::vector<Interface> found;
  std::vector<char> buffer(1 << 16);
  for (;;) {
    ssize_t length = ::recv(sock.get(), buffer.data(), buffer.size(), 0);
    if (length < 0)
      return makeSystemError(errno, "cannot read the interfaces from netlink");
    int remaining = int(length);
    for (auto *message = reinterpret_cast<nlmsghdr *>(buffer.data());
         NLMSG_OK(message, remaining); message = NLMSG_NEXT(message, remaining)) {
      if (message->nlmsg_type == NLMSG_DONE) {
        for (Interface &device : found)
          device.receiveQueues =
              receiveQueuesInUse(channels.get(), device.name, device.receiveQueues);
        return found;
      }
      if (message->nlmsg_type == NLMSG_ERROR) {
        auto *error = static_cast<nlmsgerr *>(NLMSG_DATA(message));
        return makeSystemError(-error->error, "netlink refused to list the interfaces");
      }
      if (message->nlmsg_type != RTM_NEWLINK)
        continue;
      auto *info = static_cast<ifinfomsg *>(NLMSG_DATA(message));
      Interface device;
      device.index = uint32_t(info->ifi_index);
      int attributes = int(IFLA_PAYLOAD(message));
      for (auto *attribute = IFLA_RTA(info); RTA_OK(attribute, attributes);
           attribute = RTA_NEXT(attribute, attributes)) {
        if (attribute->rta_type == IFLA_IFNAME)
          device.name = static_cast<const char *>(RTA_DATA(attribute));
        else if (attribute->rta_type == IFLA_NUM_RX_QUEUES &&
                 RTA_PAYLOAD(attribute) >= sizeof(uint32_t))
          std::memcpy(&device.receiveQueues, RTA_DATA(attribute), sizeof(uint32_t));
      }
      found.push_back(std::move(device));
    }
  }
}

Error enterNetns(const std::string &name) {
  std::string path = NetnsDir + name;
  FileDescriptor target(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (target.get() < 0 || ::setns(target.get(), CLONE_NEWNET) != 0)
    return makeSystemError(errno, "cannot enter network namespace '{0}'", name);
  return Error::success();
}

Error runInNetns(const std::string &name, llvm::function_ref<Error()> work) {
  // setns() moves only the calling thread: the work gets a thread of its own.
  Error result = Error::success();
  std::thread worker([&] {
    if (!name.empty())
      if (Error err = enterNetns(name)) {
        llvm::consumeError(std::move(result));
        result = std::move(err);
        return;
      }
    llvm::consumeError(std::move(result));
    result = work();
  });
  worker.join();
  return result;
}

Expected<uint32_t> interfaceIndex(const std::string &iface) {
  unsigned index = ::if_nametoindex(iface.c_str());
  if (index == 0)
    return makeSystemError(errno, "interface '{0}'", iface);
  return index;
}

Expected<MacAddress> interfaceMac(const std::string &iface) {
  if (iface.size() >= IFNAMSIZ)
    return makeError("interface '{0}': the name is too long", iface);
  FileDescriptor sock(::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0));
  if (sock.get() < 0)
    return makeSystemError(errno, "interface '{0}': socket", iface);
  ifreq request{};
  std::memcpy(request.ifr_name, iface.c_str(), iface.size());
  if (::ioctl(sock.get(), SIOCGIFHWADDR, &request) != 0)
    return makeSystemError(errno, "interface '{0}': SIOCGIFHWADDR", iface);
  MacAddress mac;
  std::memcpy(mac.data(), request.ifr_hwaddr.sa_data, mac.size());
  return mac;
}

// posix_spawn rather than std::system: no shell to quote for, and it is safe
// in multi-threaded processes.
Error runTool(const std::vector<std::string> &argv) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0)
    return makeSystemError(errno, "`{0}`: pipe2", joinArgs(argv));
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
  int err = ::posix_spawnp(&pid, args[0], &actions, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (err != 0)
    return makeSystemError(err, "cannot run `{0}`", joinArgs(argv));
  ::close(writeEnd.release()); // so the read below sees EOF when the child exits

  std::string output;
  char buffer[512];
  for (;;) {
    ssize_t n = ::read(readEnd.get(), buffer, sizeof buffer);
    if (n > 0)
      output.append(buffer, static_cast<size_t>(n));
    else if (n == 0 || errno != EINTR)
      break;
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0)
    if (errno != EINTR)
      return makeSystemError(errno, "waitpid for `{0}`", joinArgs(argv));
  if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
    return Error::success();
  while (!output.empty() && output.back() == '\n')
    output.pop_back();
  std::string how = WIFEXITED(status) ? "exit status " + std::to_string(WEXITSTATUS(status))
                                      : "killed by signal " + std::to_string(WTERMSIG(status));
  return makeError("`{0}` failed ({1}): {2}", joinArgs(argv), how, output);
}

Expected<std::string> scratchName(std::string_view tag, const std::string &hex) {
  if (tag.empty())
    return makeError("a scratch namespace's tag must not be empty");
  for (char c : tag) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '_';
    // '-' separates the name's fields, so sweepStale() could misparse it.
    if (!ok)
      return makeError("scratch namespace tag '{0}' may only hold letters, digits and '_'",
                       std::string(tag));
  }
  return "mph-" + std::string(tag) + "-" + std::to_string(::getpid()) + "-" + hex;
}

std::string randomHex() {
  std::random_device source;
  char text[9];
  std::snprintf(text, sizeof text, "%08x", static_cast<unsigned>(source()));
  return text;
}

Error addNamespace(const std::string &name) {
  Error err = runTool({"ip", "netns", "add", name});
  if (!err)
    err = disableIpv6(name);
  if (!err)
    err = runTool({"ip", "-n", name, "link", "set", "lo", "up"});
  if (err)
    deleteNamespace(name);
  return err;
}

void deleteNamespace(const std::string &name) {
  if (!netnsExists(name))
    return;
  if (Error err = runTool({"ip", "netns", "del", name}))
    processLog().warning("cleanup of network namespace " + name + ": " +
                         llvm::toString(std::move(err)));
}

bool leftByGoneProcess(std::string_view name, std::string_view prefix) {
  if (name.substr(0, prefix.size()) != prefix)
    return false;
  size_t pidEnd = name.find('-', prefix.size());
  if (pidEnd == std::string_view::npos || pidEnd == prefix.size())
    return false;
  std::string pidText(name.substr(prefix.size(), pidEnd - prefix.size()));
  if (pidText.size() > 9 || pidText.find_first_not_of("0123456789") != std::string::npos)
    return false;
  pid_t pid = static_cast<pid_t>(std::stol(pidText));
  // EPERM means the process exists but belongs to someone else.
  return pid != ::getpid() && ::kill(pid, 0) != 0 && errno == ESRCH;
}

unsigned sweepStale(std::string_view tag) {
  auto named = scratchName(tag, "");
  if (!named) {
    llvm::consumeError(named.takeError());
    return 0;
  }
  // "mph-<tag>-": everything up to the pid.
  const std::string prefix = "mph-" + std::string(tag) + "-";
  std::error_code ec;
  std::filesystem::directory_iterator it(NetnsDir, ec);
  if (ec)
    return 0; // no namespace was ever created through `ip netns`
  unsigned deleted = 0;
  for (const auto &entry : it) {
    std::string name = entry.path().filename().string();
    if (!leftByGoneProcess(name, prefix))
      continue;
    if (Error err = runTool({"ip", "netns", "del", name})) {
      processLog().warning("sweeping stale namespaces: " + llvm::toString(std::move(err)));
      continue;
    }
    ++deleted;
  }
  return deleted;
}

Expected<std::unique_ptr<ScratchNamespace>> ScratchNamespace::create(std::string_view tag) {
  auto name = scratchName(tag, randomHex());
  if (!name)
    return name.takeError();
  if (Error err = addNamespace(*name))
    return err;
  return std::unique_ptr<ScratchNamespace>(new ScratchNamespace(std::move(*name)));
}

ScratchNamespace::~ScratchNamespace() { deleteNamespace(namespaceName); }

Expected<std::string> ScratchNamespace::addInterface(const std::string &iface) {
  std::string peer = "mphpeer" + std::to_string(peers++);
  for (const std::vector<std::string> &command :
       {std::vector<std::string>{"ip", "-n", namespaceName, "link", "add", iface, "type", "veth",
                                 "peer", "name", peer},
        std::vector<std::string>{"ip", "-n", namespaceName, "link", "set", peer, "up"},
        std::vector<std::string>{"ip", "-n", namespaceName, "link", "set", iface, "up"}})
    if (Error err = runTool(command))
      return err;
  return peer;
}

} // namespace morpheus::netns
