// Why a table access cannot be specialized, for each kind of rewrite: the
// pipeline plans the guards by these, the table passes check them, and
// `explain` and the daemon report them. Defined in
// passes/TableRewriting.cpp, beside the rewrites they admit.
#pragma once

#include "core/TableAccessAnalysis.h"
#include "core/Tables.h"

#include <optional>
#include <string>

namespace morpheus::core {

// Why a lookup cannot be replaced: the reason, which callers decide on,
// and the detail people read (in the specialization log, in explain).
struct LookupDecline {
  enum class Reason {
    NotALookup,
    HelperNotModelled,   // not a key -> value lookup the core models
    MergedOperand,       // the map operand merges tables (phi, select)
    InnerMapOperand,     // an inner map, named by resolve-inner-table
    UnresolvedOperand,   // no one table
    NoKeyArgument,
    HelperShape,         // declared by hand: no pointer out, or key not by pointer
    NotInTheCatalog,
    KeptGeneric,            // another loader writes it: TableInfo::keptGeneric
    WrittenByTheDataPlane,  // and its writes are not guarded
    WritesNotGuardable,     // guarded, but not key by key (whyWritesNotGuardable)
    WrittenThroughTheValue, // the program writes through this lookup's result
    MapOfMaps,              // the lookup returns a table
    SemanticsNotModelled,
    EntriesRemovedUnguarded,  // TableInfo::entriesRemovedUnguarded (devmaps)
    LookupSideEffects,        // LRU
    ValuePointersCompared,    // the kernel answers by entry identity
    ValueNeedsWritableMemory, // the value goes where writable memory is required
    UnwrittenKeyBytes,        // KeyProvenance::unwritten
    FramesKept,               // AccessSite::framesKept
  };
  Reason reason;
  std::string detail;
};

// Why the lookup at `site` cannot be replaced, or nullopt when it can: it
// must be a lookup in a resolved, read-only table that policy does not keep
// generic (TableInfo::keptGeneric), whose lookup semantics
// the core models, whose lookups have no side effects, whose call has the
// shape of a lookup (pointer key in, pointer out), whose key bytes are all
// written on every path (KeyProvenance::unwritten) and whose root reaches
// no lookup whose are not (AccessSite::framesKept), and whose value pointers
// are only tested against null, never compared with other pointers or
// handed where writable memory is required.
// With `writesGuarded` (guard-table-writes counts the table's writes), a
// table the data plane writes is accepted too when its writes can be
// guarded key by key (whyWritesNotGuardable) and nothing is written through
// this lookup's own result: a fast path may skip the search, never the
// memory a write must reach.
std::optional<LookupDecline> whyNotInlinable(const AccessSite &site,
                                             const TableAccessInfo &info,
                                             const TableCatalog &catalog,
                                             bool writesGuarded = false);

// Why the data-plane writes of `table` cannot be counted key by key, or
// nullopt when they can: the data plane writes it, and only through update
// and delete sites with a key argument and through the results of its
// lookups (TableUsage::untiedWrite), and no insert evicts entries behind
// the program's back (LRU tables).
std::optional<std::string> whyWritesNotGuardable(const std::string &table,
                                                 const TableAccessInfo &info,
                                                 const TableCatalog &catalog);

// Why the loads through the lookup at `site` cannot be folded field by
// field (fold-read-only-fields), or nullopt when they can: a rewritable
// lookup with a constant key in a resolved table whose lookup semantics
// the core models, which the data plane writes, but only in some bytes
// of values or of other keys' values (tables it never writes are the other
// passes' business, unless their entries may vanish unguarded:
// TableInfo::entriesRemovedUnguarded, whose every byte is folded).
std::optional<std::string> whyNoFieldFolding(const AccessSite &site,
                                             const TableAccessInfo &info,
                                             const TableCatalog &catalog);

// Why a lookup at `site` cannot answer the keys its table does not hold
// with null without asking the kernel (key-set-filter), or nullopt when it
// can: a rewritable lookup (every key byte written) in one exact-match
// hash table (arrays hold every index) whose lookups have no side effects
// (LRU excluded), which
// the data plane writes, but only through values: no update, delete or
// other writing helper names it and it never escapes, so only the control
// plane changes its keys (tables it never writes are inlined whole by the
// other passes, unless their entries may vanish unguarded:
// TableInfo::entriesRemovedUnguarded, whose keys may only be fewer).
std::optional<std::string> whyNoKeySetFilter(const AccessSite &site, const TableAccessInfo &info,
                                             const TableCatalog &catalog);
// The same of the table itself, whatever the site.
std::optional<std::string> whyNoKeySetFilter(const std::string &table,
                                             const TableAccessInfo &info,
                                             const TableCatalog &catalog);

} // namespace morpheus::core
