// Pre-swap shadow validation for the user-space backend: before a
// specialized version is installed, the generic handler and the candidate,
// each JIT-compiled against tables of its own filled from the live ones
// (and write counters holding the live counts, so the candidate's fast
// paths over written tables answer as they would live), run the same
// sample packets; a difference in verdict, egress port or packet bytes, or
// in the tables after the sample, refuses the candidate. The live tables
// are never touched: cycles run between bursts, on the loop's thread, so
// they hold still while they are copied.
//
// What it proves is bounded by the sample, as the eBPF backend's
// (runtime/ShadowValidation.h): a last line of defence against a wrong
// pass on the live configuration, not a proof of equivalence.
#pragma once

#include "backend/user/Jit.h"
#include "backend/user/Profile.h"
#include "backend/user/TableSet.h"
#include "backend/user/WriteCounters.h"
#include "core/PristineBitcode.h"
#include "support/Error.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::user {

struct ShadowPacket {
  Bytes frame;
  uint32_t port = 0; // ingress port
};

// What the candidate did differently: the first difference, on sample
// packet `packet` (1-based; none when it showed in the tables after the
// sample).
struct ShadowDifference {
  std::string what;
  std::optional<uint32_t> packet;
};

class ShadowCopies {
public:
  // Copies of the tables `pristine` defines; `generic` is the generic
  // version's module (what the live trampoline falls back to), compiled
  // once against the first copy.
  static Expected<std::unique_ptr<ShadowCopies>> create(const llvm::Module &pristine,
                                                        const core::PristineBitcode &generic,
                                                        const std::string &entry);

  // Runs `samples` through the generic handler and `candidate` (built for
  // guard version `version`), each on its copy of `live` and `writes`.
  Expected<std::optional<ShadowDifference>> compare(const TableSet &live,
                                                    const WriteCounters &writes,
                                                    const core::PristineBitcode &candidate,
                                                    uint64_t version,
                                                    const std::vector<ShadowPacket> &samples);

private:
  // One side: its tables, and what the JIT binds besides them.
  struct Copy {
    std::unique_ptr<TableSet> tables;
    Profile profile;
    WriteCounters writes;
    std::shared_ptr<Jit> jit;
  };
  static Expected<std::unique_ptr<Copy>> makeCopy(const llvm::Module &pristine);

  std::unique_ptr<Copy> original, specialized;
  VersionHandle generic; // in `original`'s JIT
  std::string entry;
  unsigned versions = 0;
};

} // namespace morpheus::user
