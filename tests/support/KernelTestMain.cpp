// main() of every test binary that runs on the kernel (ctest label `kernel`):
// gtest's, after one check of what those tests need, made once for all of
// them. Without root they cannot load programs, make namespaces or veths:
// the binary runs nothing (not even its environments, which build
// namespaces) and exits with 77, which ctest reports as skipped
// (SKIP_RETURN_CODE, set on every kernel test) with the reason printed. As
// root, XDP programs that cannot be loaded are a failure, not a skip: the
// kernels we run on (>= 5.x) have them, so a skip there would hide a broken
// machine or a bug. Morpheus's caches (the cost model's calibration,
// runtime/CostCalibration) go to a directory of the run's own, removed at
// exit, which the morpheus processes the tests start inherit: no test reads
// what an earlier run left.
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

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
  if (geteuid() != 0) {
    std::fprintf(stderr, "SKIPPED: kernel tests need root (they load BPF programs and make "
                         "network namespaces, veths and bpffs pins); run them as root\n");
    return SkipExitCode;
  }
  ::testing::AddGlobalTestEnvironment(new KernelRequirements);
  char cache[] = "/tmp/morpheus-test-cache-XXXXXX";
  if (!mkdtemp(cache)) {
    std::perror("morpheus tests: a cache directory of their own");
    return 1;
  }
  setenv("MORPHEUS_CACHE_DIR", cache, 1);
  int result = RUN_ALL_TESTS();
  std::error_code ignored;
  std::filesystem::remove_all(cache, ignored);
  return result;
}
