// What the table-specializing passes share: the run-time facts they are
// given (table catalog, snapshot), where they must not act, the log of what
// they decided at each site, and the IR building blocks for replacing a
// lookup by what the snapshot says it returns. The passes' inside: what
// other layers use of it is in the core's own headers (SiteEligibility.h,
// ProfileOptions.h, WriteGuards.h), the only ones they can include.
#pragma once

#include "core/CostModel.h"
#include "core/FaultInjection.h"
#include "core/LookupGenerator.h"
#include "core/ProfileOptions.h"
#include "core/SiteEligibility.h"
#include "core/SpecializationLog.h"
#include "core/SpecializationPoints.h"
#include "core/TableAccessAnalysis.h"
#include "core/Tables.h"
#include "core/WriteGuards.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace llvm {
class TrackingStatistic;
}

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

// Right before `at` (its block split there), asks the runtime for a profile
// slot of `site` (ProfileOptions::slotFunction, declared on first use; the
// guard runtime defines it) and, for a sampled packet, lets `record` fill
// it (the builder in a block only sampled packets run, marked rare); every
// packet then goes on to `at`. Blocks are named after `name`. Shared by
// instrument-table-sites (a lookup's key) and flow-fast-path (a flow's
// tuple), so that core/TrafficProfile counts both alike.
void emitProfileSample(llvm::Instruction &at, const ProfileOptions &profile, uint32_t site,
                       const std::string &name,
                       llvm::function_ref<void(llvm::IRBuilderBase &, llvm::Value *slot)> record);

// The profile site flow-fast-path records its flow's tuples under (one flow
// per program): the first id past every access site's (accessSiteCount),
// so no lookup's keys share its slots, and the same in every version built
// from one program.
unsigned flowProfileSite(const llvm::Module &module);

// The tables guard-table-writes counts the writes of, in every version
// built with `guards`: written by the data plane, every write tied to a key
// (whyWritesNotGuardable), not excluded, and with a lookup a fast path
// could serve (whyNotInlinable with writes guarded). Depends on the program
// alone, never on the snapshot or the hot keys, so that every version
// counts the same writes.
std::set<std::string> writeGuardedTables(const TableAccessInfo &info,
                                         const TableCatalog &catalog,
                                         const WriteGuardOptions &guards);

// Read-only hash tables are read whole up to this many entries (planReads),
// so that constant-fields and branch-injection see every entry of tables
// too large to become code;
// the walk of a larger table stops there (1,025 key steps, about 1 ms).
constexpr uint32_t WholeTableReadLimit = 1024;

// Tries are read whole up to this many prefixes, for lpm-as-array's
// derived table and lpm-as-hash's derived hash (the full Stanford table of
// nf/router is 2,592; about 4 ms of reading at the limit).
constexpr uint32_t DerivedTrieReadLimit = 4096;

// The trie keys lpm-as-array can derive a table for: a u32 prefix length,
// then an IPv4 address, alone or after a 32-bit leading word (the
// firewall's generation).
inline bool derivableTrieKey(uint32_t keySize) { return keySize == 8 || keySize == 12; }

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
  // Set when regions are off for this specialization (why): region-as-table
  // then declines every region.
  std::optional<std::string> noRegions;
  // Functions whose code may run without a guard in front of it, with the
  // reason: never specialized.
  std::map<std::string, std::string> unguardedFunctions;
  // Generic copies kept for the in-program fallback: never specialized.
  std::set<std::string> genericFunctions;
  // Functions whose frames must stay the original's (TableAccessInfo::
  // framesKept), with the reason: never changed, not even instrumented.
  std::map<std::string, std::string> framesKept;
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
  // Per site id, chains of their own for some CPUs (the others take the
  // site's hotKeys); eBPF only: the site reads the CPU number.
  std::map<unsigned, PerCpuHotKeys> perCpuHotKeys;
  // Per flow profile site (flow-fast-path: flowProfileSite), the hot tuples
  // whose tails are cloned with the tuple as constants, hottest first.
  std::map<unsigned, std::vector<Bytes>> hotTuples;
  // How many of the flow's hot tuples the verifier budget dropped (the
  // coldest; Pipeline.cpp), for the log.
  size_t hotTuplesOverBudget = 0;
  // Set to count the data plane's writes per key bucket (guard-table-writes)
  // in every function, generic copies included; only with a guard runtime
  // linked in, and in every version built while fast paths over written
  // tables may run.
  std::optional<WriteGuardOptions> writeGuards;
  // Each bucket's write counter as read before the snapshot: a hot key of a
  // written table gets a fast path only when its bucket is here.
  std::map<uint32_t, uint64_t> writeCounts;
  // The specialization points to assume, by label (specialization-points).
  PointConfiguration points;
  // In-program fallback: each guarded root's generic copy, which a point's
  // guard calls on a miss.
  std::map<std::string, std::string> genericCopy;
  FaultInjection faults;
  // The live bytes of the writable globals fold-read-only-globals may fold
  // (null: none; only guarded specializations get them).
  const GlobalValues *globals = nullptr;
  // What each representation of a table costs (TrieRepresentation.h: the
  // LPM passes build the cheapest eligible one), and the table passes that
  // run this time (a representation whose pass does not run is not eligible).
  CostModel costModel;
  std::set<std::string> enabledPasses;
  // Custom generators (custom-generator): the first serving a table makes
  // the code of its lookups.
  std::vector<LookupGenerator> generators;
  // The running pass's count of the sites it declined (its SitesDeclined
  // statistic, set as its run begins): declineSite and recordTrieDecision
  // count there, so a decline is counted where it is logged.
  llvm::TrackingStatistic *declines = nullptr;

  bool untouchable(const std::string &function) const {
    return unguardedFunctions.count(function) || genericFunctions.count(function) ||
           framesKept.count(function);
  }
};

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

// What a lookup of `key` in `table` answers, if the snapshot `contents`
// knows (TableContents::known, but for an LPM trie read whole, whose
// entries are prefixes: the longest one containing the key, core::trieAnswer;
// a probed trie key's entry is already the kernel's answer). std::nullopt:
// not known (or a stored prefix that cannot be read).
std::optional<const TableEntry *> snapshotAnswer(const TableContents &contents,
                                                 const TableInfo &table, const Bytes &key,
                                                 bool littleEndian);

// What heavy-hitter-fast-path answers the hot key `key` with at a lookup of
// `table`, whose snapshot is `contents` (`written`: the data plane writes
// the table, its writes counted by guard-table-writes): the entry whose
// value it yields (snapshotAnswer: for an LPM trie read whole, the prefix
// that answers the whole key); nullptr, null without the lookup (a written
// table known not to hold the key, answered under the key's write count);
// or nullopt, no answer, the key goes on to the lookup (not read this
// cycle, per-CPU values that differ, or absent from a read-only table). The
// pass and the verifier budget (Pipeline.cpp: only values add paths)
// decide by it.
std::optional<const TableEntry *> hotKeyAnswer(const TableContents &contents,
                                               const TableInfo &table, const Bytes &key,
                                               bool written, bool littleEndian);

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

  // A pointer to the value of the snapshot's entry number `index` (i64,
  // computed at run time; the caller keeps it below the entry count).
  llvm::Value *entryPointer(llvm::IRBuilderBase &builder, const std::string &table,
                            llvm::Value *index);

  // A constant pointer to the value every slot of an array read by content
  // holds when the snapshot does not list it (TableContents::unlistedValue).
  llvm::Constant *unlistedValuePointer(const std::string &table);

  // The table whose value array (`__morpheus.TABLE.values`) `global` is,
  // or nullopt; and the bytes between two of its values.
  std::optional<std::string> valueArrayTable(const llvm::GlobalVariable &global) const;
  uint64_t valueStride(const std::string &table) const;

  // What a compare chain yields when no entry matched.
  enum class OnMiss {
    Null,       // the snapshot holds the whole table: the key is absent
    KeepLookup, // an array whose snapshot does not list every index: ask the kernel
    UnlistedBelowMaxEntries, // an array read by content: its unlisted value below maxEntries
  };

  // One compare of a dispatch: the key compared, and the entry whose value
  // a match yields. For an exact-match table they are one entry; a hot key
  // of an LPM trie read whole is answered by the prefix that holds it.
  struct Arm {
    const Bytes *key;
    const TableEntry *answer;
  };
  static std::vector<Arm> armsOf(const std::vector<const TableEntry *> &entries);

  // Replaces `lookup` by a chain of compares over `arms` on the key bytes
  // the call would have read (loaded through an opaque copy of the key
  // pointer, so bytes the program never wrote compare as memory holds
  // them, as the helper's memcmp does). A match yields the arm's answer's
  // value; a miss yields what `onMiss` says (KeepLookup: the original call,
  // moved to the miss path).
  //
  // `stillValid`, when given, is asked on each arm's match for a condition
  // (i1) built at the match: while false, the key goes on down the chain as
  // if it had not matched (and so to the lookup kept on the miss path).
  using EntryGuard =
      llvm::function_ref<llvm::Value *(llvm::IRBuilderBase &, const TableEntry &)>;
  void replaceWithDispatch(llvm::CallBase &lookup, unsigned keyArg, const std::vector<Arm> &arms,
                           const std::string &table, ChainLowering lowering, OnMiss onMiss,
                           EntryGuard stillValid = nullptr);

  // Replaces `lookup` by a fixed result (a value pointer or null).
  static void replaceWith(llvm::CallBase &lookup, llvm::Value *result);

  // Where a rewrite of a lookup builds its code: the lookup's block split
  // before the call, `head` left without a terminator (the builder at its
  // end) for the rewrite's first branch, `tail` starting at the call; the
  // key pointer copied opaquely, so the key stays in memory and bytes the
  // program never wrote (struct padding) are read as they are there, as the
  // helper reads them, not as undef that LLVM may pick a value for; and the
  // phi at the top of `tail` that takes the call's place.
  struct Frame {
    llvm::BasicBlock *head;
    llvm::BasicBlock *tail;
    llvm::Value *keyMemory;
    uint64_t keyAlignment; // what is known of the key pointer's alignment
    llvm::PHINode *result;
  };
  Frame openFrame(llvm::CallBase &lookup, unsigned keyArg, const std::string &table,
                  llvm::IRBuilderBase &builder, unsigned expectedResults);
  // A load of `type` from the key's bytes at `offset`, aligned as the key
  // pointer allows.
  static llvm::Value *loadKey(llvm::IRBuilderBase &builder, const Frame &frame,
                              uint32_t offset, llvm::Type *type, const llvm::Twine &name);
  // What becomes of the call when its frame closes.
  enum class CallKept {
    No,         // erased: the code answers every key
    OnMissPath, // the kernel's answer for keys the code leaves to it: marked
                // keptOnMissPath, so the other passes leave it alone
    AsLookup,   // still the site's lookup for every key that reaches it
                // (branch-injection's filter): the other passes may take it
  };
  // Closes `frame`: the call's uses go to the phi; unless `kept` is No, the
  // call moves to the end of `callPath` (a block ending in its branch to
  // `tail`) as that path's result; otherwise it is erased.
  static void closeFrame(llvm::CallBase &lookup, const Frame &frame, CallKept kept,
                         llvm::BasicBlock *callPath = nullptr);

  // Whether `call` is a lookup a rewrite kept on a miss path: passes leave
  // it alone.
  static bool keptOnMissPath(const llvm::CallBase &call);
  // Marks `call` as such a lookup.
  static void keepOnMissPath(llvm::CallBase &call);

  // A derived table's words (`__morpheus.TABLE.KIND`: lpm-as-array's
  // levels, lpm-as-hash's slots, hash-as-array's index): a private
  // constant, 8-byte aligned, in the constant section, built by `build`
  // the first time a site of `table` asks for it.
  llvm::GlobalVariable *derivedTable(const std::string &table, llvm::StringRef kind,
                                     llvm::function_ref<llvm::Constant *()> build);

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

// A key's bytes as writeBucket folds them: the words loaded from the key,
// each with the shift that puts its bytes where the fold wants them.
struct WriteBucketWords {
  std::vector<std::pair<llvm::Value *, unsigned>> words; // i64, shift
};

// Loads the key bytes at `key` at the builder's insertion point, through
// an opaque copy of the pointer as the compare chains read keys: the
// memory as it is there, whatever the program stores into it later.
WriteBucketWords loadWriteBucketKey(llvm::IRBuilderBase &builder, llvm::Value *key,
                                    const std::string &table, uint32_t keySize,
                                    const llvm::DataLayout &dl);

// Code computing writeBucket(table, the loaded key bytes, ...) at the
// builder's insertion point: pure arithmetic on `loaded`, so it may sit
// anywhere the loads dominate (where the write is, off the paths that
// write nothing).
llvm::Value *emitWriteBucket(llvm::IRBuilderBase &builder, const WriteBucketWords &loaded,
                             const std::string &table, uint32_t bucketBits);

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

// Records in the log (if any) that `pass` left `site` alone, and why
// (`outcome`, not Applied, and the words), and counts it
// (TablePassContext::declines); returns false, what a SiteRewrite returns
// for a site it did not replace.
bool declineSite(const TablePassContext &context, const AccessSite &site, Decider pass,
                 SiteOutcome outcome, std::string why);

// Runs `rewrite` on every lookup site that whyNotInlinable() accepts, that
// runs in a function the passes may touch, and whose table has a snapshot;
// returns whether anything changed. `rewrite` returns true when it replaced
// the call.
// With `writesGuarded`, sites whyNotInlinable accepts with writes guarded
// are visited too.
using SiteRewrite = llvm::function_ref<bool(const AccessSite &, const TableInfo &,
                                            const TableContents &, LookupRewriter &)>;
bool rewriteEligibleLookups(llvm::Module &module, llvm::ModuleAnalysisManager &mam,
                            const TablePassContext &context, SiteRewrite rewrite,
                            bool writesGuarded = false);

} // namespace morpheus::core
