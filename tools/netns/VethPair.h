// Throw-away network namespaces for tests and demos that need real devices:
// a veth pair whose ends live in two private namespaces, so XDP programs can
// be attached and traffic sent without touching the host's interfaces.
//
// This is test tooling, not library code: failures throw std::runtime_error
// with the failing command or system call in the message. It is built on
// the product's support/Netns (whose failures are Errors); product code
// that needs a scratch namespace uses that.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>

namespace morpheus::testing {

using MacAddress = std::array<uint8_t, 6>;

// Two fresh namespaces `mph-<tag>-<pid>-<hex>-a` / `-b` joined by a veth pair
// (`mph<hex6>a` in A, `mph<hex6>b` in B), both ends and both loopbacks up and
// IPv6 disabled so the link carries only the traffic a test sends. The
// destructor deletes both namespaces, which also deletes the veth pair and
// any XDP program attached to it.
class VethPair {
public:
  // `tag` names the user (e.g. the test binary) so sweepStale() can find what
  // a crashed run of it left behind; letters, digits and '_' only.
  explicit VethPair(std::string_view tag);
  ~VethPair();

  VethPair(const VethPair &) = delete;
  VethPair &operator=(const VethPair &) = delete;

  const std::string &nsA() const { return nsA_; }
  const std::string &nsB() const { return nsB_; }
  const std::string &ifA() const { return ifA_; }
  const std::string &ifB() const { return ifB_; }
  // Interface indexes as seen inside each end's own namespace.
  int ifindexA() const { return ifindexA_; }
  int ifindexB() const { return ifindexB_; }
  const MacAddress &macA() const { return macA_; }
  const MacAddress &macB() const { return macB_; }

  // Deletes namespaces named `mph-<tag>-<pid>-*` whose creating process is
  // gone (a crashed or killed run never reaches the destructor). Returns how
  // many namespaces were deleted.
  static unsigned sweepStale(std::string_view tag);

private:
  void destroy() noexcept;

  std::string nsA_, nsB_, ifA_, ifB_;
  int ifindexA_ = 0, ifindexB_ = 0;
  MacAddress macA_{}, macB_{};
};

// Moves the calling thread into the named namespace (/run/netns/<name>) and
// back to the thread's previous namespace on destruction. Only the calling
// thread moves; other threads of the process keep their namespace.
class NetnsGuard {
public:
  explicit NetnsGuard(const std::string &name);
  ~NetnsGuard();

  NetnsGuard(const NetnsGuard &) = delete;
  NetnsGuard &operator=(const NetnsGuard &) = delete;

private:
  int previous_ = -1;
};

// Runs `fn` on a new thread inside the named namespace and waits for it;
// an exception thrown by `fn` is rethrown in the caller.
void runInNetns(const std::string &name, const std::function<void()> &fn);

// The index and MAC address of `iface` in the calling thread's namespace.
int interfaceIndex(const std::string &iface);
MacAddress interfaceMac(const std::string &iface);

} // namespace morpheus::testing
