// What the pipeline will do with each access site, decided once from the
// program alone (before any table is read): the rules that pick the pass
// for a site live here and nowhere else. planReads asks the live tables for
// what the planned passes need. The snapshot may still make the pass
// decline (the specialization log says why); `morpheus explain` reports the
// log, and words the plan where no pass could take a site.
#pragma once

#include "core/SiteEligibility.h"
#include "core/SpecializationLog.h"
#include "core/TableAccessAnalysis.h"
#include "core/Tables.h"

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>

namespace morpheus::core {

// How the backend reads an array larger than the inline limit: by content
// (every slot that differs from its most common value) when reading it
// takes at most `limit` bytes, as `bytes` counts them for a table. The
// sizes are the backend's own (eBPF copies per-CPU values padded, one per
// possible CPU).
struct ArrayContentReads {
  uint64_t limit = 0;
  std::function<uint64_t(const TableInfo &)> bytes;
};

struct SitePlan {
  enum class Action {
    NotALookup,              // updates, deletes, other helpers: left as they are
    KeptMergedOperand,       // the map operand merges tables (phi, select)
    KeptNoInnerCandidate,    // no map of the program fits the outer map's inner template
    ResolvedInnerTable,      // resolve-inner-table names the table from the outer map
    InlinedConstantKey,      // constant-key-lookup
    InlinedSmallArray,       // inline-small-table: an array within the inline limit
    InlinedWhileFewDiffer,   // inline-small-table over an array read by content
    KeptArrayTooLargeToRead, // an array too large to read by content
    InlinedWhileSmall,       // inline-small-table while the table holds few entries
    FoldedFields,            // fold-read-only-fields
    FilteredKeys,            // key-set-filter (a key that is not constant)
    Kept,                    // `decline` says why
  };
  // A lookup kept because the data plane writes its table
  // (LookupDecline::Reason::WrittenByTheDataPlane): how it writes it,
  // which says what could still be folded.
  enum class Writes {
    NotTheReason,
    Wholesale,         // somewhere not confined to bytes or keys (TableUsage::wholesaleReason)
    EveryByte,         // every byte of its values
    FieldsNotFoldable, // the key is constant: `noFieldFolding` says why its bytes are not folded
    InPart,            // the key is not constant: read-only bytes fold at constant keys only
  };

  Action action = Action::Kept;
  std::optional<Decider> pass; // the pass that acts, if one does
  // Why the lookup cannot be replaced (whyNotInlinable): set for
  // FoldedFields, FilteredKeys and Kept.
  std::optional<LookupDecline> decline;
  // key-set-filter answers the keys the table does not hold without the
  // lookup (whyNoKeySetFilter), whatever the action (a Kept lookup with a
  // constant key may still be filtered).
  bool keySetFilter = false;
  Writes writes = Writes::NotTheReason;
  std::string noFieldFolding; // FieldsNotFoldable: whyNoFieldFolding's detail
  // KeptArrayTooLargeToRead: the bytes a content read would take, and the
  // backend's limit.
  uint64_t arrayBytes = 0, arrayReadLimit = 0;
};

// The plan of `site`. `arrays`: how the backend reads arrays larger than
// the inline limit; null reads every such array by content (what planReads
// asks of them does not depend on it: the backend reads what it can).
SitePlan planSite(const AccessSite &site, const TableAccessInfo &info,
                  const TableCatalog &catalog, uint32_t inlineLimit,
                  const ArrayContentReads *arrays);

// The plan of every site of `info`, by site id.
std::map<unsigned, SitePlan> planSites(const TableAccessInfo &info, const TableCatalog &catalog,
                                       uint32_t inlineLimit, const ArrayContentReads *arrays);

// What the passes will need read from the live tables: for each site, what
// its plan needs (an inner-map site's: the outer slots, and each table the
// operand may turn out to be, planned as a site of that table).
// `derivedTries`: lpm-as-array and lpm-as-hash run, so tries are read whole
// beyond the inline limit (a trie read whole is taken by a table pass or
// kept, never given a fast path).
ReadPlan planReads(const TableAccessInfo &info, const TableCatalog &catalog,
                   uint32_t inlineLimit, bool derivedTries = true);

} // namespace morpheus::core
