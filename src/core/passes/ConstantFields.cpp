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
//
// Value ranges: an integer field that differs between entries still lies
// between the smallest and the largest value the entries hold. Where that
// range decides a compare of the loaded value (a port below the port
// count, a weight never zero), the load is followed by a clamp to the
// range, on an opaque copy of it (core/OpaqueValue.h), and its users take
// the clamped value: LLVM then knows the range from the clamp and folds
// the compares it decides, and the verifier, which learns nothing of a
// value loaded from a map, follows the clamp's branches and knows it too,
// so an index bounded by a check LLVM deleted stays bounded for it (as
// backend/bpf/VerifierBounds does for divisions). The clamp changes no
// value: every entry's field lies in the range, and the guard covers the
// table as for the constants. Clamps only where a compare is decided: a
// bound nothing tests would cost its compares for nothing.
//===----------------------------------------------------------------------===//

#include "core/OpaqueValue.h"
#include "core/ValueFields.h"
#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/ConstantRange.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Intrinsics.h>

#include <algorithm>

using namespace llvm;

#define DEBUG_TYPE "constant-fields"

ALWAYS_ENABLED_STATISTIC(SitesWithConstantFields,
                         "lookups with loads folded or bounded by what every entry holds");
ALWAYS_ENABLED_STATISTIC(LoadsFolded, "loads of bytes equal in every entry replaced by constants");
ALWAYS_ENABLED_STATISTIC(LoadsBounded, "loads bounded by the range of every entry");
ALWAYS_ENABLED_STATISTIC(SitesDeclined,
                         "lookups of tables read whole with no field folded or bounded");

namespace morpheus::core {

namespace {

// The range [smallest, largest] of the unsigned integers of `type` the
// entries hold at `offset`, or nullopt when some entry's bytes cannot be
// read as one (per-CPU values that differ are declined before).
std::optional<ConstantRange> entriesRange(const TableContents &contents, Type *type,
                                          uint64_t offset, const DataLayout &dl) {
  auto *integer = dyn_cast<IntegerType>(type);
  if (!integer || integer->getBitWidth() > 64)
    return std::nullopt;
  std::optional<APInt> low, high;
  for (const TableEntry &entry : contents.entries) {
    auto *value = dyn_cast_or_null<ConstantInt>(constantAt(type, *entry.value, offset, dl));
    if (!value)
      return std::nullopt;
    const APInt &bits = value->getValue();
    if (!low || bits.ult(*low))
      low = bits;
    if (!high || bits.ugt(*high))
      high = bits;
  }
  if (!low)
    return std::nullopt;
  return ConstantRange::getNonEmpty(*low, *high + 1);
}

// Whether `range`, the range of `value`, decides a compare of it (directly
// or through integer casts) with a constant.
bool decidesACompare(Value *value, const ConstantRange &range) {
  for (User *user : value->users()) {
    if (auto *cast = dyn_cast<CastInst>(user);
        cast && cast->getType()->isIntegerTy() &&
        (isa<ZExtInst>(cast) || isa<SExtInst>(cast) || isa<TruncInst>(cast))) {
      if (decidesACompare(cast, range.castOp(cast->getOpcode(),
                                             cast->getType()->getIntegerBitWidth())))
        return true;
      continue;
    }
    auto *compare = dyn_cast<ICmpInst>(user);
    if (!compare)
      continue;
    bool valueFirst = compare->getOperand(0) == value;
    auto *other = dyn_cast<ConstantInt>(compare->getOperand(valueFirst ? 1 : 0));
    if (!other)
      continue;
    CmpInst::Predicate predicate =
        valueFirst ? compare->getPredicate() : compare->getSwappedPredicate();
    ConstantRange constant(other->getValue());
    if (range.icmp(predicate, constant) ||
        range.icmp(CmpInst::getInversePredicate(predicate), constant))
      return true;
  }
  return false;
}

// Puts the clamp to `range` after `load`, on an opaque copy, for all its
// users.
void clampToRange(LoadInst &load, const ConstantRange &range) {
  IRBuilder<> builder(load.getNextNode());
  builder.SetCurrentDebugLocation(load.getDebugLoc());
  Value *opaque = opaqueCopy(builder, &load, load.getName() + ".bounded");
  Value *bounded = opaque;
  APInt low = range.getUnsignedMin(), high = range.getUnsignedMax();
  if (!high.isAllOnes())
    bounded = builder.CreateBinaryIntrinsic(Intrinsic::umin, bounded,
                                            ConstantInt::get(load.getType(), high));
  if (!low.isZero())
    bounded = builder.CreateBinaryIntrinsic(Intrinsic::umax, bounded,
                                            ConstantInt::get(load.getType(), low));
  load.replaceUsesWithIf(bounded, [&](Use &use) { return use.getUser() != opaque; });
}

} // namespace

PreservedAnalyses ConstantFieldsPass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const DataLayout &dl = module.getDataLayout();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &) {
        if (table.match == TableMatch::Index)
          return false; // every slot exists, listed or not
        if (!contents.complete)
          return declineSite(context, site, Decider::ConstantFieldsPass,
                             SiteOutcome::NotReadWhole,
                             "table larger than the whole-table read limit of " +
                             std::to_string(WholeTableReadLimit));
        if (contents.entries.size() < 2)
          return false; // the other passes' case
        // The bytes every entry holds alike.
        const std::optional<Bytes> &first = contents.entries.front().value;
        if (!first)
          return declineSite(context, site, Decider::ConstantFieldsPass,
                             SiteOutcome::PerCpuValuesDiffer,
                             "per-CPU values differ between CPUs");
        std::vector<bool> constant(first->size(), true);
        for (const TableEntry &entry : contents.entries) {
          if (!entry.value)
            return declineSite(context, site, Decider::ConstantFieldsPass,
                               SiteOutcome::PerCpuValuesDiffer,
                               "per-CPU values differ between CPUs");
          for (size_t byte = 0; byte < constant.size(); ++byte)
            constant[byte] = constant[byte] && (*entry.value)[byte] == (*first)[byte];
        }
        std::vector<ValueField> fields = valueFields(module, site.table);
        std::string folded, bounded;
        unsigned loads = 0, ranges = 0;
        for (auto [load, offset] : loadsAtKnownOffsets(*site.call, dl)) {
          uint64_t size = dl.getTypeStoreSize(load->getType());
          if (offset + size > constant.size())
            continue;
          if (!std::all_of(constant.begin() + offset, constant.begin() + offset + size,
                           [](bool same) { return same; })) {
            std::optional<ConstantRange> range =
                entriesRange(contents, load->getType(), offset, dl);
            if (!range || range->isFullSet() || !decidesACompare(load, *range))
              continue;
            clampToRange(*load, *range);
            bounded += std::string(ranges++ ? ", " : "") +
                       describeValueBytes(fields, offset, size) + " in [" +
                       std::to_string(range->getUnsignedMin().getZExtValue()) + ", " +
                       std::to_string(range->getUnsignedMax().getZExtValue()) + "]";
            continue;
          }
          Constant *value = constantAt(load->getType(), *first, offset, dl);
          if (!value)
            continue;
          load->replaceAllUsesWith(value);
          load->eraseFromParent();
          if (loads++)
            folded += ", ";
          folded += describeValueBytes(fields, offset, size);
        }
        std::string entries = std::to_string(contents.entries.size()) + " entries";
        if (!loads && !ranges)
          return declineSite(context, site, Decider::ConstantFieldsPass,
                             SiteOutcome::NothingToFold,
                             "no load reads bytes equal in all " + entries +
                                 ", nor a field whose range decides a compare");
        ++SitesWithConstantFields;
        LoadsFolded += loads;
        LoadsBounded += ranges;
        if (context.log) {
          std::string detail;
          if (loads)
            detail = std::to_string(loads) + " load" + (loads == 1 ? "" : "s") +
                     " of bytes equal in all " + entries + " folded (" + folded + ")";
          if (ranges)
            detail += std::string(loads ? "; " : "") + std::to_string(ranges) + " load" +
                      (ranges == 1 ? "" : "s") + " bounded by the range of all " + entries +
                      " (" + bounded + ")";
          context.log->record(site, Decider::ConstantFieldsPass, SiteOutcome::Applied,
                              detail + "; the lookup stays");
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
