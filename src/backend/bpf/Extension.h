// Extension programs (BPF_PROG_TYPE_EXT, "freplace"): a program that takes
// the place of one global function of another program, the way libxdp's
// dispatcher runs the programs of its slots. Morpheus needs them to put its
// trampoline in such a slot; everything here is what that takes of the
// kernel, and the probe that says whether this kernel allows it.
//
// An extension is verified against the function it replaces: it must carry
// BTF whose prototype matches the target's (argument count, integer sizes,
// the names of the structs pointed to), so the trampoline's BTF is built
// here for the one prototype a dispatcher slot has, `int f(struct xdp_md
// *ctx)`. It inherits its target's program type and expected attach type,
// so the program arrays it tail-calls through take programs of the
// target's kind. Once loaded it may be attached to that function of
// another program of the same kind as well (a dispatcher revision built
// later): bpf_link_create with the new target and the function's BTF id.
//
// Some kernels refuse extensions altogether: BPF_PROG_LOAD fails with EPERM
// before the verifier runs (no log). probeExtensions() loads a trivial
// target and a trivial extension of it once per process and keeps the
// answer, so that every feature built on extensions says exactly why it
// cannot run instead of failing half way.
#pragma once

#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <linux/bpf.h>

#include <string>
#include <vector>

namespace morpheus::bpf {

// Whether this kernel loads extension programs, probed once per process.
struct ExtensionSupport {
  int error = 0; // errno of the probe's refused load; 0: allowed
  // Why not, in words an operator can act on ("" when allowed): the errno,
  // whether the kernel refused before verifying, and the kernel's lockdown
  // mode where securityfs shows it.
  std::string reason;
  bool allowed() const { return error == 0; }
};
const ExtensionSupport &probeExtensions();

// An error for `feature`, which needs extension programs, when the kernel
// refuses them (probeExtensions()); success otherwise.
Error requireExtensions(const std::string &feature);

// `return XDP_PASS;`: the smallest XDP program, for probes.
std::vector<bpf_insn> returnPass();

// The BTF id of global function `function` in the BTF the kernel holds for
// program `programFd`, the id an extension of it names.
Expected<uint32_t> functionBtfId(int programFd, const std::string &function);

// Loads `instructions` as an extension of `function` of program
// `targetFd`, its one function typed `int NAME(struct xdp_md *ctx)`.
Expected<FileDescriptor> loadXdpExtension(const std::vector<bpf_insn> &instructions,
                                          const std::string &name, int targetFd,
                                          const std::string &function);

// Attaches extension `programFd` in place of `function` of program
// `targetFd` (which need not be the program it was loaded against);
// returns the link, which detaches it when its last reference goes.
Expected<FileDescriptor> attachExtension(int programFd, int targetFd, const std::string &function);

} // namespace morpheus::bpf
