//===- FoldReadOnlyGlobals.cpp - fold the global bytes the program never writes -===//
//
// Real programs keep configuration in globals a loader sets (`.data`,
// `.bss`: a mode, a port, a feature switch) and counters beside it. The
// bytes of a writable global the program never writes (core/Globals.h: no
// store, atomic or escaping address reaches them) are configuration: every
// simple load of them at a known offset becomes the constant they hold now,
// and the folded bytes are recorded as checks (SpecializationLog::
// globalChecks).
//
// Correctness: these bytes are not protected by the program-level version
// guard, because their usual writer, a control plane holding the section
// mmapped, does not go through Morpheus. Instead, ProgramGuardPass puts the
// checks at the start of every guarded root: each loads the live bytes and
// compares them with the folded ones, and any difference runs the generic
// code, which loads the live globals. A packet that passed the checks uses
// the values it checked throughout, which is what the original does when a
// concurrent write lands after its last read. So a write is followed from
// the first packet that starts after it is visible; the optimizer polls the
// same bytes each cycle and recompiles (Optimizer::takeSnapshot). Only
// functions behind a guard are rewritten (generic copies and unguarded
// functions are left alone), and only loads of 1, 2, 4 or 8 bytes (what a
// check can compare in one load). Volatile loads are a request not to fold
// and are kept. A global whose live bytes the backend did not read
// (offline, no section layout) is left alone.
//
// A copy out of such bytes (`struct cfg c = cfg;` that SROA kept as a
// memcpy because an index into `c` varies or its address is taken) becomes
// stores of the bytes it would copy, into the same destination: the
// destination holds the same bytes after it either way, as long as the
// source held the folded ones, which the checks establish exactly as for a
// folded load (a copy is a load of each byte it spans; its range is
// recorded as checks of 1, 2, 4 or 8 bytes each, aligned as the global is).
// Later passes forward the stored constants to the loads from the
// destination. A copy larger than MaxFoldedGlobalCopy bytes is kept.
//
//   __u32 blocked_ttl;                 // .bss, set through mmap
//   if (ip->ttl == blocked_ttl) ...
// becomes, with blocked_ttl = 9 and a check of its 4 bytes at the entry,
//   %drop = icmp eq i8 %ttl, 9
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include "core/Globals.h"

#include <llvm/ADT/Statistic.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>

#include <set>

using namespace llvm;

#define DEBUG_TYPE "fold-read-only-globals"

ALWAYS_ENABLED_STATISTIC(LoadsFolded, "loads of read-only globals replaced by their live bytes");
ALWAYS_ENABLED_STATISTIC(CopiesFolded,
                         "copies out of read-only globals replaced by stores of their live bytes");
ALWAYS_ENABLED_STATISTIC(GlobalChecks,
                         "pieces of globals compared with their live bytes at every guarded entry");
ALWAYS_ENABLED_STATISTIC(GlobalsDeclined, "writable globals with nothing folded");

namespace morpheus::core {

namespace {

// Calls `each(at, size)` for consecutive pieces of [start, start + length)
// of 8, 4, 2 or 1 bytes, each as large as the alignment of `base + at`
// allows: loads and stores of them are naturally aligned.
template <typename Each>
void forEachAlignedPiece(uint64_t start, uint64_t length, Align base, Each each) {
  for (uint64_t at = start; at < start + length;) {
    uint64_t size = 8;
    while (size > start + length - at || commonAlignment(base, at).value() < size)
      size /= 2;
    each(at, size);
    at += size;
  }
}

std::string counted(unsigned count, const char *one, const char *many) {
  return std::to_string(count) + " " + (count == 1 ? one : many);
}

} // namespace

PreservedAnalyses FoldReadOnlyGlobalsPass::run(Module &module, ModuleAnalysisManager &) {
  if (!context.globals)
    return PreservedAnalyses::all();
  const DataLayout &dl = module.getDataLayout();
  std::set<GlobalCheck> checks;
  bool changed = false;
  for (const GlobalAccess &access : analyzeGlobals(module)) {
    std::string name = access.global->getName().str();
    auto record = [&](bool applied, std::string detail) {
      if (!applied)
        ++GlobalsDeclined;
      if (context.log)
        context.log->globals.push_back({name, applied, std::move(detail)});
    };
    auto value = context.globals->find(name);
    if (value == context.globals->end()) {
      record(false, "its live bytes were not read (no section layout)");
      continue;
    }
    unsigned folded = 0, written = 0, outside = 0;
    for (const GlobalLoad &load : access.loads) {
      if (context.untouchable(load.load->getFunction()->getName().str())) {
        ++outside;
        continue;
      }
      uint64_t size = dl.getTypeStoreSize(load.load->getType());
      if (access.writtenAt(load.offset, size)) {
        ++written;
        continue;
      }
      if (size != 1 && size != 2 && size != 4 && size != 8)
        continue;
      Constant *constant = constantAt(load.load->getType(), value->second, load.offset, dl);
      if (!constant)
        continue;
      checks.insert({name, load.offset,
                     Bytes(value->second.begin() + load.offset,
                           value->second.begin() + load.offset + size)});
      load.load->replaceAllUsesWith(constant);
      load.load->eraseFromParent();
      ++folded;
    }
    unsigned copiesFolded = 0, copiesWritten = 0, copiesLarge = 0;
    Align globalAlign = access.global->getPointerAlignment(dl);
    for (const GlobalCopy &copy : access.copies) {
      if (context.untouchable(copy.copy->getFunction()->getName().str())) {
        ++outside;
        continue;
      }
      if (access.writtenAt(copy.offset, copy.size)) {
        ++copiesWritten;
        continue;
      }
      if (copy.size > MaxFoldedGlobalCopy || copy.offset + copy.size > value->second.size()) {
        ++copiesLarge;
        continue;
      }
      forEachAlignedPiece(copy.offset, copy.size, globalAlign, [&](uint64_t at, uint64_t size) {
        checks.insert({name, at,
                       Bytes(value->second.begin() + at, value->second.begin() + at + size)});
      });
      IRBuilder<> builder(copy.copy);
      Value *destination = copy.copy->getRawDest();
      Align destinationAlign = copy.copy->getDestAlign().valueOrOne();
      forEachAlignedPiece(0, copy.size, destinationAlign, [&](uint64_t at, uint64_t size) {
        Type *type = builder.getIntNTy(unsigned(size * 8));
        Constant *bytes = constantAt(type, value->second, copy.offset + at, dl);
        Value *piece = at ? builder.CreateConstInBoundsGEP1_64(builder.getInt8Ty(), destination, at)
                          : destination;
        builder.CreateAlignedStore(bytes, piece, commonAlignment(destinationAlign, at));
      });
      copy.copy->eraseFromParent();
      ++copiesFolded;
    }
    if (!folded && !copiesFolded) {
      record(false, written || copiesWritten ||
                            (access.loads.empty() && access.copies.empty() &&
                             !access.firstWrite.empty())
                        ? "written by the program (" + access.firstWrite + ")"
                    : outside     ? "its loads are in code no guard covers"
                    : copiesLarge ? "copied in pieces larger than " +
                                        std::to_string(MaxFoldedGlobalCopy) + " bytes"
                                  : "no load at a known offset to fold");
      continue;
    }
    changed = true;
    LoadsFolded += folded;
    CopiesFolded += copiesFolded;
    std::string detail =
        folded && copiesFolded
            ? counted(folded, "load", "loads") + " and " + counted(copiesFolded, "copy", "copies")
        : folded ? counted(folded, "load", "loads")
                 : counted(copiesFolded, "copy", "copies");
    detail += " folded, checked against the live bytes at every guarded entry";
    if (written)
      detail += " (" + counted(written, "load", "loads") + " of bytes the program writes kept)";
    if (copiesWritten)
      detail += " (" + counted(copiesWritten, "copy", "copies") +
                " of bytes the program writes kept)";
    if (copiesLarge)
      detail += " (" + counted(copiesLarge, "copy", "copies") + " larger than " +
                std::to_string(MaxFoldedGlobalCopy) + " bytes kept)";
    record(true, detail);
  }
  GlobalChecks += checks.size();
  if (context.log)
    context.log->globalChecks.assign(checks.begin(), checks.end());
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
