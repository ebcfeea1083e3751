// An XDP attachment through a bpf_link, so a new program version replaces
// the running one atomically (bpf_link_update): every packet is processed by
// exactly one version, and none is dropped during the swap.
#pragma once

#include "support/Error.h"

#include <string>

namespace morpheus::bpf {

enum class XdpMode { Native, Generic };

class XdpLink {
public:
  // Attaches `programFd` to `iface`, inside network namespace `netns` when
  // given (the name under /run/netns); the caller's namespace is unchanged.
  static Expected<XdpLink> attach(int programFd, const std::string &iface,
                                  XdpMode mode, const std::string &netns = "");

  XdpLink(XdpLink &&other) noexcept;
  XdpLink &operator=(XdpLink &&other) noexcept;
  ~XdpLink(); // detaches

  // Fails with ENOLINK once the link is detached (see attached()).
  Error replace(int programFd);
  // False once the kernel has detached the link: its interface was deleted
  // (a link on an interface that is merely down stays attached).
  bool attached() const;
  int fd() const { return linkFd; }
  int ifindex() const { return index; }

private:
  XdpLink(int fd, int ifindex) : linkFd(fd), index(ifindex) {}
  int linkFd = -1;
  int index = 0;
};

} // namespace morpheus::bpf
