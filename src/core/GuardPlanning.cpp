#include "core/GuardPlanning.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/IR/DebugInfoMetadata.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/ValueMapper.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>

using namespace llvm;

namespace morpheus::core {

bool GuardPlan::guarded(const GuardDecision &root) const {
  return root.fallback != Fallback::None;
}

bool isCallback(const Function &function) {
  return function.hasAddressTaken(nullptr, /*IgnoreCallbackUses=*/false,
                                  /*IgnoreAssumeLikeCalls=*/true, /*IgnoreLLVMUsed=*/true);
}

std::vector<Function *> guardRoots(Module &module, const AccessSignatureTable &sigs) {
  std::vector<Function *> roots;
  for (Function &function : module)
    if (!function.isDeclaration() && (sigs.isProgramEntry(function) || isCallback(function)))
      roots.push_back(&function);
  return roots;
}

std::set<Function *> reachableFrom(Function *root, bool throughAddresses) {
  std::set<Function *> reached;
  std::vector<Function *> worklist{root};
  while (!worklist.empty()) {
    Function *function = worklist.back();
    worklist.pop_back();
    if (function->isDeclaration() || !reached.insert(function).second)
      continue;
    for (Instruction &inst : instructions(*function)) {
      if (auto *call = dyn_cast<CallBase>(&inst))
        if (Function *callee = call->getCalledFunction())
          worklist.push_back(callee);
      if (throughAddresses)
        for (Value *operand : inst.operands())
          if (auto *taken = dyn_cast<Function>(operand->stripPointerCasts()))
            worklist.push_back(taken);
    }
  }
  return reached;
}

bool registersCallbacks(Function &entry) {
  std::set<Function *> reached = reachableFrom(&entry, /*throughAddresses=*/true);
  return std::any_of(reached.begin(), reached.end(), [&](Function *function) {
    return function != &entry && isCallback(*function);
  });
}

namespace {

// A copy of `original` named NAME__morpheus_generic (BTF names must be C
// identifiers), internal, in .text, calling the copies in `copies`.
void cloneGeneric(Function *original, Function *copy,
                  const std::map<Function *, Function *> &copies) {
  // One map per function: sharing it would hand one copy's debug scopes
  // to another.
  ValueToValueMapTy map;
  for (const auto &[from, to] : copies)
    map[from] = to;
  for (auto [from, to] : zip(original->args(), copy->args())) {
    to.setName(from.getName());
    map[&from] = &to;
  }
  SmallVector<ReturnInst *, 8> returns;
  CloneFunctionInto(copy, original, map, CloneFunctionChangeType::LocalChangesOnly, returns);
  copy->setLinkage(GlobalValue::InternalLinkage);
  copy->setVisibility(GlobalValue::DefaultVisibility);
  copy->setDSOLocal(true);
  copy->setSection("");
  if (DISubprogram *subprogram = copy->getSubprogram(); subprogram && subprogram->isDistinct())
    subprogram->replaceOperandWith(2, MDString::get(copy->getContext(), copy->getName()));
}

} // namespace

Expected<GuardPlan> planGuards(Module &module, const AccessSignatureTable &sigs,
                               const std::vector<EntryFallback> &entries,
                               function_ref<bool(const Function &)> mayBeSpecialized) {
  GuardPlan plan;
  std::vector<Function *> roots = guardRoots(module, sigs);
  std::map<std::string, const EntryFallback *> decided;
  for (const EntryFallback &entry : entries) {
    Function *function = module.getFunction(entry.function);
    if (!function || function->isDeclaration() || !sigs.isProgramEntry(*function))
      return makeError("guard: '{0}' is not a program entry of the module", entry.function);
    decided[entry.function] = &entry;
  }

  // needs(F): F or something it calls may be specialized.
  std::map<Function *, std::set<Function *>> calls;
  auto reach = [&](Function *function) -> const std::set<Function *> & {
    auto [it, added] = calls.try_emplace(function);
    if (added)
      it->second = reachableFrom(function, /*throughAddresses=*/false);
    return it->second;
  };
  auto needs = [&](Function *function) {
    const std::set<Function *> &reached = reach(function);
    return std::any_of(reached.begin(), reached.end(),
                       [&](Function *f) { return mayBeSpecialized(*f); });
  };

  std::map<Function *, const GuardDecision *> entryDecision;
  std::vector<GuardDecision> decisions;
  for (Function *root : roots) {
    GuardDecision decision;
    decision.function = root->getName().str();
    decision.callback = !sigs.isProgramEntry(*root);
    if (!decision.callback) {
      if (auto it = decided.find(decision.function); it != decided.end()) {
        decision.fallback = it->second->fallback;
        decision.slot = it->second->slot;
        decision.failureVerdict = it->second->failureVerdict;
        decision.detail = it->second->detail;
        decision.versionSlot = it->second->versionSlot;
      } else {
        decision.detail = "no fallback decided for this program";
      }
    }
    decisions.push_back(decision);
  }
  for (size_t i = 0; i < roots.size(); ++i)
    if (!decisions[i].callback)
      entryDecision[roots[i]] = &decisions[i];
  // A callback runs inside the verification (and the program) of whichever
  // entry registered it: it can fall back only inside the program, and only
  // if every such entry affords that.
  for (size_t i = 0; i < roots.size(); ++i) {
    GuardDecision &decision = decisions[i];
    if (!decision.callback)
      continue;
    decision.fallback = Fallback::InProgram;
    decision.detail = "callback: falls back inside the program";
    for (const auto &[entry, entryPlan] : entryDecision) {
      if (entryPlan->fallback == Fallback::InProgram ||
          !reachableFrom(entry, /*throughAddresses=*/true).count(roots[i]))
        continue;
      decision.fallback = Fallback::None;
      decision.detail = "callback of program '" + entryPlan->function + "', whose fallback is " +
                        fallbackName(entryPlan->fallback) +
                        (entryPlan->detail.empty() ? "" : " (" + entryPlan->detail + ")") +
                        "; a callback can only fall back inside the program";
      break;
    }
  }

  std::map<Function *, Function *> copies;
  for (size_t i = 0; i < roots.size(); ++i) {
    GuardDecision &decision = decisions[i];
    if (!needs(roots[i])) {
      decision.fallback = Fallback::None;
      decision.detail = "nothing it reaches is specialized: no guard";
      continue;
    }
    if (decision.fallback == Fallback::None) {
      for (Function *reached : reach(roots[i]))
        plan.unguarded.try_emplace(reached->getName().str(),
                                   "runs under '" + decision.function + "', which has no guard (" +
                                       decision.detail + ")");
      continue;
    }
    if (decision.fallback == Fallback::InProgram)
      for (Function *reached : reach(roots[i]))
        if (needs(reached) && !copies.count(reached))
          copies[reached] = Function::Create(reached->getFunctionType(),
                                             GlobalValue::InternalLinkage,
                                             reached->getAddressSpace(),
                                             reached->getName() + "__morpheus_generic", &module);
  }
  for (auto [original, copy] : copies) {
    cloneGeneric(original, copy, copies);
    plan.genericFunctions.insert(copy->getName().str());
  }
  for (size_t i = 0; i < roots.size(); ++i)
    if (decisions[i].fallback == Fallback::InProgram) {
      Function *copy = copies.at(roots[i]);
      // The fallback path is the generic copy itself, in the root's body
      // and stack frame: no call is added (which would restrict tail calls
      // and add the two frames' stacks up).
      copy->removeFnAttr(Attribute::NoInline);
      copy->addFnAttr(Attribute::AlwaysInline);
      plan.genericCopy[decisions[i].function] = copy->getName().str();
    }
  plan.roots = std::move(decisions);
  return plan;
}

namespace {

// A line without its debug location: the first ", !dbg !N" (an
// instruction's) or " !dbg !N {" (a function header's). Scanned by hand:
// a regular expression per line was most of the time of imageOf on a
// 100K-instruction module.
void appendWithoutLocation(StringRef line, std::string &out) {
  static constexpr StringRef Tag = "!dbg !";
  for (size_t at = line.find(Tag); at != StringRef::npos; at = line.find(Tag, at + 1)) {
    size_t digits = at + Tag.size(), end = digits;
    while (end < line.size() && isDigit(line[end]))
      ++end;
    if (end == digits)
      continue;
    StringRef before = line.substr(0, at), after = line.substr(end);
    if (before.ends_with(", ")) {
      out += before.drop_back(2);
      out += after;
      return;
    }
    if (before.ends_with(" ") && after.starts_with(" {")) {
      out += before.drop_back(1);
      out += after.drop_front(2);
      return;
    }
  }
  out += line;
}

// What a value prints as, without its debug locations and records: their
// metadata numbers shift with what the passes add elsewhere in the module,
// and they do not change what the code does. Other metadata is kept.
template <typename Printable> std::string printed(const Printable &value) {
  std::string text;
  raw_string_ostream out(text);
  value.print(out);
  out.flush();
  std::string stripped;
  stripped.reserve(text.size());
  for (StringRef rest = text; !rest.empty();) {
    auto [line, next] = rest.split('\n');
    rest = next;
    if (line.ltrim().starts_with("#dbg_"))
      continue;
    appendWithoutLocation(line, stripped);
    stripped += '\n';
  }
  return stripped;
}

} // namespace

CodeImage imageOf(const Module &module) {
  CodeImage image;
  for (const Function &function : module)
    if (!function.isDeclaration())
      image.functions[function.getName().str()] = {printed(function),
                                                    function.getInstructionCount(),
                                                    function.size()};
  for (const GlobalVariable &global : module.globals())
    image.globals[global.getName().str()] = printed(global);
  return image;
}

void elideUnneededGuards(Module &module, GuardPlan &plan, const CodeImage &before) {
  for (const auto &[name, text] : before.globals) {
    const GlobalVariable *global = module.getNamedGlobal(name);
    if (!global || printed(*global) != text)
      return; // a table pass changed data some code may read
  }
  for (GuardDecision &root : plan.roots) {
    Function *function = module.getFunction(root.function);
    if (!plan.guarded(root) || !function)
      continue;
    std::set<Function *> reached = reachableFrom(function, /*throughAddresses=*/false);
    bool unchanged = std::all_of(reached.begin(), reached.end(), [&](Function *f) {
      if (f->isDeclaration())
        return true;
      auto was = before.functions.find(f->getName().str());
      return was != before.functions.end() &&
             f->getInstructionCount() == was->second.instructions &&
             f->size() == was->second.blocks && printed(*f) == was->second.printed;
    });
    if (!unchanged)
      continue;
    root.fallback = Fallback::None;
    root.detail = "the table passes changed nothing it reaches (no entry inlined, no field "
                  "folded, no fast path): no guard";
    plan.genericCopy.erase(root.function);
  }
  // Generic copies are called only from guards and from other copies.
  for (bool erased = true; erased;) {
    erased = false;
    for (auto copy = plan.genericFunctions.begin(); copy != plan.genericFunctions.end();) {
      Function *function = module.getFunction(*copy);
      bool called = std::any_of(plan.genericCopy.begin(), plan.genericCopy.end(),
                                [&](const auto &entry) { return entry.second == *copy; });
      if (function && (called || !function->use_empty())) {
        ++copy;
        continue;
      }
      if (function)
        function->eraseFromParent();
      copy = plan.genericFunctions.erase(copy);
      erased = true;
    }
  }
}

} // namespace morpheus::core
