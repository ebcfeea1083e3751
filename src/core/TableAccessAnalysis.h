// TableAccessAnalysis: every table access site of a module, what each site's
// key is made of, and which tables the data plane itself writes.
//
// Sites are found structurally, through the backend's AccessSignatureTable;
// the table operand is traced to its global with LLVM's underlying-object
// machinery (a callback's table parameter to the tables of the helper calls
// that run it). A table is read-write (RW) when any site updates or deletes
// in it, when anything writes through a pointer a lookup returned (stores at
// any offset, atomics, memory intrinsics, calls that may write), when a
// lookup result escapes where the analysis cannot follow it, or when the
// table global itself is used in a way the analysis does not understand.
// A result is followed through the program's static functions (their
// parameters, what they return, pointer out-parameters: PointerFlow.h). Anything
// unproven defaults to RW; only read-only (RO) tables are specialized
// without per-site guards. Besides writes it records what else a value
// pointer is used for that inlining could not reproduce: comparisons with
// other pointers (per table), and functions that need the memory writable
// (per site).
#pragma once

#include "core/AccessSignatures.h"
#include "core/Tables.h"

#include <llvm/IR/PassManager.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// Key bytes a lookup may read unwritten: [first, last] (offsets in the key)
// spans every byte not proven written on every path to the call. `unsure`
// is empty when some path never writes them; otherwise it says what the
// analysis could not follow (a call given the key's address, a store at an
// unknown offset), and the bytes are taken as possibly unwritten.
struct UnwrittenKeyBytes {
  uint32_t first = 0, last = 0;
  std::string unsure;

  // "key bytes 1..3 are never written: the kernel compares ..." (why no
  // rewrite is exact).
  std::string describe() const;
};

// Where a site's key bytes come from. Several sources may be set at once
// (e.g. a key built from packet fields and a constant protocol number).
struct KeyProvenance {
  bool constant = false; // literal values
  bool packet = false;   // bytes read from the packet
  bool context = false;  // fields of the program context (e.g. ingress port)
  bool table = false;    // bytes read from another table's value
  bool other = false;    // helper results, arithmetic the analysis stops at
  // Every byte of the key, when all of them are compile-time constants at
  // the call (proved with MemorySSA: the nearest writes of each key byte,
  // KeyBytes.h).
  std::optional<Bytes> constantKey;
  // When constantKey is unset: why the proof failed (the first byte it
  // could not pin: "key byte 2 is written with different values on
  // different paths"), which says why a key made of constants alone is
  // not answered as one.
  std::string constantUnproven;
  // For a longest-prefix table: the key's prefix length (its first four
  // bytes), when those are compile-time constants at the call though the
  // rest is not (a trie probed with a packet's whole address). The LPM
  // passes then need no test of it.
  std::optional<uint32_t> prefixLength;
  // Set when some bytes of a key on the stack may reach the call unwritten
  // on some path (struct padding the program never stores to): they hold
  // whatever earlier code left in that stack slot, which a specialized
  // version, whose frames are laid out otherwise, does not reproduce. No
  // rewrite can answer such a lookup as the kernel would.
  std::optional<UnwrittenKeyBytes> unwritten;

  // Whether literal values are the key's only source.
  bool constantsOnly() const { return constant && !packet && !context && !table && !other; }
  std::string describe() const;
};

struct AccessSite {
  unsigned id = 0; // from annotateAccessCalls; stable across clones
  llvm::CallBase *call = nullptr;
  std::string table; // empty when the table operand could not be resolved
  AccessSignature signature;
  KeyProvenance key;
  std::string function;
  std::string location; // "file.c:LINE" from debug info, or ""
  // For a site whose table operand is a table returned by a lookup in a
  // table of tables: the outer table(s), and the program's tables the
  // operand may be (those that fit an outer table's inner template; the
  // others the kernel refuses to store there). Empty otherwise.
  std::vector<std::string> outerTables;
  std::vector<std::string> innerCandidates;
  // For a site whose table operand merges (through phis and selects)
  // several of the program's tables, alone or with inner maps: those
  // tables (`map = v6 ? &flows6 : &flows4`, or a per-CPU inner table with
  // a global fallback); also a callback's table parameter when the
  // callback walks several tables (bpf_for_each_map_elem over two maps).
  // Empty otherwise.
  std::vector<std::string> mergedTables;
  // Every table of the program the operand may be: the one table, or the
  // merged tables and inner candidates; empty when unresolved.
  std::vector<std::string> possibleTables() const;
  // The one lookup in a table of tables the operand comes from, when it
  // comes from exactly one (resolve-inner-table needs its key).
  llvm::CallBase *outerLookup = nullptr;
  // Set when the value this lookup returns reaches a function that needs
  // writable memory behind its pointer arguments (requiresWritableArguments):
  // an inlined read-only value cannot go there. Says where.
  std::optional<std::string> valueNeedsWritableMemory;
  // Set when the site runs under a root that reaches a lookup whose key may
  // hold stale stack bytes (KeyProvenance::unwritten, that lookup's site
  // included): which stale bytes it compares depends on every frame that
  // root's code lays out, so nothing the root reaches is rewritten. Says
  // which root and which lookup.
  std::optional<std::string> framesKept;
  // For a lookup: the instructions that write through its result (stores,
  // atomic updates, memory intrinsics, calls that write their object), each
  // writing the entry of this lookup's key. Writes through a pointer merged
  // with others (phi, select) or that escapes are not here: they make the
  // table's TableUsage::untiedWrite.
  std::vector<llvm::Instruction *> resultWrites;
};

// What a site's table operand is, for messages: the table's name, or "an
// inner map of OUTER or TABLE ..." for one that is not one table.
std::string operandDescription(const AccessSite &site);

// "file.c:LINE" of `inst` from debug info, or "". An instruction LLVM
// merged from several lines (line 0) takes the line of the innermost scope
// holding them all.
std::string locationOf(const llvm::Instruction &inst);

// A data-plane write confined to some bytes of values: those of one key
// when the write goes through a lookup (or update, delete) with a constant
// key, of every key otherwise.
struct ValueWrite {
  static constexpr uint64_t WholeValue = UINT64_MAX;
  std::optional<Bytes> key; // nullopt: any key
  uint64_t offset = 0;
  uint64_t size = WholeValue; // bytes from offset; WholeValue: to the end
  std::string where;

  bool overlaps(const std::optional<Bytes> &otherKey, uint64_t otherOffset,
                uint64_t otherSize) const;
};

struct TableUsage {
  std::string name;
  bool written = false;
  // Written in a way no byte range or key confines: updates and deletes
  // with keys that are not constant, other writing helpers, the table
  // escaping the analysis, an unresolved table operand.
  bool writtenWholesale = false;
  std::string wholesaleReason; // the first such write, for reports
  // The first way the data plane may add or remove keys: an update, delete
  // or other writing helper naming the table (merged and inner operands
  // included), an unresolved operand, the table escaping the analysis.
  // Unset: only the control plane changes which keys the table holds (its
  // values may still be written through lookups).
  std::optional<std::string> keySetWrite;
  // The first write whose key the program's own access sites do not name:
  // anything but an update or delete site of this table with a key
  // argument and the resultWrites of its lookups (an unresolved table
  // operand, an inner-map write, another writing helper, the table or a
  // value pointer escaping the analysis). Unset when every write is tied
  // to a site whose key is known at run time (guard-table-writes).
  std::optional<std::string> untiedWrite;
  // Every write that is confined (each also in writeReasons).
  std::vector<ValueWrite> valueWrites;
  std::vector<std::string> writeReasons; // why RW, for the report
  // Where the program compares a value pointer of this table with anything
  // but null: the kernel answers by identity (same entry or not), which
  // inlined values would have to reproduce exactly, so such tables are
  // left alone.
  std::vector<std::string> pointerComparisons;
  unsigned siteCount = 0;
};

class TableAccessInfo {
public:
  std::vector<AccessSite> sites;
  std::map<std::string, TableUsage> tables;
  // The functions every root that reaches a lookup with possibly stale key
  // bytes reaches (AccessSite::framesKept), with the reason: no pass
  // changes them, so their frames, and the stale bytes, stay the
  // original's.
  std::map<std::string, std::string> framesKept;

  bool isReadOnly(const std::string &table) const;
  // Whether the data plane never writes `size` bytes at `offset` of the
  // value of `key` (nullopt: of any key) in `table`.
  bool isReadOnlyAt(const std::string &table, const std::optional<Bytes> &key,
                    uint64_t offset, uint64_t size) const;
  // Whether the data plane writes `table` but leaves some of its bytes
  // alone: bytes of values of `valueSize` no write of every key touches
  // (the keys the program's writes do not name keep them too). False when
  // it is not written, or written everywhere.
  bool writtenOnlyInPart(const std::string &table, uint64_t valueSize) const;
  // The writes that touch those bytes (for reports).
  std::vector<const ValueWrite *> writesAt(const std::string &table,
                                           const std::optional<Bytes> &key,
                                           uint64_t offset, uint64_t size) const;
  const AccessSite *siteFor(const llvm::CallBase *call) const;
  // Whether two snapshots agree on every byte the data plane never writes
  // (entries with no such byte are ignored, present or not, except in
  // tables whose keys only the control plane changes: there the key set
  // counts too; tables the analysis does not know are compared whole). No pass folds a byte the
  // data plane writes, so code built from `a` is the code `b` would give:
  // a counter moving beside folded configuration is no reason to rebuild.
  bool sameWhereReadOnly(const TableSnapshot &a, const TableSnapshot &b) const;
  // The same for one table's contents in two snapshots.
  bool sameWhereReadOnly(const std::string &table, const TableContents &a,
                         const TableContents &b) const;
};

// Runs the analysis. `catalog` (optional) gives key sizes, needed to prove
// constant keys; `fam` supplies MemorySSA and alias analysis per function.
TableAccessInfo
analyzeTableAccesses(llvm::Module &module, const AccessSignatureTable &sigs,
                     const TableCatalog *catalog,
                     llvm::FunctionAnalysisManager &fam);

// New-pass-manager wrapper, so passes obtain the analysis from the manager.
class TableAccessAnalysis : public llvm::AnalysisInfoMixin<TableAccessAnalysis> {
public:
  using Result = TableAccessInfo;
  TableAccessAnalysis(const AccessSignatureTable &sigs,
                      const TableCatalog *catalog)
      : sigs(&sigs), catalog(catalog) {}
  Result run(llvm::Module &module, llvm::ModuleAnalysisManager &mam);

private:
  friend llvm::AnalysisInfoMixin<TableAccessAnalysis>;
  static llvm::AnalysisKey Key;
  const AccessSignatureTable *sigs;
  const TableCatalog *catalog;
};

// Resolves the table a site's table operand refers to; nullptr when it is
// not exactly one table global.
llvm::GlobalVariable *resolveTable(llvm::Value *operand,
                                   const AccessSignatureTable &sigs);

// Prepares a freshly loaded module: numbers every access site (metadata
// `!morpheus.site`, so a site keeps its id in every specialized clone even
// after passes removed other sites), and adds the facts the backend
// guarantees about access calls as call-site attributes (key and value
// arguments are only read and never captured), so LLVM's alias analysis can
// see that a key on the stack does not escape.
void annotateAccessCalls(llvm::Module &module, const AccessSignatureTable &sigs);

// Takes back the call-site attributes annotateAccessCalls added (the key and
// value arguments' nocapture and readonly) from every access call left in
// `module`, so that the optimizer sees those calls as the program's compiler
// did. Dropping a fact never changes what the code does, only what LLVM may
// assume. For the eBPF backend, after the table passes and before O2
// (SpecializationOptions::keepAccessCallFacts says why).
void dropAccessCallFacts(llvm::Module &module, const AccessSignatureTable &sigs);

// How many sites annotateAccessCalls numbered (ids below it are sites';
// kept as module metadata, so every clone says the same even after passes
// removed sites); 0 for a module it did not annotate.
unsigned accessSiteCount(const llvm::Module &module);

} // namespace morpheus::core
