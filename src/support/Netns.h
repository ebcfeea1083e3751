// Network namespaces, for product code: running work inside a named
// namespace (on a helper thread, so no thread of the caller ever changes
// namespace), and scratch namespaces made for a job and deleted with it,
// holding interfaces with the names a configuration expects (`morpheus
// bench` sets a function up in one). Failures are Errors naming the
// namespace, the interface or the `ip` command. The test tooling
// (tools/netns: veth pairs, a thread-moving guard; failures throw) is built
// on these.
#pragma once

#include "support/Error.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <array>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace morpheus::netns {

using MacAddress = std::array<uint8_t, 6>;

// Runs `work` on a new thread inside /run/netns/`name` (here when `name`
// is empty) and returns its error, or the error of entering the namespace.
Error runInNetns(const std::string &name, llvm::function_ref<Error()> work);

// Moves the calling thread into /run/netns/`name` for good: for threads
// made to work there (runInNetns; the test tooling's guard, which moves
// back itself).
Error enterNetns(const std::string &name);

// An interface of the calling thread's namespace: its index, and how many
// receive queues it has in use (the kernel's real_num_rx_queues, as ethtool
// reports its channels; 1 when the driver does not say).
struct Interface {
  uint32_t index = 0;
  std::string name;
  uint32_t receiveQueues = 1;
};
// Every interface of the calling thread's namespace (rtnetlink), by index.
Expected<std::vector<Interface>> interfaces();

// The index and MAC address of `iface` in the calling thread's namespace.
Expected<uint32_t> interfaceIndex(const std::string &iface);
Expected<MacAddress> interfaceMac(const std::string &iface);

// Runs a program (no shell; looked up on PATH), e.g. {"ip", "netns", "add",
// NAME}; an exit other than 0 is an error quoting the command and its output.
Error runTool(const std::vector<std::string> &argv);

// Scratch namespaces are named `mph-<tag>-<pid>-<hex>`, so what a crashed
// user left behind can be found and removed (sweepStale). `tag` is letters,
// digits and '_'.
Expected<std::string> scratchName(std::string_view tag, const std::string &hex);
std::string randomHex(); // 8 hex digits
// Creates namespace `name` with its loopback up and IPv6 off (new devices
// in it then never send router solicitations or DAD probes).
Error addNamespace(const std::string &name);
// Deletes namespace `name` and every interface in it, if it exists; a
// failure is printed as a warning (nothing else can be done about it).
void deleteNamespace(const std::string &name);
// Deletes the namespaces `mph-<tag>-<pid>-*` whose process is gone;
// returns how many.
unsigned sweepStale(std::string_view tag);
// Whether `name` is `<prefix><pid>-...` and that process is gone: what a
// killed run left behind (its scratch namespaces, bench's pin
// directories). False for any other name, for this process, and for a
// process that is alive (another user's too).
bool leftByGoneProcess(std::string_view name, std::string_view prefix);

// A fresh scratch namespace, deleted with every interface in it when the
// object goes away.
class ScratchNamespace {
public:
  static Expected<std::unique_ptr<ScratchNamespace>> create(std::string_view tag);
  ~ScratchNamespace();
  ScratchNamespace(const ScratchNamespace &) = delete;
  ScratchNamespace &operator=(const ScratchNamespace &) = delete;

  const std::string &name() const { return namespaceName; }
  // Creates a veth pair inside the namespace whose end `iface` is up (its
  // peer, up too, gets a generated name, returned): an interface XDP can
  // redirect to, and a peer to send it packets from.
  Expected<std::string> addInterface(const std::string &iface);

private:
  explicit ScratchNamespace(std::string name) : namespaceName(std::move(name)) {}
  std::string namespaceName;
  unsigned peers = 0;
};

} // namespace morpheus::netns
