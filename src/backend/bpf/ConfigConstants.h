// Constants a loader writes into the code: Cilium's datapath declares its
// per-node and per-endpoint settings as constant globals in section
// ".rodata.config" (DECLARE_CONFIG) and reads each through inline assembly
// that is one 64-bit immediate load of the global's symbol (CONFIG():
// `asm volatile("%[out] = __config_NAME ll" : [out]"=r"(out))`). Cilium's
// loader replaces every such load with the global's value before the
// kernel sees it; libbpf would resolve it to the global's address in a map
// of its own, so the program would compute with a pointer where its author
// meant a number. Morpheus builds from the source and does what the
// program's loader does.
#pragma once

#include "support/Error.h"

#include <llvm/IR/Module.h>

#include <string>

namespace morpheus::bpf {

// The section whose globals Cilium's loader inlines.
inline constexpr const char *ConfigSection = ".rodata.config";

// Replaces the result of every inline assembly of `module` that is exactly
// one immediate load of a global in ConfigSection (`$0 = SYMBOL ll`) with
// the global's value, zero-extended from its size (1, 2, 4 or 8 bytes) as
// Cilium's loader reads it: the same 64 bits the kernel would then have
// loaded. Correct because the loader's rewrite is the program's meaning
// (CONFIG() exists to be rewritten so), the global is constant (nothing
// may store to it), and an inline assembly of only that load has no other
// effect. Any other inline assembly naming such a global is refused, naming
// the function: Cilium's loader would rewrite its load too, and Morpheus
// does not rewrite assembly text. Direct loads from the globals in IR are
// left to libbpf, which serves them from the frozen section map.
Error inlineConfigConstants(llvm::Module &module, const std::string &path);

} // namespace morpheus::bpf
