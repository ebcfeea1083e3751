//===- RegionAsTable.cpp - a computation over a few answers becomes a table ===//
//
// Code that reads nothing but what a few lookups answered is a function of
// which entries they answered with. Where those entries are few, the
// function has few arguments: this pass computes it once for every
// combination, at compile time, and the program loads the result from a
// derived table instead of running the code. The firewall's bit-vector
// search is the case in point: after its five lookups, the AND of five
// rule-set bitmaps over their common words and the lowest bit of the first
// non-zero word read only the five answers; for a small rule set each field
// has a few distinct sets, and the whole loop becomes two loads.
//
// A region is a set of blocks entered only through its first block, whose
// instructions neither write nor call anything but empty asm statements
// (which return their operand) and intrinsics LLVM folds, and which reads
// through pointers defined before it, its inputs, each one of a known few
// values:
//   - null, or a constant pointer into a constant global (a compare chain's
//     answer);
//   - an entry of a table's value array (`__morpheus.TABLE.values` + entry
//     × stride: lpm-as-array's, lpm-as-hash's and hash-as-array's answers),
//     any of the snapshot's entries;
//   - the answer of a lookup in a read-only array whose every slot the
//     snapshot knows (read whole, or by content with the others alike):
//     one of its values, or null for an index past its end;
//   - phis and selects of these.
// The values of an input are grouped into classes of equal bytes (null its
// own class); the program computes its class id beside the input's own
// computation (a constant, or a load from a derived array of class ids by
// entry or by slot), and the row of a derived table at the ids' mixed-radix
// index holds what leaving the region would give: which exit, the value of
// each exit phi on entry from the region, and of each value the region
// defines that code after it uses.
//
// Why it is correct: the region's instructions compute from the bytes its
// inputs point to and constants only; they store nothing, call nothing that
// acts, and use pointers only to load through them, offset them and compare
// them with null (checked: never with each other, never as integers), so
// two pointers to equal bytes give the region equal results and a class's
// representative stands for every value in it. Every value an input takes
// at run time is in one of its classes, because the tables are read-only
// for the data plane, written by the control plane only through Morpheus
// (which bumps the program guard first: the next packet runs generic code),
// and the snapshot is all of them. The row for each combination is the
// region run on the representatives, block by block, in an evaluator that
// folds each instruction with LLVM's constant folder and fails (the region
// is left alone) on anything it cannot fold, on a load outside its
// object, or past a step budget. A combination under which the region would
// load through a null pointer is one the program never brings there (the
// kernel's verifier refuses a program that could; LLVM makes it undefined):
// its row is never read and holds what a row that is read holds. The index
// is computed from ids below their class counts; it is checked below the
// row count on an opaque copy (the verifier's bound; the check always
// holds).
//
// Why the verifier accepts it: the code the region replaces computed each
// value it hands on along paths the verifier followed one by one, so the
// verifier knew each one's bounds (a loop's index, 0..7, as a constant per
// path); code after it may rely on them (that index picks a byte of an
// 8-byte value). The table hands the value on as one load, which the
// verifier knows only by its width (a byte: 0..255). So every column's
// load is clamped, on an opaque copy (core/OpaqueValue.h: LLVM cannot
// prove the clamp redundant), to the range of the values its table holds:
// the results of the combinations the region is reached by, and copies of
// one of them in the rows never read. The clamp changes no value; the
// bound is the region's own code's, at least as narrow as what the
// verifier proved of it.
//
// Declined when compare chains and regions are off for this cycle (the
// kernel refused a candidate built from the same tables with them:
// runtime/Optimizer).
//
// Runs after the passes that choose representations (their answers are its
// inputs), before the passes that instrument lookups. What a region's
// inputs can hold, and the code computing their classes, is in
// RegionAsTableInputs.cpp.
//===----------------------------------------------------------------------===//

#include "core/OpaqueValue.h"
#include "core/passes/RegionAsTableInputs.h"
#include "core/passes/TablePasses.h"

#include <llvm/ADT/PostOrderIterator.h>
#include <llvm/ADT/STLExtras.h>
#include <llvm/ADT/SetVector.h>
#include <llvm/ADT/Statistic.h>
#include <llvm/Analysis/ConstantFolding.h>
#include <llvm/IR/CFG.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

using namespace llvm;

#define DEBUG_TYPE "region-as-table"

ALWAYS_ENABLED_STATISTIC(RegionsAsTables,
                         "regions of code turned into a table indexed by the lookups' answers");
ALWAYS_ENABLED_STATISTIC(TableRows, "rows of those tables");
ALWAYS_ENABLED_STATISTIC(RegionsDeclined, "regions left as code");

namespace morpheus::core {

namespace {

using region_as_table::InputDomain;
using region_as_table::nameOf;

constexpr uint64_t MaxCombinations = 1u << 16; // rows of one table
constexpr uint64_t MaxTableBytes = 256u << 10; // all of one region's columns
constexpr size_t MaxInputs = 8;
constexpr uint64_t StepBudget = 1u << 22;   // instructions evaluated per region
// Regions smaller than this (and without a loop) cost about what their
// table's loads do.
constexpr unsigned MinWork = 12;
constexpr unsigned MaxRegionsPerFunction = 8;

// Whether `inst` may be in a region: it writes nothing, calls nothing that
// acts, and its result is a function of its operands (and of the bytes a
// load reads).
bool pure(const Instruction &inst) {
  if (auto *load = dyn_cast<LoadInst>(&inst))
    return load->isSimple();
  if (auto *call = dyn_cast<CallBase>(&inst)) {
    if (isEmptyAsmCopy(*call))
      return true;
    auto *intrinsic = dyn_cast<IntrinsicInst>(call);
    return intrinsic && (isa<DbgInfoIntrinsic>(intrinsic) || intrinsic->isLifetimeStartOrEnd() ||
                         (intrinsic->doesNotAccessMemory() && intrinsic->willReturn() &&
                          !intrinsic->mayHaveSideEffects()));
  }
  if (isa<PtrToIntInst>(inst) || isa<IntToPtrInst>(inst))
    return false;
  return isa<PHINode>(inst) || isa<BinaryOperator>(inst) || isa<CastInst>(inst) ||
         isa<ICmpInst>(inst) || isa<SelectInst>(inst) || isa<GetElementPtrInst>(inst) ||
         isa<FreezeInst>(inst) || isa<BranchInst>(inst) || isa<SwitchInst>(inst);
}

bool ignored(const Instruction &inst) {
  auto *intrinsic = dyn_cast<IntrinsicInst>(&inst);
  return intrinsic && (isa<DbgInfoIntrinsic>(intrinsic) || intrinsic->isLifetimeStartOrEnd());
}

// A candidate region: its blocks (the first its entry), and how it meets
// the code around it.
struct Region {
  BasicBlock *entry = nullptr;
  SetVector<BasicBlock *> blocks;
  std::vector<Value *> inputs;      // defined before it, read in it
  std::vector<BasicBlock *> exits;  // blocks it branches to
  // What leaving it gives: a value it defines that code after it uses, or
  // an exit phi's value on entry from it.
  std::vector<Value *> columns;
  unsigned work = 0;
  bool loops = false;

  bool contains(const BasicBlock *block) const {
    return blocks.contains(const_cast<BasicBlock *>(block));
  }
  bool worthATable() const { return loops || work >= MinWork; }
};

// The blocks reachable from `entry` through pure blocks it dominates,
// less those entered from elsewhere.
Region grow(BasicBlock &entry, const DominatorTree &dt) {
  Region region;
  region.entry = &entry;
  auto allPure = [](const BasicBlock &block) { return all_of(block, pure); };
  if (!allPure(entry))
    return region;
  SmallVector<BasicBlock *, 16> worklist{&entry};
  region.blocks.insert(&entry);
  while (!worklist.empty())
    for (BasicBlock *next : successors(worklist.pop_back_val()))
      if (!region.blocks.contains(next) && dt.dominates(&entry, next) && allPure(*next)) {
        region.blocks.insert(next);
        worklist.push_back(next);
      }
  // Blocks entered from outside leave, and with them what only they
  // entered, round by round.
  for (;;) {
    SmallPtrSet<BasicBlock *, 16> entered;
    for (BasicBlock *block : region.blocks)
      if (block != &entry && any_of(predecessors(block), [&](BasicBlock *pred) {
            return !region.blocks.contains(pred);
          }))
        entered.insert(block);
    if (entered.empty())
      break;
    region.blocks.remove_if([&](BasicBlock *block) { return entered.contains(block); });
  }
  for (BasicBlock *block : region.blocks) {
    for (BasicBlock *next : successors(block)) {
      if (!region.contains(next) && !is_contained(region.exits, next))
        region.exits.push_back(next);
      if (region.contains(next) && dt.dominates(next, block))
        region.loops = true;
    }
    for (Instruction &inst : *block)
      if (!isa<PHINode>(inst) && !inst.isTerminator() && !ignored(inst) &&
          !(isa<CallBase>(inst) && isEmptyAsmCopy(cast<CallBase>(inst))))
        ++region.work;
  }
  return region;
}

// Why `region` cannot become a table as it stands (its inputs, columns and
// uses of pointers), or nullopt; fills its inputs and columns.
std::optional<std::string> connect(Region &region) {
  SetVector<Value *> inputs;
  SetVector<Value *> columns;
  for (BasicBlock *block : region.blocks)
    for (Instruction &inst : *block) {
      if (ignored(inst))
        continue;
      for (Use &operand : inst.operands()) {
        Value *value = operand.get();
        if (isa<BasicBlock>(value) || isa<Constant>(value) || isa<InlineAsm>(value))
          continue;
        if (auto *defined = dyn_cast<Instruction>(value);
            defined && region.contains(defined->getParent()))
          continue;
        if (!value->getType()->isPointerTy())
          return "reads " + nameOf(*value) + ", defined before it";
        inputs.insert(value);
      }
      auto *call = dyn_cast<CallBase>(&inst);
      if (inst.getType()->isPointerTy() || any_of(inst.operands(), [&](Use &operand) {
            return operand->getType()->isPointerTy() && !(call && call->isCallee(&operand));
          })) {
        // Pointers only loaded through, offset, merged or compared with null.
        bool fine = isa<LoadInst>(inst) || isa<PHINode>(inst) || isa<SelectInst>(inst) ||
                    (isa<CallBase>(inst) && isEmptyAsmCopy(cast<CallBase>(inst)));
        if (auto *gep = dyn_cast<GetElementPtrInst>(&inst))
          fine = none_of(gep->indices(),
                         [](Use &index) { return index->getType()->isPointerTy(); });
        if (auto *compare = dyn_cast<ICmpInst>(&inst))
          fine = compare->isEquality() && (isa<ConstantPointerNull>(compare->getOperand(0)) ||
                                           isa<ConstantPointerNull>(compare->getOperand(1)));
        if (auto *select = dyn_cast<SelectInst>(&inst))
          fine = !select->getCondition()->getType()->isPointerTy();
        if (!fine)
          return "uses a pointer other than to load through it (" + nameOf(inst) + ")";
      }
      for (User *user : inst.users()) {
        auto *use = cast<Instruction>(user);
        if (region.contains(use->getParent()))
          continue;
        auto *phi = dyn_cast<PHINode>(use);
        bool fromRegion = phi && any_of(phi->blocks(), [&](BasicBlock *from) {
                            return region.contains(from) &&
                                   phi->getIncomingValueForBlock(from) == &inst;
                          });
        if (!fromRegion || any_of(phi->blocks(), [&](BasicBlock *from) {
              return !region.contains(from) && phi->getIncomingValueForBlock(from) == &inst;
            }))
          columns.insert(&inst);
      }
    }
  for (BasicBlock *exit : region.exits)
    for (PHINode &phi : exit->phis()) {
      std::set<Value *> fromRegion;
      for (unsigned i = 0; i < phi.getNumIncomingValues(); ++i)
        if (region.contains(phi.getIncomingBlock(i)))
          fromRegion.insert(phi.getIncomingValue(i));
      Value *only = fromRegion.size() == 1 ? *fromRegion.begin() : nullptr;
      auto *defined = dyn_cast_or_null<Instruction>(only);
      if (!fromRegion.empty() && !(only && (isa<Constant>(only) || !defined ||
                                            !region.contains(defined->getParent()))))
        columns.insert(&phi);
    }
  for (Value *column : columns)
    if (!column->getType()->isIntegerTy() || column->getType()->getIntegerBitWidth() > 64)
      return "hands " + nameOf(*column) + " (not an integer) to the code after it";
  if (inputs.empty())
    return "reads no lookup's answer";
  if (region.exits.size() > 255)
    return "has more than 255 exits";
  if (inputs.size() > MaxInputs)
    return "reads more than " + std::to_string(MaxInputs) + " answers";
  region.inputs.assign(inputs.begin(), inputs.end());
  region.columns.assign(columns.begin(), columns.end());
  return std::nullopt;
}

// What running the region on one combination of representatives gave.
struct Outcome {
  enum Kind { Left, NeverHere, Failed } kind = Failed;
  unsigned exit = 0;
  std::vector<uint64_t> columns;
  std::string why; // Failed
};

// Runs a region on constants, folding each instruction.
class Evaluator {
public:
  Evaluator(const Region &region, const DataLayout &dl, LookupRewriter &rewriter, uint64_t &steps)
      : region(region), dl(dl), rewriter(rewriter), steps(steps) {}

  Outcome run(ArrayRef<Constant *> inputs) {
    values.clear();
    for (size_t i = 0; i < inputs.size(); ++i)
      values[region.inputs[i]] = inputs[i];
    BasicBlock *block = region.entry, *from = nullptr;
    for (;;) {
      if (from) {
        std::vector<std::pair<PHINode *, Constant *>> entered;
        for (PHINode &phi : block->phis()) {
          Constant *value = operand(phi.getIncomingValueForBlock(from));
          if (!value)
            return failed("cannot evaluate " + nameOf(phi));
          entered.push_back({&phi, value});
        }
        for (auto [phi, value] : entered)
          values[phi] = value;
      }
      for (Instruction &inst : *block) {
        if (isa<PHINode>(inst) || ignored(inst))
          continue;
        if (++steps > StepBudget)
          return failed("evaluating it for every combination takes more than " +
                        std::to_string(StepBudget) + " steps");
        if (inst.isTerminator()) {
          BasicBlock *next = successor(inst);
          if (!next)
            return failed("cannot decide the branch " + nameOf(inst));
          if (!region.contains(next))
            return leave(block, next);
          from = block;
          block = next;
          break;
        }
        Outcome outcome;
        Constant *result = evaluate(inst, outcome);
        if (!result)
          return outcome.kind == Outcome::NeverHere ? outcome
                                                    : failed("cannot evaluate " + nameOf(inst) +
                                                             outcome.why);
        values[&inst] = result;
      }
    }
  }

private:
  static Outcome failed(std::string why) { return {Outcome::Failed, 0, {}, std::move(why)}; }

  Constant *operand(Value *value) {
    if (auto *constant = dyn_cast<Constant>(value))
      return ConstantFoldConstant(constant, dl);
    auto found = values.find(value);
    return found == values.end() ? nullptr : found->second;
  }

  BasicBlock *successor(Instruction &terminator) {
    if (auto *branch = dyn_cast<BranchInst>(&terminator)) {
      if (branch->isUnconditional())
        return branch->getSuccessor(0);
      auto *condition = dyn_cast_or_null<ConstantInt>(operand(branch->getCondition()));
      return condition ? branch->getSuccessor(condition->isZero() ? 1 : 0) : nullptr;
    }
    if (auto *choice = dyn_cast<SwitchInst>(&terminator)) {
      auto *condition = dyn_cast_or_null<ConstantInt>(operand(choice->getCondition()));
      return condition ? choice->findCaseValue(condition)->getCaseSuccessor() : nullptr;
    }
    return nullptr;
  }

  Constant *evaluate(Instruction &inst, Outcome &outcome) {
    SmallVector<Constant *, 4> operands;
    for (Value *value : inst.operands()) {
      if (isa<BasicBlock>(value) || isa<InlineAsm>(value) || isa<Function>(value))
        continue;
      Constant *constant = operand(value);
      if (!constant)
        return nullptr;
      operands.push_back(constant);
    }
    Constant *result = nullptr;
    if (auto *load = dyn_cast<LoadInst>(&inst)) {
      result = evaluateLoad(*load, operands[0], outcome);
    } else if (auto *call = dyn_cast<CallBase>(&inst)) {
      if (isEmptyAsmCopy(*call))
        result = operands[0];
      else if (Function *callee = call->getCalledFunction();
               callee && canConstantFoldCallTo(call, callee))
        result = ConstantFoldCall(call, callee, operands);
    } else if (auto *compare = dyn_cast<CmpInst>(&inst)) {
      result = ConstantFoldCompareInstOperands(compare->getPredicate(), operands[0], operands[1],
                                               dl);
    } else {
      result = ConstantFoldInstOperands(&inst, operands, dl);
    }
    // Poison, undef and integers LLVM could not fold to a number are
    // values the region's code could not be replaced by.
    if (result && (isa<UndefValue>(result) ||
                   (isa<ConstantExpr>(result) && !inst.getType()->isPointerTy())))
      result = nullptr;
    return result;
  }

  Constant *evaluateLoad(LoadInst &load, Constant *pointer, Outcome &outcome) {
    APInt offset(dl.getIndexTypeSizeInBits(pointer->getType()), 0);
    Value *base =
        pointer->stripAndAccumulateConstantOffsets(dl, offset, /*AllowNonInbounds=*/true);
    // Null, or an offset from it (which LLVM folds to an integer's
    // address: the region makes none itself).
    auto *address = dyn_cast<ConstantExpr>(base);
    if (isa<ConstantPointerNull>(base) ||
        (address && address->getOpcode() == Instruction::IntToPtr)) {
      outcome.kind = Outcome::NeverHere;
      return nullptr;
    }
    auto *global = dyn_cast<GlobalVariable>(base);
    if (!global || !global->isConstant() || !global->hasDefinitiveInitializer()) {
      outcome.why = ": it loads from memory that is not constant";
      return nullptr;
    }
    uint64_t size = dl.getTypeStoreSize(load.getType());
    uint64_t end = dl.getTypeAllocSize(global->getValueType());
    if (offset.isNegative() || offset.getZExtValue() + size > end) {
      outcome.why = ": it loads outside " + global->getName().str();
      return nullptr;
    }
    // Within a value array, a load stays inside one value.
    if (std::optional<std::string> table = rewriter.valueArrayTable(*global)) {
      uint64_t stride = rewriter.valueStride(*table);
      uint64_t within = offset.getZExtValue() % stride;
      if (within + size > stride) {
        outcome.why = ": it loads across two values of " + *table;
        return nullptr;
      }
    }
    return ConstantFoldLoadFromConst(global->getInitializer(), load.getType(), offset, dl);
  }

  Outcome leave(BasicBlock *from, BasicBlock *exit) {
    Outcome outcome{Outcome::Left,
                    unsigned(find(region.exits, exit) - region.exits.begin()),
                    {},
                    {}};
    for (Value *column : region.columns) {
      Constant *value = nullptr;
      if (auto *phi = dyn_cast<PHINode>(column); phi && phi->getParent() == exit) {
        value = operand(phi->getIncomingValueForBlock(from));
        if (!value)
          return failed("cannot evaluate " + nameOf(*phi));
      } else if (!isa<PHINode>(column) || region.contains(cast<PHINode>(column)->getParent())) {
        auto found = values.find(column);
        value = found == values.end() ? nullptr : found->second;
      }
      auto *integer = dyn_cast_or_null<ConstantInt>(value);
      if (value && !integer)
        return failed("cannot evaluate " + nameOf(*column));
      outcome.columns.push_back(integer ? integer->getValue().getZExtValue() : 0);
    }
    return outcome;
  }

  const Region &region;
  const DataLayout &dl;
  LookupRewriter &rewriter;
  uint64_t &steps;
  DenseMap<Value *, Constant *> values;
};

// The region's table: a column of rows per exit and per value handed on.
struct Table {
  uint64_t rows = 0;
  std::vector<uint64_t> exits;                 // by row
  std::vector<std::vector<uint64_t>> columns;  // by column, by row
  unsigned reached = 0;                        // rows some packet can read

  static unsigned widthOf(const std::vector<uint64_t> &values) {
    uint64_t largest = values.empty() ? 0 : *std::max_element(values.begin(), values.end());
    return largest <= 0xff ? 8 : largest <= 0xffff ? 16 : largest <= 0xffffffffu ? 32 : 64;
  }
  static bool constant(const std::vector<uint64_t> &values) {
    return std::all_of(values.begin(), values.end(), [&](uint64_t v) { return v == values[0]; });
  }
  uint64_t bytes(const Region &region) const {
    uint64_t total = region.exits.size() > 1 && !constant(exits) ? rows : 0;
    for (const std::vector<uint64_t> &column : columns)
      if (!constant(column))
        total += rows * widthOf(column) / 8;
    return total;
  }
};

// `loaded`, a column's value as its table's load gives it (zero-extended
// from Table::widthOf(values) bits), clamped to the range of `values`, on
// an opaque copy (see the header: the region's own bound, for the
// verifier). The range is read unsigned, or signed when that is narrower
// (a column of small negative and positive values); no clamp where the
// load's width says as much.
Value *boundColumn(IRBuilderBase &builder, Value *loaded, const std::vector<uint64_t> &values,
                   const Twine &name) {
  unsigned bits = loaded->getType()->getIntegerBitWidth();
  APInt first(bits, values.front());
  APInt unsignedLow = first, unsignedHigh = first, signedLow = first, signedHigh = first;
  for (uint64_t value : values) {
    APInt v(bits, value);
    unsignedLow = APIntOps::umin(unsignedLow, v);
    unsignedHigh = APIntOps::umax(unsignedHigh, v);
    signedLow = APIntOps::smin(signedLow, v);
    signedHigh = APIntOps::smax(signedHigh, v);
  }
  ConstantRange unsignedRange = ConstantRange::getNonEmpty(unsignedLow, unsignedHigh + 1);
  ConstantRange signedRange = ConstantRange::getNonEmpty(signedLow, signedHigh + 1);
  unsigned stored = Table::widthOf(values);
  ConstantRange fromLoad =
      stored >= bits ? ConstantRange::getFull(bits)
                     : ConstantRange(APInt::getZero(bits), APInt::getOneBitSet(bits, stored));
  bool isSigned = signedRange.isSizeStrictlySmallerThan(unsignedRange);
  const ConstantRange &range = isSigned ? signedRange : unsignedRange;
  if (!range.isSizeStrictlySmallerThan(fromLoad))
    return loaded;
  return boundedCopy(builder, loaded, range, isSigned, name);
}

class RegionRewriter {
public:
  RegionRewriter(Module &module, const TablePassContext &context, const TableAccessInfo &info,
                 LookupRewriter &rewriter)
      : module(module), context(context), info(info), rewriter(rewriter) {}

  // Turns the first region of `function` worth a table, in reverse post
  // order (an outer region before those inside it), into one; false when
  // none is left. `settled` holds the blocks of regions already turned or
  // declined: a region inside a declined one is not tried (it would read
  // the outer one's values).
  bool rewriteOne(Function &function, std::set<BasicBlock *> &settled) {
    DominatorTree dt(function);
    ReversePostOrderTraversal<Function *> order(&function);
    for (BasicBlock *block : order) {
      if (block == &function.getEntryBlock() || !block->phis().empty() ||
          settled.count(block) || !usesAnAnswer(*block))
        continue;
      Region region = grow(*block, dt);
      if (!region.contains(block) || !region.worthATable())
        continue;
      settled.insert(region.blocks.begin(), region.blocks.end());
      std::vector<std::unique_ptr<InputDomain>> domains;
      std::optional<std::string> why = connect(region);
      if (!why)
        why = collectDomains(region, domains);
      if (!why && context.noRegions) {
        record(region, domains, SiteOutcome::RegionsOff, *context.noRegions);
        continue;
      }
      Table table;
      if (!why)
        why = evaluate(region, domains, table);
      if (why) {
        record(region, domains, SiteOutcome::RegionNotTabulable, "left as code: it " + *why);
        continue;
      }
      build(region, domains, table);
      return true;
    }
    return false;
  }

  // The lookups whose answers only regions read, and the constants that
  // stood for values in maps.
  void eraseWhatIsLeft() {
    for (CallBase *call : unusedCandidates)
      if (call->use_empty())
        call->eraseFromParent();
    for (GlobalVariable *global : scratch) {
      global->removeDeadConstantUsers();
      if (global->use_empty())
        global->eraseFromParent();
    }
  }

private:
  // Whether `block` uses a pointer that a lookup of a table in the
  // snapshot answered (or a representation of it).
  bool usesAnAnswer(BasicBlock &block) {
    for (Instruction &inst : block)
      for (Value *operand : inst.operands())
        if (operand->getType()->isPointerTy() && !isa<GlobalValue>(operand) &&
            answered(operand))
          return true;
    return false;
  }

  bool answered(Value *pointer) {
    SmallVector<Value *, 8> worklist{pointer};
    SmallPtrSet<Value *, 16> seen{pointer};
    while (!worklist.empty()) {
      Value *value = worklist.pop_back_val()->stripPointerCasts();
      SmallVector<Value *, 4> from;
      if (auto *gep = dyn_cast<GEPOperator>(value)) {
        if (auto *global = dyn_cast<GlobalVariable>(gep->getPointerOperand());
            global && rewriter.valueArrayTable(*global))
          return true;
        from.push_back(gep->getPointerOperand());
      } else if (auto *phi = dyn_cast<PHINode>(value)) {
        from.append(phi->op_begin(), phi->op_end());
      } else if (auto *select = dyn_cast<SelectInst>(value)) {
        from = {select->getTrueValue(), select->getFalseValue()};
      } else if (auto *call = dyn_cast<CallBase>(value)) {
        if (isEmptyAsmCopy(*call))
          from.push_back(call->getArgOperand(0));
        else if (const AccessSite *site = info.siteFor(call);
                 site && site->signature.kind == AccessKind::Lookup &&
                 context.snapshot->count(site->table))
          return true;
      } else if (auto *global = dyn_cast<GlobalVariable>(value)) {
        if (rewriter.valueArrayTable(*global))
          return true;
      }
      for (Value *next : from)
        if (seen.insert(next).second)
          worklist.push_back(next);
    }
    return false;
  }

  std::optional<std::string> collectDomains(const Region &region,
                                            std::vector<std::unique_ptr<InputDomain>> &domains) {
    uint64_t combinations = 1;
    for (Value *input : region.inputs) {
      domains.push_back(
          std::make_unique<InputDomain>(module, context, info, rewriter, leafNumbers, scratch));
      if (std::optional<std::string> why = domains.back()->collect(input))
        return "reads " + nameOf(*input) + ": " + *why;
      combinations *= domains.back()->size();
      if (combinations > MaxCombinations)
        return "reads answers with more than " + std::to_string(MaxCombinations) +
               " combinations of distinct values";
    }
    return std::nullopt;
  }

  std::optional<std::string> evaluate(const Region &region,
                                      const std::vector<std::unique_ptr<InputDomain>> &domains,
                                      Table &table) {
    table.rows = 1;
    for (const auto &domain : domains)
      table.rows *= domain->size();
    table.columns.assign(region.columns.size(), std::vector<uint64_t>(table.rows, 0));
    table.exits.assign(table.rows, 0);
    uint64_t steps = 0;
    Evaluator evaluator(region, module.getDataLayout(), rewriter, steps);
    std::vector<Constant *> inputs(domains.size());
    std::optional<uint64_t> firstReached;
    std::vector<bool> reached(table.rows, false);
    for (uint64_t row = 0; row < table.rows; ++row) {
      // Mixed radix, the last input fastest (as the program computes it).
      uint64_t rest = row;
      for (size_t i = domains.size(); i-- > 0;) {
        inputs[i] = domains[i]->representative(rest % domains[i]->size());
        rest /= domains[i]->size();
      }
      Outcome outcome = evaluator.run(inputs);
      if (outcome.kind == Outcome::Failed)
        return outcome.why;
      if (outcome.kind == Outcome::NeverHere)
        continue;
      ++table.reached;
      reached[row] = true;
      firstReached = firstReached.value_or(row);
      table.exits[row] = outcome.exit;
      for (size_t column = 0; column < outcome.columns.size(); ++column)
        table.columns[column][row] = outcome.columns[column];
    }
    if (table.reached == 0)
      return "is reached by no combination of its answers";
    // Rows never read repeat one that is: each column's range stays that
    // of the region's results (the bound its load is clamped to).
    for (uint64_t row = 0; row < table.rows; ++row)
      if (!reached[row]) {
        table.exits[row] = table.exits[*firstReached];
        for (std::vector<uint64_t> &column : table.columns)
          column[row] = column[*firstReached];
      }
    if (table.bytes(region) > MaxTableBytes)
      return "would need a table of " + std::to_string(table.bytes(region)) + " bytes (limit " +
             std::to_string(MaxTableBytes) + ")";
    return std::nullopt;
  }

  void build(const Region &region, const std::vector<std::unique_ptr<InputDomain>> &domains,
             const Table &table) {
    LLVMContext &llvmContext = module.getContext();
    Function &function = *region.entry->getParent();
    std::string prefix = function.getName().str() + ".region" + std::to_string(regionNumber++);
    std::vector<Value *> ids;
    for (size_t i = 0; i < domains.size(); ++i)
      ids.push_back(domains[i]->buildId(region.inputs[i]));

    BasicBlock *head = BasicBlock::Create(llvmContext, prefix, &function, region.entry);
    for (BasicBlock *pred : SmallVector<BasicBlock *, 4>(predecessors(region.entry)))
      if (!region.contains(pred))
        pred->getTerminator()->replaceSuccessorWith(region.entry, head);
    IRBuilder<> builder(head);
    Value *index = ids[0];
    for (size_t i = 1; i < domains.size(); ++i)
      index = builder.CreateAdd(builder.CreateMul(index, builder.getInt64(domains[i]->size())),
                                ids[i]);
    index = opaqueCopy(builder, index, prefix + ".row");
    Value *inside = builder.CreateICmpULT(index, builder.getInt64(table.rows));
    index = builder.CreateSelect(inside, index, builder.getInt64(0));
    auto load = [&](const std::vector<uint64_t> &values, Type *type,
                    const std::string &name) -> Value * {
      if (Table::constant(values))
        return ConstantInt::get(type, values[0]);
      unsigned width = Table::widthOf(values);
      GlobalVariable *global = rewriter.derivedTable(prefix, name, [&]() -> Constant * {
        auto narrowed = [&](auto element) -> Constant * {
          std::vector<decltype(element)> narrow(values.begin(), values.end());
          return ConstantDataArray::get(llvmContext, ArrayRef<decltype(element)>(narrow));
        };
        switch (width) {
        case 8:
          return narrowed(uint8_t());
        case 16:
          return narrowed(uint16_t());
        case 32:
          return narrowed(uint32_t());
        default:
          return ConstantDataArray::get(llvmContext, ArrayRef<uint64_t>(values));
        }
      });
      Type *stored = builder.getIntNTy(width);
      Value *value = builder.CreateLoad(stored, builder.CreateInBoundsGEP(stored, global, index),
                                        prefix + "." + name);
      return builder.CreateZExtOrTrunc(value, type);
    };
    std::vector<Value *> columnValues;
    for (size_t i = 0; i < region.columns.size(); ++i) {
      std::string name = "c" + std::to_string(i);
      Value *value = load(table.columns[i], region.columns[i]->getType(), name);
      if (!isa<Constant>(value) && !context.faults.unboundedRegionColumns)
        value = boundColumn(builder, value, table.columns[i], prefix + "." + name + ".bounded");
      columnValues.push_back(value);
    }

    // Code after the region reads its values from the table's.
    for (size_t i = 0; i < region.columns.size(); ++i)
      if (auto *defined = dyn_cast<Instruction>(region.columns[i]);
          defined && region.contains(defined->getParent()))
        defined->replaceUsesWithIf(columnValues[i], [&](Use &use) {
          auto *user = cast<Instruction>(use.getUser());
          if (region.contains(user->getParent()))
            return false;
          auto *phi = dyn_cast<PHINode>(user);
          return !phi || !region.contains(phi->getIncomingBlock(use));
        });
    // The exits the table names (one, when every row leaves alike).
    std::vector<BasicBlock *> targets = region.exits;
    if (Table::constant(table.exits))
      targets = {region.exits[table.exits[0]]};
    for (BasicBlock *exit : targets)
      for (PHINode &phi : exit->phis()) {
        Value *entered = nullptr;
        for (unsigned i = 0; i < phi.getNumIncomingValues(); ++i)
          if (region.contains(phi.getIncomingBlock(i)))
            entered = phi.getIncomingValue(i);
        if (!entered)
          continue;
        auto column = find(region.columns, &phi);
        phi.addIncoming(column != region.columns.end()
                            ? columnValues[column - region.columns.begin()]
                            : entered,
                        head);
      }
    if (targets.size() == 1) {
      builder.CreateBr(targets[0]);
    } else {
      Value *exit = load(table.exits, builder.getInt8Ty(), "exit");
      SwitchInst *choice = builder.CreateSwitch(exit, region.exits[0], region.exits.size() - 1);
      for (size_t i = 1; i < region.exits.size(); ++i)
        choice->addCase(builder.getInt8(i), region.exits[i]);
    }
    TableRows += table.rows;
    record(region, domains, SiteOutcome::Applied,
           std::to_string(region.blocks.size()) + " blocks (" + std::to_string(region.work) +
               " instructions" + (region.loops ? ", a loop" : "") + ") as a table of " +
               std::to_string(table.rows) + " rows (" + std::to_string(table.reached) +
               " reachable, " + std::to_string(table.bytes(region)) + " bytes) indexed by " +
               std::to_string(domains.size()) + " answers' classes");
    DeleteDeadBlocks(SmallVector<BasicBlock *, 16>(region.blocks.begin(), region.blocks.end()));
    for (const auto &domain : domains)
      for (CallBase *lookup : domain->lookups()) {
        unusedCandidates.insert(lookup);
        if (const AccessSite *site = info.siteFor(lookup); site && context.log)
          context.log->inlined[site->table] = context.snapshot->at(site->table).entries;
      }
  }

  void record(const Region &region, const std::vector<std::unique_ptr<InputDomain>> &domains,
              SiteOutcome outcome, std::string detail) {
    ++(outcome == SiteOutcome::Applied ? RegionsAsTables : RegionsDeclined);
    if (!context.log)
      return;
    std::set<std::string> tables;
    for (const auto &domain : domains)
      tables.insert(domain->tables().begin(), domain->tables().end());
    std::string joined;
    for (const std::string &table : tables)
      joined += (joined.empty() ? "" : "+") + table;
    // A region is no access site: it is logged under the first site whose
    // answer it reads (0 when every answer is a representation's).
    std::optional<unsigned> site;
    for (const auto &domain : domains)
      for (CallBase *lookup : domain->lookups())
        if (const AccessSite *known = info.siteFor(lookup); known && (!site || known->id < *site))
          site = known->id;
    const Instruction *first = region.entry->getFirstNonPHIOrDbg();
    context.log->record(site.value_or(0), joined.empty() ? "(no table)" : joined,
                        region.entry->getParent()->getName().str(),
                        first ? locationOf(*first) : "", Decider::RegionAsTablePass, outcome,
                        std::move(detail));
  }

  Module &module;
  const TablePassContext &context;
  const TableAccessInfo &info;
  LookupRewriter &rewriter;
  unsigned regionNumber = 0;
  unsigned leafNumbers = 0;
  std::set<CallBase *> unusedCandidates;
  std::vector<GlobalVariable *> scratch;
};

} // namespace

PreservedAnalyses RegionAsTablePass::run(Module &module, ModuleAnalysisManager &mam) {
  const TableAccessInfo &info = mam.getResult<TableAccessAnalysis>(module);
  LookupRewriter rewriter(module, context);
  RegionRewriter regions(module, context, info, rewriter);
  bool changed = false;
  for (Function &function : module) {
    if (function.isDeclaration() || context.untouchable(function.getName().str()))
      continue;
    std::set<BasicBlock *> settled;
    for (unsigned i = 0; i < MaxRegionsPerFunction && regions.rewriteOne(function, settled); ++i)
      changed = true;
  }
  // Only now: the analysis's sites point at these calls until the end.
  regions.eraseWhatIsLeft();
  return changed ? PreservedAnalyses::none() : PreservedAnalyses::all();
}

} // namespace morpheus::core
