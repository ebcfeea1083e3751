// main() of every test binary that runs on the kernel (ctest label `kernel`):
// gtest's, after one check of what those tests need, made once for all of
// them. Without root they cannot load programs, make namespaces or veths:
// the binary runs nothing (not even its environments, which build
// namespaces) and exits with 77, which ctest reports as skipped
// (SKIP_RETURN_CODE, set on every kernel test) with the reason printed. As
// root, XDP programs that cannot be loaded are a failure, not a skip: the
// kernels we run on (>= 5.x) have them, so a skip there would hide a broken
// machine or a bug. Morpheus's caches go to a directory of the run's own
// (PrivateCacheDirectory), as for every test binary.
#include "PrivateCacheDirectory.h"

#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace {

// ctest's conventional "skipped" exit status.
constexpr int SkipExitCode = 77;

class KernelRequirements : public ::testing::Environment {
public:
  void SetUp() override {
    int xdp = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_XDP, nullptr);
    ASSERT_EQ(xdp, 1) << "running as root, yet the kernel refuses XDP programs ("
                      << (xdp < 0 ? std::strerror(-xdp) : "not supported")
                      << "): every kernel test would fail";
  }
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // Listing the cases (ctest does, to run each on its own) needs no kernel.
  if (GTEST_FLAG_GET(list_tests))
    return RUN_ALL_TESTS();
  if (geteuid() != 0) {
    std::fprintf(stderr, "SKIPPED: kernel tests need root (they load BPF programs and make "
                         "network namespaces, veths and bpffs pins); run them as root\n");
    return SkipExitCode;
  }
  ::testing::AddGlobalTestEnvironment(new KernelRequirements);
  morpheus::testing::PrivateCacheDirectory cache;
  if (cache.path().empty())
    return 1;
  return RUN_ALL_TESTS();
}
