#include "backend/bpf/XdpLink.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sched.h>
#include <unistd.h>

#include <thread>

namespace morpheus::bpf {

Expected<XdpLink> XdpLink::attach(int programFd, const std::string &iface,
                                  XdpMode mode, const std::string &netns) {
  int linkFd = -1, ifindex = 0, err = 0;
  std::string step;
  // setns() affects only the calling thread, so the attach runs on a
  // short-lived thread and the daemon's own threads never change namespace.
  std::thread worker([&] {
    if (!netns.empty()) {
      std::string path = "/run/netns/" + netns;
      int nsFd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
      if (nsFd < 0 || setns(nsFd, CLONE_NEWNET)) {
        err = errno;
        step = "cannot enter network namespace '" + netns + "'";
        if (nsFd >= 0)
          close(nsFd);
        return;
      }
      close(nsFd);
    }
    ifindex = if_nametoindex(iface.c_str());
    if (!ifindex) {
      err = errno;
      step = "no interface '" + iface + "'" +
             (netns.empty() ? "" : " in network namespace '" + netns + "'");
      return;
    }
    LIBBPF_OPTS(bpf_link_create_opts, options,
                .flags = mode == XdpMode::Native ? XDP_FLAGS_DRV_MODE
                                                 : XDP_FLAGS_SKB_MODE);
    linkFd = bpf_link_create(programFd, ifindex, BPF_XDP, &options);
    if (linkFd < 0) {
      err = errno;
      step = "cannot attach XDP (" +
             std::string(mode == XdpMode::Native ? "native" : "generic") +
             " mode) to '" + iface + "'" +
             (err == EBUSY ? " (another XDP program is attached)" : "") +
             (err == EOPNOTSUPP && mode == XdpMode::Native
                  ? " (no native XDP in this driver; try --xdp-mode generic)"
                  : "");
    }
  });
  worker.join();
  if (linkFd < 0)
    return makeSystemError(err, "{0}", step);
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
