#include "backend/bpf/ConfigConstants.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/InlineAsm.h>
#include <llvm/IR/Instructions.h>
#include <llvm/Support/Regex.h>

#include <vector>

using namespace llvm;

namespace morpheus::bpf {

namespace {

// The global a symbol of assembly text names, if it is one of ConfigSection.
GlobalVariable *configGlobal(Module &module, StringRef symbol) {
  GlobalVariable *global = module.getGlobalVariable(symbol, /*AllowInternal=*/true);
  if (!global || !global->hasSection() || global->getSection() != ConfigSection)
    return nullptr;
  return global;
}

} // namespace

Error inlineConfigConstants(Module &module, const std::string &path) {
  bool anyConfig = false;
  for (GlobalVariable &global : module.globals())
    anyConfig |= global.hasSection() && global.getSection() == ConfigSection;
  if (!anyConfig)
    return Error::success();
  // One BPF instruction: the output operand loaded with a symbol's address
  // as a 64-bit immediate.
  Regex singleLoad("^[[:space:]]*\\$0[[:space:]]*=[[:space:]]*([A-Za-z_.$][A-Za-z0-9_.$]*)"
                   "[[:space:]]+ll[[:space:]]*$");
  Regex symbol("[A-Za-z_.$][A-Za-z0-9_.$]*");
  std::vector<CallInst *> inlined;
  std::vector<Constant *> values;
  for (Function &function : module)
    for (BasicBlock &block : function)
      for (Instruction &inst : block) {
        auto *call = dyn_cast<CallInst>(&inst);
        auto *assembly = call ? dyn_cast<InlineAsm>(call->getCalledOperand()) : nullptr;
        if (!assembly)
          continue;
        StringRef text = assembly->getAsmString();
        SmallVector<StringRef, 2> match;
        if (singleLoad.match(text, &match) && call->getType()->isIntegerTy()) {
          if (GlobalVariable *global = configGlobal(module, match[1])) {
            auto *value = dyn_cast_or_null<ConstantInt>(
                global->hasInitializer() ? global->getInitializer() : nullptr);
            if (!value || value->getBitWidth() > 64 || value->getBitWidth() % 8 != 0)
              return makeError("{0}: function '{1}' loads '{2}' of section {3}, which is not "
                               "an integer constant of 1, 2, 4 or 8 bytes",
                               path, function.getName(), global->getName(), ConfigSection);
            uint64_t bits = value->getZExtValue();
            inlined.push_back(call);
            values.push_back(ConstantInt::get(call->getType(), bits));
            continue;
          }
        }
        // Any other assembly that names a global of the section.
        StringRef rest = text;
        while (symbol.match(rest, &match)) {
          if (configGlobal(module, match[0]))
            return makeError("{0}: function '{1}': inline assembly names '{2}' of section "
                             "{3} other than as one load `$0 = {2} ll` (its loader rewrites "
                             "every load of it into its value; Morpheus rewrites only that "
                             "form): \"{4}\"",
                             path, function.getName(), match[0], ConfigSection, text);
          rest = rest.substr(match[0].data() - rest.data() + match[0].size());
        }
      }
  for (size_t index = 0; index < inlined.size(); ++index) {
    inlined[index]->replaceAllUsesWith(values[index]);
    inlined[index]->eraseFromParent();
  }
  return Error::success();
}

} // namespace morpheus::bpf
