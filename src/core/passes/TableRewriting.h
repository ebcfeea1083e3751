// What the table-specializing passes share: the run-time facts they are
// given (table catalog, snapshot), where they must not act, the log of what
// they decided at each site, and the IR building blocks for replacing a
// lookup by what the snapshot says it returns.
#pragma once

#include "core/FaultInjection.h"
#include "core/SpecializationLog.h"
#include "core/SpecializationPoints.h"
#include "core/TableAccessAnalysis.h"
#include "core/Tables.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::core {

// How a compare chain hands out the value of the entry that matched.
enum class ChainLowering {
  // A constant pointer per entry: loads through it fold into constants, and
  // O2 deletes what they make dead. Each entry is a distinct state for the
  // kernel verifier as long as the pointer or what was loaded is live.
  Constants,
  // The chain yields the entry's index, hidden from the optimizer, and the
  // value is read from the table's value array at that index: nothing
  // folds, but every entry looks alike to the verifier once the loads are
  // done, so chains in sequence add up instead of multiplying.
  Index,
};

// Sampled recording of lookup keys (instrument-table-sites): the runtime
// function that says where this packet's key goes, and which sites may be
// recorded.
struct ProfileOptions {
  // Runtime function `ptr (i32 site)`: a slot for the key, or null when this
  // packet is not sampled. Linked with the guard runtime.
  std::string slotFunction;
  uint32_t sites = 0;    // site ids below this have a profile slot
  uint32_t keyBytes = 0; // a slot's size: longer keys are not recorded
  std::set<std::string> excludedTables; // the operator's --no-profile
};

// Read-only hash tables are read whole up to this many entries (planReads),
// so that constant-fields and branch-injection see every entry of tables
// too large to become code;
// the walk of a larger table stops there (1,025 key steps, about 1 ms).
constexpr uint32_t WholeTableReadLimit = 1024;

struct TablePassContext {
  const TableCatalog *catalog = nullptr;
  const TableSnapshot *snapshot = nullptr;
  SpecializationLog *log = nullptr;     // may be null
  std::string constantSection;          // section for inlined values ("" = default)
  // Section for the value arrays of tables with index chains: data the
  // verifier does not read as constants, so that it does not tell the
  // entries apart by what they hold ("" = default).
  std::string indexedValueSection;
  uint32_t inlineLimit = 64;            // largest table inlined whole
  // Set when compare chains are off for this specialization (why):
  // inline-small-table then declines every site.
  std::optional<std::string> noCompareChains;
  // Functions whose code may run without a guard in front of it, with the
  // reason: never specialized.
  std::map<std::string, std::string> unguardedFunctions;
  // Generic copies kept for the in-program fallback: never specialized.
  std::set<std::string> genericFunctions;
  // Sites whose compare chain must use ChainLowering::Index (verifier
  // budget, Pipeline.cpp), by site id, and their tables.
  std::set<unsigned> indexLoweredSites;
  std::set<std::string> indexLoweredTables;
  // Set to record lookup keys (instrument-table-sites); only with a guard
  // runtime linked in.
  std::optional<ProfileOptions> profile;
  // Per site id, the keys heavy-hitter-fast-path compares before the
  // generic lookup, hottest first (chosen from the traffic profile).
  std::map<unsigned, std::vector<Bytes>> hotKeys;
  // The specialization points to assume, by label (specialization-points).
  PointConfiguration points;
  // In-program fallback: each guarded root's generic copy, which a point's
  // guard calls on a miss.
  std::map<std::string, std::string> genericCopy;
  FaultInjection faults;
  // The live bytes of the writable globals fold-read-only-globals may fold
  // (null: none; only guarded specializations get them).
  const GlobalValues *globals = nullptr;

  bool untouchable(const std::string &function) const {
    return unguardedFunctions.count(function) || genericFunctions.count(function);
  }
};

// Why the lookup at `site` cannot be replaced, or nullopt when it can: it
// must be a lookup in a resolved, read-only table whose lookup semantics
// the core models, whose lookups have no side effects, whose call has the
// shape of a lookup (pointer key in, pointer out), and whose value pointers
// are only tested against null, never compared with other pointers or
// handed where writable memory is required.
std::optional<std::string> whyNotInlinable(const AccessSite &site,
                                           const TableAccessInfo &info,
                                           const TableCatalog &catalog);

// Why the loads through the lookup at `site` cannot be folded field by
// field (fold-read-only-fields), or nullopt when they can: a rewritable
// lookup with a constant key in a resolved table whose lookup semantics
// the core models, which the data plane writes, but only in some bytes
// of values or of other keys' values (tables it never writes are the other
// passes' business).
std::optional<std::string> whyNoFieldFolding(const AccessSite &site,
                                             const TableAccessInfo &info,
                                             const TableCatalog &catalog);

// Which of the program's own tables the inner-map operand of `site` is,
// given what the snapshot says its outer table holds: the table stored at
// the outer lookup's constant key, or the one table every slot of the
// outer table holds. `table` is unset when it cannot be told (or the site
// is no inner-map site); `why` says how it was resolved, or why not.
struct InnerTableResolution {
  std::optional<std::string> table;
  std::string why;
};
InnerTableResolution resolveInnerTable(const AccessSite &site, const TableAccessInfo &info,
                                       const TableSnapshot &snapshot);

// Builds replacement code for the lookups of one module. Every value lives
// in one array per table (`__morpheus.TABLE.values`, every entry of the
// snapshot in key order, 8-byte aligned like the kernel's; never written),
// so a key has one address wherever it is looked up and distinct keys have
// distinct addresses, as in the kernel, even when their values are equal.
// The array sits in the constant section, or, for a table with index
// chains, in the indexed-value section.
class LookupRewriter {
public:
  LookupRewriter(llvm::Module &module, const TablePassContext &context)
      : module(module), context(context) {}

  // A constant pointer to the value of `entry` (which must be in the
  // snapshot of `table`).
  llvm::Constant *valuePointer(const std::string &table, const TableEntry &entry);

  // A constant pointer to the zero value every slot of an array read by
  // content holds when the snapshot does not list it
  // (TableContents::unlistedAreZero).
  llvm::Constant *zeroValuePointer(const std::string &table);

  // What a compare chain yields when no entry matched.
  enum class OnMiss {
    Null,       // the snapshot holds the whole table: the key is absent
    KeepLookup, // an array whose snapshot does not list every index: ask the kernel
    ZeroBelowMaxEntries, // an array read by content: the zero value below maxEntries
  };

  // Replaces `lookup` by a chain of compares over `entries` on the key bytes
  // the call would have read (loaded through an opaque copy of the key
  // pointer, so bytes the program never wrote compare as memory holds
  // them, as the helper's memcmp does). A match yields the entry's value; a
  // miss yields what `onMiss` says (KeepLookup: the original call, moved to
  // the miss path).
  void replaceWithDispatch(llvm::CallBase &lookup, unsigned keyArg,
                           const std::vector<const TableEntry *> &entries,
                           const std::string &table, ChainLowering lowering, OnMiss onMiss);

  // Replaces `lookup` by a fixed result (a value pointer or null).
  static void replaceWith(llvm::CallBase &lookup, llvm::Value *result);

  // Whether `call` is a lookup a rewrite kept on a miss path: passes leave
  // it alone.
  static bool keptOnMissPath(const llvm::CallBase &call);
  // Marks `call` as such a lookup.
  static void keepOnMissPath(llvm::CallBase &call);

private:
  llvm::GlobalVariable *valueArray(const std::string &table);
  uint64_t indexOf(const std::string &table, const Bytes &key) const;

  llvm::Module &module;
  const TablePassContext &context;
};

// A key as the compare chains read it: in the widest loads its known
// alignment allows, so the BPF backend never assembles a word from bytes.
struct KeyChunk {
  uint32_t offset;
  uint32_t width; // bytes: 8, 4, 2 or 1
};
std::vector<KeyChunk> keyChunks(uint32_t keySize, uint64_t alignment);

// The integer a load of `chunk` reads from `key`'s bytes.
uint64_t chunkValue(const Bytes &key, KeyChunk chunk, bool littleEndian);

// The simple loads through `lookup`'s result at constant offsets from it
// (through GEPs and casts), with the offsets.
std::vector<std::pair<llvm::LoadInst *, uint64_t>> loadsAtKnownOffsets(llvm::CallBase &lookup,
                                                                       const llvm::DataLayout &dl);

// The constant `type` holds in `bytes` at `offset`, for integers of up to
// 8 bytes (what a BPF program loads from a value); nullptr otherwise.
llvm::Constant *constantAt(llvm::Type *type, const Bytes &bytes, uint64_t offset,
                           const llvm::DataLayout &dl);

// Runs `rewrite` on every lookup site that whyNotInlinable() accepts, that
// runs in a function the passes may touch, and whose table has a snapshot;
// returns whether anything changed. `rewrite` returns true when it replaced
// the call.
using SiteRewrite = llvm::function_ref<bool(const AccessSite &, const TableInfo &,
                                            const TableContents &, LookupRewriter &)>;
bool rewriteEligibleLookups(llvm::Module &module, llvm::ModuleAnalysisManager &mam,
                            const TablePassContext &context, SiteRewrite rewrite);

} // namespace morpheus::core
