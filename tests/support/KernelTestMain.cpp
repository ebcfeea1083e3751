// main() of every test binary that runs on the kernel (ctest label `kernel`):
// gtest's, plus one check of what those tests need, made once for all of
// them. Without root they cannot load programs, make namespaces or veths,
// so every test is skipped with that reason. As root, XDP programs that
// cannot be loaded or run are a failure, not a skip: the kernels we run on
// (>= 5.x) have both, so a skip there would hide a broken machine or bug.
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <cstring>

namespace {

class KernelRequirements : public ::testing::Environment {
public:
  void SetUp() override {
    if (geteuid() != 0)
      GTEST_SKIP() << "kernel tests need root (they load BPF programs and make network "
                      "namespaces, veths and bpffs pins); run them as root";
    int xdp = libbpf_probe_bpf_prog_type(BPF_PROG_TYPE_XDP, nullptr);
    ASSERT_EQ(xdp, 1) << "running as root, yet the kernel refuses XDP programs ("
                      << (xdp < 0 ? std::strerror(-xdp) : "not supported")
                      << "): every kernel test would fail";
  }
};

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new KernelRequirements);
  return RUN_ALL_TESTS();
}
