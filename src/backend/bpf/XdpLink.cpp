#include "backend/bpf/XdpLink.h"

#include "support/Netns.h"

#include <bpf/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <unistd.h>

namespace morpheus::bpf {

Expected<XdpLink> XdpLink::attach(int programFd, const std::string &iface,
                                  XdpMode mode, const std::string &netns) {
  int linkFd = -1;
  uint32_t ifindex = 0;
  // On a helper thread in `netns`: the daemon's own threads never change
  // namespace.
  Error err = netns::runInNetns(netns, [&]() -> Error {
    ifindex = if_nametoindex(iface.c_str());
    if (!ifindex)
      return makeSystemError(errno, "no interface '{0}'{1}", iface,
                             netns.empty() ? "" : " in network namespace '" + netns + "'");
    LIBBPF_OPTS(bpf_link_create_opts, options,
                .flags = mode == XdpMode::Native ? XDP_FLAGS_DRV_MODE
                                                 : XDP_FLAGS_SKB_MODE);
    linkFd = bpf_link_create(programFd, ifindex, BPF_XDP, &options);
    if (linkFd < 0) {
      int code = errno;
      return makeSystemError(
          code, "cannot attach XDP ({0} mode) to '{1}'{2}{3}",
          mode == XdpMode::Native ? "native" : "generic", iface,
          code == EBUSY ? " (another XDP program is attached)" : "",
          code == EOPNOTSUPP && mode == XdpMode::Native
              ? " (no native XDP in this driver; try --xdp-mode generic)"
              : "");
    }
    return Error::success();
  });
  if (err)
    return err;
  return XdpLink(linkFd, ifindex);
}

XdpLink::XdpLink(XdpLink &&other) noexcept
    : linkFd(std::exchange(other.linkFd, -1)), index(other.index) {}

XdpLink &XdpLink::operator=(XdpLink &&other) noexcept {
  if (this != &other) {
    if (linkFd >= 0)
      close(linkFd);
    linkFd = std::exchange(other.linkFd, -1);
    index = other.index;
  }
  return *this;
}

XdpLink::~XdpLink() {
  if (linkFd >= 0) {
    bpf_link_detach(linkFd);
    close(linkFd);
  }
}

Error XdpLink::replace(int programFd) {
  if (bpf_link_update(linkFd, programFd, nullptr))
    return makeSystemError(errno, "cannot swap the XDP program (link {0})", linkFd);
  return Error::success();
}

bool XdpLink::attached() const {
  bpf_link_info info = {};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(linkFd, &info, &length) == 0 && info.xdp.ifindex != 0;
}

} // namespace morpheus::bpf
