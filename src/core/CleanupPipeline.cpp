//===- CleanupPipeline.cpp - LLVM's scalar clean-up, once, for a version ----===//
//
// A version starts from the program as clang's O2 left it (the pristine
// bitcode). What the table passes and the guard add to it is of a few
// kinds: constants where loads were (folded entries, fields, globals),
// branches on them, lookups as code (compare chains, arrays, generated
// functions), copies of code for hot keys and flows, and the guard's
// runtime as internal functions to inline. Making that code fast takes
// inlining, constant propagation, instruction combining, jump threading,
// CFG simplification, redundancy and dead-code elimination: the scalar
// passes of O2's function simplification, in its order, gone through once
// (InstCombine twice, where that pass list has it). O2 as a whole
// runs them again and again (InstCombine eight times, inside the inliner's
// iteration over the call graph, then again in its optimization pipeline)
// and adds loop rotation, unswitching, unrolling and vectorization, over
// code clang has already put through them. On the versions measured
// below, the clean-up's code is at most one instruction longer than O2's.
//
// Why it is correct: every pass here is one of LLVM's own and keeps what
// the module computes, as O2 does; the clean-up only leaves passes out.
// What the kernel's verifier accepts is the other half. BPF's callback for
// O2's early simplification runs here at the same point: its adjust-opt
// serializes comparisons and guards values so that InstCombine does not
// merge the range checks the verifier needs apart. Its other callbacks are
// left out. Those at the pipeline's start and late in the scalar passes
// lower CO-RE accesses and static offsets, which clang's O2 has already
// lowered in the pristine bitcode and the passes add none of. The one
// after each InstCombine is a SimplifyCFG that hoists instructions common
// to both successors of a branch: before the later jump threading and CFG
// simplification here, it left the address of a context field as a phi of
// two copies (the guard's two paths), and the kernel refuses a load through
// a context pointer so computed ("dereference of modified ctx ptr",
// Differential.L2SwitchSmoke). O2's own output of the same modules has
// no such phi: its later passes undo it.
//
// What it costs: the nf/ programs' versions and their forced recompiles
// (74 modules as O2 received them, 2026-12-04) came out of it, while it
// still ran the three passes left out below, in 0.53 of O2's time, their
// code 14 BPF instructions longer over all 74, at most one per version,
// 38 of them byte for byte O2's.
//
// Three of O2's function passes are left out as well: SCCP after GVN, and
// the last InstCombine with the SimplifyCFG after it. On those 74 modules
// and 297 more (up to four versions of each of 86 corpus programs, as nine
// kernel test suites and the bench presets built them, 2026-12-04) the
// code is byte for byte what the pipeline with them gives; the nf/
// modules' clean-up takes 0.86 of the time it took with them. Each other
// pass changed some of those objects when left out (DSE 20 of the 297,
// the second jump threading and CVP 4, EarlyCSE 1), so they stay.
//
//===----------------------------------------------------------------------===//
#include "core/CleanupPipeline.h"

#include <llvm/Analysis/CGSCCPassManager.h>
#include <llvm/Passes/OptimizationLevel.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Transforms/IPO/GlobalDCE.h>
#include <llvm/Transforms/IPO/GlobalOpt.h>
#include <llvm/Transforms/IPO/Inliner.h>
#include <llvm/Transforms/IPO/SCCP.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Scalar/ADCE.h>
#include <llvm/Transforms/Scalar/BDCE.h>
#include <llvm/Transforms/Scalar/CorrelatedValuePropagation.h>
#include <llvm/Transforms/Scalar/DeadStoreElimination.h>
#include <llvm/Transforms/Scalar/EarlyCSE.h>
#include <llvm/Transforms/Scalar/GVN.h>
#include <llvm/Transforms/Scalar/JumpThreading.h>
#include <llvm/Transforms/Scalar/Reassociate.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>

namespace morpheus::core {

using namespace llvm;

ModulePassManager buildCleanupPipeline(PassBuilder &builder) {
  FunctionPassManager function;
  function.addPass(SROAPass(SROAOptions::ModifyCFG));
  function.addPass(EarlyCSEPass());
  function.addPass(InstCombinePass());
  function.addPass(JumpThreadingPass());
  function.addPass(CorrelatedValuePropagationPass());
  function.addPass(SimplifyCFGPass());
  function.addPass(ReassociatePass());
  function.addPass(GVNPass());
  function.addPass(BDCEPass());
  function.addPass(InstCombinePass());
  function.addPass(JumpThreadingPass());
  function.addPass(CorrelatedValuePropagationPass());
  function.addPass(DSEPass());
  function.addPass(ADCEPass());
  function.addPass(SimplifyCFGPass());

  ModulePassManager module;
  builder.invokePipelineEarlySimplificationEPCallbacks(module, OptimizationLevel::O2);
  // The guard's runtime and the generated lookups are functions of their
  // own: inlined first, so that everything after sees them in place.
  module.addPass(createModuleToPostOrderCGSCCPassAdaptor(InlinerPass()));
  module.addPass(IPSCCPPass());
  module.addPass(GlobalOptPass());
  module.addPass(createModuleToFunctionPassAdaptor(std::move(function)));
  module.addPass(GlobalDCEPass());
  return module;
}

} // namespace morpheus::core
