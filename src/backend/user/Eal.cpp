#include "backend/user/Eal.h"

#include <rte_eal.h>
#include <rte_errno.h>

#include <pthread.h>
#include <sched.h>
#include <unistd.h>

#include <algorithm>
#include <mutex>
#include <string>
#include <vector>

namespace morpheus::user {

namespace {

std::mutex ealMutex;
uint32_t ealMegabytes = 0; // 0: not initialised

} // namespace

Error initialiseEal(uint32_t megabytes) {
  std::lock_guard<std::mutex> lock(ealMutex);
  if (ealMegabytes) {
    if (megabytes > ealMegabytes)
      return makeError("DPDK: the EAL was initialised with {0} MiB and cannot grow to {1} "
                       "(initialise it first with the larger size)",
                       ealMegabytes, megabytes);
    return Error::success();
  }
  uint32_t memory = std::max(megabytes, DefaultEalMegabytes);
  // Memory in the process: without hugepages (anonymous memory) and without
  // shared configuration (--in-memory says the same but refuses --no-huge's
  // legacy memory mode). A file prefix of our own: EAL makes a runtime
  // directory for it even so, removed at once (nothing is written in it).
  std::vector<std::string> args = {"morpheus", "--no-huge", "--no-shconf", "--no-pci",
                                   "--file-prefix=morpheus-" + std::to_string(getpid()),
                                   "--no-telemetry", "-m", std::to_string(memory), "-l", "0",
                                   "--log-level=*:warning"};
  std::vector<char *> argv;
  for (std::string &arg : args)
    argv.push_back(arg.data());
  cpu_set_t affinity;
  bool hadAffinity = pthread_getaffinity_np(pthread_self(), sizeof affinity, &affinity) == 0;
  int initialised = rte_eal_init(int(argv.size()), argv.data());
  ::rmdir(rte_eal_get_runtime_dir()); // fails harmlessly if DPDK put something there
  if (initialised < 0)
    return makeError("DPDK: EAL initialisation failed: {0}", rte_strerror(rte_errno));
  if (hadAffinity)
    pthread_setaffinity_np(pthread_self(), sizeof affinity, &affinity);
  ealMegabytes = memory;
  return Error::success();
}

} // namespace morpheus::user
