// Pre-swap shadow validation: before the optimizer installs a specialized
// program, sample packets go through it and through the original program,
// each with its own scratch copy of the live maps, and any difference in
// verdict, output bytes or map contents refuses the install. A second copy
// of the original runs alongside and learns what is nondeterministic
// (timestamps, random numbers), which is then not compared.
//
// What it proves is bounded by the sample: packets synthesized to hit the
// keys the specialization read (plus malformed ones), against maps copied
// up to a budget. It is a last line of defence against a wrong pass on the
// live configuration, not a proof of equivalence; `morpheus fuzz` and the
// equivalence tests are the broad checks (docs/equivalence.md).
#pragma once

#include "backend/bpf/ProgramSpec.h"
#include "support/Error.h"

#include <map>
#include <optional>
#include <string>

namespace morpheus::runtime {

struct ShadowOptions {
  uint32_t packets = 64;      // sample size
  uint32_t entryBudget = 256; // live entries copied per map, besides the
                               // ones the specialization read
  uint64_t seed = 1;
};

struct ShadowVerdict {
  uint32_t packets = 0; // compared
  // The first difference, described ("verdict 1, the original's 2"); the
  // sample packet (1-based) it showed on, none when it showed in the maps
  // after the sample; and a JSON reproducer (packets, both versions'
  // results). `difference` is empty when the versions agreed.
  std::string difference;
  std::optional<uint32_t> packet;
  std::string reproducer;
};

// `candidate` is the specialized ELF of `spec`; `liveMaps` are the maps the
// versions share (name -> fd), including the guard, which must hold the
// version the candidate was built for; `snapshot` is what it was built from.
Expected<ShadowVerdict> shadowValidate(const bpf::ProgramSpec &spec, const std::string &entry,
                                       llvm::ArrayRef<char> candidate,
                                       const std::map<std::string, int> &liveMaps,
                                       const core::TableSnapshot &snapshot,
                                       const ShadowOptions &options);

} // namespace morpheus::runtime
