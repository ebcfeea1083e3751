#include "core/ComparedConstants.h"

#include <llvm/IR/Constants.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>

#include <set>

using namespace llvm;

namespace morpheus::core {

std::vector<uint64_t> comparedConstants(const Module &module, size_t limit) {
  std::set<uint64_t> values;
  auto add = [&](const ConstantInt &constant) {
    if (constant.getBitWidth() > 64)
      return;
    uint64_t value = constant.getZExtValue();
    uint64_t mask = constant.getBitWidth() == 64 ? ~0ull : (1ull << constant.getBitWidth()) - 1;
    for (uint64_t near : {value - 1, value, value + 1})
      values.insert(near & mask);
  };
  for (const Function &function : module)
    for (const Instruction &inst : instructions(function)) {
      if (auto *compare = dyn_cast<ICmpInst>(&inst)) {
        for (const Value *operand : compare->operands())
          if (auto *constant = dyn_cast<ConstantInt>(operand))
            add(*constant);
      } else if (auto *branches = dyn_cast<SwitchInst>(&inst)) {
        for (const auto &branch : branches->cases())
          add(*branch.getCaseValue());
      }
    }
  std::vector<uint64_t> smallest(values.begin(), values.end());
  if (smallest.size() > limit)
    smallest.resize(limit);
  return smallest;
}

} // namespace morpheus::core
