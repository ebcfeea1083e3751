#include "netns/VethPair.h"

#include "support/Netns.h"

#include <cstdio>
#include <cstdlib>
#include <exception>
#include <stdexcept>

#include <fcntl.h>
#include <sched.h>
#include <unistd.h>

namespace morpheus::testing {
namespace {

// Test tooling throws where the product returns an Error.
void check(Error err) {
  if (err)
    throw std::runtime_error(llvm::toString(std::move(err)));
}

template <typename T> T check(Expected<T> value) {
  if (!value)
    throw std::runtime_error(llvm::toString(value.takeError()));
  return std::move(*value);
}

} // namespace

VethPair::VethPair(std::string_view tag) {
  std::string hex = netns::randomHex();
  std::string base = check(netns::scratchName(tag, hex));
  nsA_ = base + "-a";
  nsB_ = base + "-b";
  ifA_ = "mph" + hex.substr(0, 6) + "a";
  ifB_ = "mph" + hex.substr(0, 6) + "b";

  // The destructor only runs for a fully constructed object.
  try {
    check(netns::addNamespace(nsA_));
    check(netns::addNamespace(nsB_));
    // Created inside A with the peer pushed straight into B: the names never
    // appear in the caller's namespace, so they cannot clash with its devices.
    check(netns::runTool({"ip", "-n", nsA_, "link", "add", ifA_, "type", "veth", "peer", "name",
                          ifB_, "netns", nsB_}));
    for (const auto &[ns, iface] : {std::pair{nsA_, ifA_}, std::pair{nsB_, ifB_}})
      check(netns::runTool({"ip", "-n", ns, "link", "set", iface, "up"}));
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
  netns::deleteNamespace(nsA_);
  netns::deleteNamespace(nsB_);
}

unsigned VethPair::sweepStale(std::string_view tag) { return netns::sweepStale(tag); }

NetnsGuard::NetnsGuard(const std::string &name) {
  // /proc/self would name the thread-group leader's namespace, which differs
  // from this thread's when this thread has been moved before.
  int previous = ::open("/proc/thread-self/ns/net", O_RDONLY | O_CLOEXEC);
  if (previous < 0)
    throw std::runtime_error("netns " + name + ": cannot open /proc/thread-self/ns/net");
  if (Error err = netns::enterNetns(name)) {
    ::close(previous);
    check(std::move(err));
  }
  previous_ = previous;
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
  std::exception_ptr thrown;
  check(netns::runInNetns(name, [&] {
    try {
      fn();
    } catch (...) {
      thrown = std::current_exception();
    }
    return Error::success();
  }));
  if (thrown)
    std::rethrow_exception(thrown);
}

int interfaceIndex(const std::string &iface) { return int(check(netns::interfaceIndex(iface))); }

MacAddress interfaceMac(const std::string &iface) { return check(netns::interfaceMac(iface)); }

} // namespace morpheus::testing
