//===- HashAsArray.cpp - a hash of a small key range becomes an array ----===//
//
// A lookup in a read-only exact-match table (HASH, PERCPU_HASH with every
// CPU alike) whose keys are 1, 2, 4 or 8 bytes and, read as the integers
// the program's loads give, span at most DirectIndexSlotLimit values (any
// 16-bit key; ports, VLANs, small ids of a wider one) becomes an index into
// a derived array (DirectIndex.h): the key less the range's first is
// checked below the range's size, and its 16-bit slot says which entry
// holds the key (i + 1) or none (0). An ARRAY-like load the verifier
// inlines (~1-5 ns by the table's size) instead of a hash helper call
// (~30 ns). The hit's value is entry i of `__morpheus.TABLE.values`, the
// array every table pass hands value addresses from, so a hit reads as
// the map's value and distinct keys keep distinct addresses.
//
// Which tables: those the passes before it left, within the cost model's
// choice. inline-small-table takes a table within the inline limit as a
// chain of constants (its values fold: the model does not price that);
// where that chain would be an index chain (verifier budget), which folds
// nothing, the model chooses between the chain, this array and the map.
// Past the inline limit (read whole up to WholeTableReadLimit), the array
// against the map, its memory priced as a derived table's
// (MemoryNsPerKiB). constant-fields runs first and keeps the lookup, which
// this pass then replaces: its folded fields stay folded.
//
// Correctness: the snapshot is the whole table, which the data plane never
// writes (TableAccessAnalysis); control-plane writes go through Morpheus,
// which bumps the program guard first, and the next cycle rebuilds the
// array. A key outside the range, or inside it in an empty slot, is in no
// entry: null, as the helper answers. A key inside the range is compared
// whole (all its bytes are the integer, padding included, read through an
// opaque copy of the key pointer as the helper's memcmp reads them), so a
// slot names exactly the entry of that key. The array is a constant global
// in the constant section (a frozen read-only ARRAY map loaded with the
// program), rebuilt at every specialization, created before the swap,
// never pinned nor known to a control plane, as lpm-as-array's. The bounds
// the verifier needs (the index below the range's size, the entry below
// the entry count) are checked on opaque copies the indexes are computed
// from; they always hold, and their failure answers null.
//
//   %v = call ptr inttoptr (i64 1 to ptr)(ptr @ports, ptr %key)
// becomes
//   %i = zext(load i16 %key) - first;  %i u< size ? slot = index[%i] : null
//   slot == 0 ? null : @__morpheus.ports.values + (slot - 1) * stride
//===----------------------------------------------------------------------===//

#include "core/OpaqueValue.h"
#include "core/passes/DirectIndex.h"
#include "core/passes/TablePasses.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>

using namespace llvm;

#define DEBUG_TYPE "hash-as-array"

ALWAYS_ENABLED_STATISTIC(SitesIndexed, "hash lookups replaced by a direct index");
ALWAYS_ENABLED_STATISTIC(IndexSlots, "slots in those direct indexes");
ALWAYS_ENABLED_STATISTIC(SitesDeclined,
                         "hash lookups left to the lookup or another representation");

namespace morpheus::core {

PreservedAnalyses HashAsArrayPass::run(Module &module, ModuleAnalysisManager &mam) {
  context.declines = &SitesDeclined;
  const DataLayout &dl = module.getDataLayout();
  bool changed = rewriteEligibleLookups(
      module, mam, context,
      [&](const AccessSite &site, const TableInfo &table, const TableContents &contents,
          LookupRewriter &rewriter) {
        if (table.match != TableMatch::Exact)
          return false;
        if (contents.complete && contents.entries.empty())
          return false; // table-elimination's case
        if (context.noCompareChains)
          return declineSite(context, site, Decider::HashAsArrayPass,
                             SiteOutcome::CompareChainsOff, *context.noCompareChains);
        auto index = directIndex(table, contents, dl.isLittleEndian());
        if (!index)
          return declineSite(context, site, Decider::HashAsArrayPass,
                             SiteOutcome::NoRepresentation, toString(index.takeError()));
        RepresentationChoice choice = context.costModel.choose(
            directIndexShape(table, contents, *index), {Representation::DirectIndex});
        if (choice.chosen != Representation::DirectIndex) {
          ++SitesDeclined;
          if (context.log) {
            context.log->record(site, Decider::HashAsArrayPass, SiteOutcome::NotCheaper,
                                "the cost model prefers the " +
                                    std::string(representationName(choice.chosen)) + "; " +
                                    choice.describe());
            context.log->decisions.back().choice = choice;
          }
          return false;
        }

        LLVMContext &llvmContext = module.getContext();
        // One array per table, whatever the number of its sites.
        GlobalVariable *slots = rewriter.derivedTable(site.table, "index", [&] {
          return ConstantDataArray::get(llvmContext, ArrayRef<uint16_t>(index->slots));
        });

        CallBase &lookup = *site.call;
        auto *pointerType = cast<PointerType>(lookup.getType());
        IRBuilder<> builder(llvmContext);
        LookupRewriter::Frame frame =
            rewriter.openFrame(lookup, *site.signature.keyArg, site.table, builder, 2);
        BasicBlock *tail = frame.tail;
        Function *function = frame.head->getParent();
        auto block = [&](const Twine &suffix) {
          return BasicBlock::Create(llvmContext, site.table + suffix, function, tail);
        };
        Type *i64 = builder.getInt64Ty();
        // The key as the integer one load of it gives, read in the widest
        // loads its alignment allows (chunkValue's order).
        Value *key = nullptr;
        for (KeyChunk chunk : keyChunks(table.keySize, frame.keyAlignment)) {
          Value *part = builder.CreateZExt(
              LookupRewriter::loadKey(builder, frame, chunk.offset,
                                      builder.getIntNTy(8 * chunk.width), site.table + ".key"),
              i64);
          uint32_t shift = 8 * (dl.isLittleEndian() ? chunk.offset
                                                    : table.keySize - chunk.offset - chunk.width);
          if (shift)
            part = builder.CreateShl(part, shift);
          key = key ? builder.CreateOr(key, part) : part;
        }
        Value *offset = opaqueCopy(builder, builder.CreateSub(key, builder.getInt64(index->first)),
                                   site.table + ".offset");
        BasicBlock *inRange = block(".in.range");
        BasicBlock *miss = block(".miss");
        builder.CreateCondBr(
            builder.CreateICmpULT(offset, builder.getInt64(index->slots.size())), inRange, miss);
        builder.SetInsertPoint(inRange);
        Value *slot = builder.CreateLoad(
            builder.getInt16Ty(), builder.CreateInBoundsGEP(builder.getInt16Ty(), slots, offset),
            site.table + ".slot");
        BasicBlock *hit = block(".hit");
        builder.CreateCondBr(builder.CreateICmpEQ(slot, builder.getInt16(0)), miss, hit);
        builder.SetInsertPoint(hit);
        Value *entry = opaqueCopy(
            builder, builder.CreateSub(builder.CreateZExt(slot, i64), builder.getInt64(1)),
            site.table + ".entry.number");
        BasicBlock *found = block(".found");
        builder.CreateCondBr(
            builder.CreateICmpULT(entry, builder.getInt64(contents.entries.size())), found, miss);
        builder.SetInsertPoint(found);
        Value *pointer = rewriter.entryPointer(builder, site.table, entry);
        builder.CreateBr(tail);
        frame.result->addIncoming(pointer, found);
        miss->moveBefore(tail);
        builder.SetInsertPoint(miss);
        builder.CreateBr(tail);
        frame.result->addIncoming(ConstantPointerNull::get(pointerType), miss);
        LookupRewriter::closeFrame(lookup, frame, LookupRewriter::CallKept::No);
        ++SitesIndexed;
        IndexSlots += index->slots.size();

        if (context.log) {
          context.log->record(site, Decider::HashAsArrayPass, SiteOutcome::Applied,
                              std::to_string(contents.entries.size()) +
                                  " entries as a direct index over " +
                                  std::to_string(index->slots.size()) + " keys from " +
                                  std::to_string(index->first) + " (" +
                                  std::to_string(index->bytes()) +
                                  " bytes); other keys find none; " + choice.describe());
          context.log->decisions.back().choice = choice;
          context.log->inlined[site.table] = contents.entries;
        }
        return true;
      });
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
