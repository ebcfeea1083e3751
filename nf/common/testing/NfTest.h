// Loading a network function the way an operator without Morpheus would
// (plain libbpf, the object clang built), with its maps pinned in a test
// directory so control-plane code can be exercised exactly as deployed.
#pragma once

#include "KernelSupport.h"

#include <bpf/libbpf.h>

#include <map>
#include <string>

namespace morpheus::nf::testing {

using morpheus::testing::Bytes;
using morpheus::testing::RunResult;

// build/nf/<name>.bpf.o, built from nf/<name>/<name>.bpf.c by plain clang.
std::string objectPath(const std::string &name);

class NfProgram {
public:
  // Loads the object and pins every map under `pinDir`/<map name>.
  NfProgram(const std::string &objectPath, const std::string &pinDir);
  ~NfProgram();
  NfProgram(const NfProgram &) = delete;
  NfProgram &operator=(const NfProgram &) = delete;

  bool ok() const { return object != nullptr; }
  // The program named `name`, or the object's first program.
  int programFd(const std::string &name = "") const;
  int mapFd(const std::string &name) const;
  RunResult run(const Bytes &packet, uint32_t ingressIfindex = 0,
                const std::string &program = "") const;

private:
  bpf_object *object = nullptr;
  std::string pins;
};

} // namespace morpheus::nf::testing
