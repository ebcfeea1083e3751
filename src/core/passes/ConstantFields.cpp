//===- ConstantFields.cpp - value bytes equal in every entry -> constants -===//
//
// A read-only table too large to become code (more entries than
// `inlineLimit`) may still hold the same bytes at some offset of every
// value: one gateway for all routes, a flags field no rule sets, a kind
// that is always "forward". Every load through a lookup's result that
// reads only such bytes becomes the constant they hold, so O2 folds the
// branches that test them and what they make dead. The lookup stays: it
// still decides hit or miss and serves the other bytes.
//
// Correctness: a lookup's non-null result points at the value of one
// entry of the table (hash: the key's; LPM trie: the longest matching
// prefix's), and a load through it runs only where it is non-null (the
// verifier refuses a load through a pointer that may be null), so each
// folded load reads bytes of some entry, and those bytes are equal in
// every entry of the snapshot. The snapshot is the whole table (read whole
// up to `WholeTableReadLimit` entries, Pipeline.h). The table is never
// written by the data plane (TableAccessAnalysis), and control-plane writes
// go through Morpheus, which bumps the program-level guard first: an update
// that adds an entry with other bytes makes the specialized code fall back
// to the generic copy until the next cycle. Arrays are left alone (every
// slot below max_entries exists, listed or not); so are per-CPU values that
// differ between CPUs.
//
//   struct route { __be32 gateway; __u32 port; __u32 kind; };  // 500 routes
//   r = bpf_map_lookup_elem(&routes, &key);
//   if (r && r->kind == ROUTE_LOCAL) ...    // kind is 0 in every route
// becomes
//   %r = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %key) ; kept
//   %kind = 0                                                    ; folded
//===----------------------------------------------------------------------===//

#include "core/ValueFields.h"
#include "core/passes/TablePasses.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>

#include <algorithm>

using namespace llvm;

namespace morpheus::core {

PreservedAnalyses ConstantFieldsPass::run(Module &module, ModuleAnalysisManager &mam) {
  const DataLayout &dl = module.getDataLayout();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &) {
        if (table.match == TableMatch::Index)
          return false; // every slot exists, listed or not
        if (!contents.complete)
          return declineSite(context, site, "constant-fields",
                             "table larger than the whole-table read limit of " +
                             std::to_string(WholeTableReadLimit));
        if (contents.entries.size() < 2)
          return false; // the other passes' case
        // The bytes every entry holds alike.
        const std::optional<Bytes> &first = contents.entries.front().value;
        if (!first)
          return declineSite(context, site, "constant-fields",
                             "per-CPU values differ between CPUs");
        std::vector<bool> constant(first->size(), true);
        for (const TableEntry &entry : contents.entries) {
          if (!entry.value)
            return declineSite(context, site, "constant-fields",
                               "per-CPU values differ between CPUs");
          for (size_t byte = 0; byte < constant.size(); ++byte)
            constant[byte] = constant[byte] && (*entry.value)[byte] == (*first)[byte];
        }
        std::vector<ValueField> fields = valueFields(module, site.table);
        std::string folded;
        unsigned loads = 0;
        for (auto [load, offset] : loadsAtKnownOffsets(*site.call, dl)) {
          uint64_t size = dl.getTypeStoreSize(load->getType());
          if (offset + size > constant.size() ||
              !std::all_of(constant.begin() + offset, constant.begin() + offset + size,
                           [](bool same) { return same; }))
            continue;
          Constant *value = constantAt(load->getType(), *first, offset, dl);
          if (!value)
            continue;
          load->replaceAllUsesWith(value);
          load->eraseFromParent();
          if (loads++)
            folded += ", ";
          folded += describeValueBytes(fields, offset, size);
        }
        if (!loads)
          return declineSite(context, site, "constant-fields",
                             "no load reads bytes equal in all " +
                             std::to_string(contents.entries.size()) + " entries");
        if (context.log)
          context.log->record(site, "constant-fields", true,
                              std::to_string(loads) + " load" + (loads == 1 ? "" : "s") +
                                  " of bytes equal in all " +
                                  std::to_string(contents.entries.size()) +
                                  " entries folded (" + folded + "); the lookup stays");
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
