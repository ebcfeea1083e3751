// The kinds of program Morpheus runs and what differs between them: the
// section names libbpf places, the verdict that drops a packet, the
// context BPF_PROG_TEST_RUN takes. Everything else (maps, guards, passes)
// is the same for XDP and TC.
#pragma once

#include "support/Error.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>

namespace llvm {
class Module;
}

namespace morpheus::bpf {

enum class ProgramType {
  Xdp, // BPF_PROG_TYPE_XDP: xdp, xdp.frags, xdp/devmap, ...
  Tc,  // BPF_PROG_TYPE_SCHED_CLS: tc, classifier, tcx/ingress, ...
  Other, // a type libbpf knows that Morpheus does not attach (socket, ...)
};

const char *programTypeName(ProgramType type); // "xdp", "tc", "other"

// The type libbpf gives a program in `section`; nullopt when libbpf cannot
// place the section (names from before libbpf 1.0, such as "xdp_prog").
std::optional<ProgramType> programTypeOfSection(llvm::StringRef section);

// What the kernel takes a program in `section` for, by libbpf's name of
// the type ("xdp", "sched_cls", "tracepoint"), for messages; "a type
// libbpf cannot tell" for a section libbpf cannot place.
std::string kernelTypeOfSection(llvm::StringRef section);

// The types a user names with --prog-type, by name: xdp, tc.
std::map<std::string, ProgramType> namedProgramTypes();

// The section libbpf places as `type` ("xdp", "tc").
const char *canonicalSection(ProgramType type);

// What a program of `type` returns to drop a packet it must not handle
// (the guard's verdict when the original cannot be reached):
// XDP_ABORTED (0) for XDP, TC_ACT_SHOT (2) for TC.
uint32_t dropVerdict(ProgramType type);

// A field of a program type's context that BPF_PROG_TEST_RUN takes from
// user space (ctx_in), as this kernel accepts it (net/bpf/test_run.c; each
// checked on 6.18: the others must be zero or the run fails with EINVAL).
struct ContextField {
  const char *name; // as in the kernel's struct: "mark", "cb[2]"
  uint32_t offset, width;
  enum class Kind {
    Any,          // any value
    Device,       // an interface of the namespace (0: none; TC: 0 and 1 are lo)
    ReceiveQueue, // below the device's receive queues, 0 without a device
    WireLength,   // 0 or from the packet's length up to 64 KiB
    GsoSegments,  // up to 65535
  } kind;
};

// The fields of `type`'s context a run may set: for XDP (xdp_md)
// ingress_ifindex and rx_queue_index; for TC (__sk_buff) mark, priority,
// ingress_ifindex, ifindex, cb[0..4], tstamp, wire_len, gso_segs, gso_size,
// hwtstamp. Not tc_index, tc_classid, queue_mapping, hash (refused), nor
// what the kernel derives from the packet (len, protocol, data pointers).
llvm::ArrayRef<ContextField> settableContextFields(ProgramType type);

// The size of `type`'s context struct (xdp_md, __sk_buff); 0 for Other.
uint32_t contextSize(ProgramType type);

// Gives every program entry of `module` (a function in a section other than
// .text) a section libbpf can place, and global linkage (a static program,
// which iproute2's and Cilium's loaders take, libbpf 1.x refuses). A
// section libbpf knows is kept (the author said what it is); an iproute2
// tail-call section ("ID/KEY", LegacyMaps.h) gets the section of the
// object's other programs, which must be of one type (the program array
// they share takes only that type); any other gets the canonical section
// of `forced` (--prog-type, as bpftool's `type`), or, without it, an error
// naming `path`, the program and its section, and saying what to pass.
Error placeProgramSections(llvm::Module &module, const std::string &path,
                           std::optional<ProgramType> forced);

} // namespace morpheus::bpf
