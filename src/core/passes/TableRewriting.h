// What the table-specializing passes share: the run-time facts they are
// given (table catalog, snapshot), the log of what they decided at each
// site, and the IR building blocks for replacing a lookup by constants.
#pragma once

#include "core/TableAccessAnalysis.h"
#include "core/Tables.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/PassManager.h>

#include <map>
#include <set>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

struct SiteDecision {
  unsigned site = 0;
  std::string table;
  std::string function;
  std::string location;
  std::string pass;   // which pass decided, e.g. "inline-small-table"
  bool applied = false;
  std::string detail; // what was done, or why not
};

// Decisions of one specialization run; also the exact (key, value) pairs
// inlined per table, which is what change detection compares between cycles.
struct SpecializationLog {
  std::vector<SiteDecision> decisions;
  std::map<std::string, std::vector<TableEntry>> inlined;

  void record(const AccessSite &site, const char *pass, bool applied,
              std::string detail);
  // For operators: one line per specialized site, and sites left alone
  // for the same reason as one line.
  std::string toText() const;
};

struct TablePassContext {
  const TableCatalog *catalog = nullptr;
  const TableSnapshot *snapshot = nullptr;
  SpecializationLog *log = nullptr;     // may be null
  std::string constantSection;          // section for inlined values ("" = default)
  uint32_t inlineLimit = 64;            // largest table inlined whole
  // Functions whose code may run without the program guard in front of it
  // (reachable from a program that has no fallback): never specialized.
  std::set<std::string> unguardedFunctions;
};

// Why the lookup at `site` cannot be replaced by constants, or nullopt when
// it can: it must be a lookup in a resolved, read-only table whose lookup
// semantics the core models and whose lookups have no side effects.
std::optional<std::string> whyNotInlinable(const AccessSite &site,
                                           const TableAccessInfo &info,
                                           const TableCatalog &catalog);

// Builds replacement code for one lookup call. Values become constant
// globals, so LLVM's constant folding sees through loads from them.
class LookupRewriter {
public:
  LookupRewriter(llvm::Module &module, std::string constantSection)
      : module(module), section(std::move(constantSection)) {}

  // A constant global holding `value`, shared by equal values of a table.
  llvm::Constant *valueConstant(const std::string &table, const Bytes &value);

  // Replaces `lookup` by a dispatch over `entries` on the key bytes the call
  // would have read: the matching entry's value, or null when none matches.
  void replaceWithDispatch(llvm::CallBase &lookup, unsigned keyArg,
                           const std::vector<const TableEntry *> &entries,
                           const std::string &table);

  // Replaces `lookup` by a fixed result (a value constant or null).
  static void replaceWith(llvm::CallBase &lookup, llvm::Value *result);

private:
  llvm::Module &module;
  std::string section;
  std::map<std::pair<std::string, Bytes>, llvm::Constant *> values;
};

// Runs `rewrite` on every lookup site that whyNotInlinable() accepts and
// whose table has a snapshot; returns whether anything changed. `rewrite`
// returns true when it replaced the call.
using SiteRewrite = llvm::function_ref<bool(const AccessSite &, const TableInfo &,
                                            const TableContents &, LookupRewriter &)>;
bool rewriteEligibleLookups(llvm::Module &module, llvm::ModuleAnalysisManager &mam,
                            const TablePassContext &context, SiteRewrite rewrite);

} // namespace morpheus::core
