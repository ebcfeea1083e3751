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
//   __u32 blocked_ttl;                 // .bss, set through mmap
//   if (ip->ttl == blocked_ttl) ...
// becomes, with blocked_ttl = 9 and a check of its 4 bytes at the entry,
//   %drop = icmp eq i8 %ttl, 9
//===----------------------------------------------------------------------===//

#include "core/passes/TablePasses.h"

#include "core/Globals.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>

#include <set>

using namespace llvm;

namespace morpheus::core {

PreservedAnalyses FoldReadOnlyGlobalsPass::run(Module &module, ModuleAnalysisManager &) {
  if (!context.globals)
    return PreservedAnalyses::all();
  const DataLayout &dl = module.getDataLayout();
  std::set<GlobalCheck> checks;
  bool changed = false;
  for (const GlobalAccess &access : analyzeGlobals(module)) {
    std::string name = access.global->getName().str();
    auto record = [&](bool applied, std::string detail) {
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
    if (!folded) {
      record(false, written || (access.loads.empty() && !access.firstWrite.empty())
                        ? "written by the program (" + access.firstWrite + ")"
                    : outside ? "its loads are in code no guard covers"
                              : "no load at a known offset to fold");
      continue;
    }
    changed = true;
    std::string detail = std::to_string(folded) + " load" + (folded == 1 ? "" : "s") +
                         " folded, checked against the live bytes at every guarded entry";
    if (written)
      detail += " (" + std::to_string(written) + " load" + (written == 1 ? "" : "s") +
                " of bytes the program writes kept)";
    record(true, detail);
  }
  if (context.log)
    context.log->globalChecks.assign(checks.begin(), checks.end());
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
