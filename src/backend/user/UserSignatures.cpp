#include "backend/user/UserSignatures.h"

#include <llvm/IR/Function.h>
#include <llvm/IR/GlobalVariable.h>

extern "C" {
#include "backend/user/include/morpheus_user.h"
}

using namespace llvm;

namespace morpheus::user {

namespace {

using core::AccessKind;
using core::AccessSignature;

struct ApiEntry {
  AccessSignature signature;
  unsigned readOnlyArgs; // bit i: argument i is only read
};

const ApiEntry Api[] = {
    {{"mu_lookup", AccessKind::Lookup, 0, 1, {}}, 1u << 1},
    {{"mu_update", AccessKind::Update, 0, 1, 2}, (1u << 1) | (1u << 2)},
    {{"mu_delete", AccessKind::Delete, 0, 1, {}}, 1u << 1},
    // Reads nothing a program sees and returns nothing: a lookup the core
    // must not rewrite (only the analysis counts it, as a read).
    {{"mu_prefetch", AccessKind::Lookup, 0, 1, {}, /*rewritable=*/false}, 1u << 1},
};

const ApiEntry *find(const CallBase &call) {
  const Function *callee = call.getCalledFunction();
  if (!callee || !callee->isDeclaration())
    return nullptr;
  for (const ApiEntry &entry : Api)
    if (callee->getName() == entry.signature.name)
      return &entry;
  return nullptr;
}

} // namespace

std::optional<AccessSignature> UserSignatures::match(const CallBase &call) const {
  if (const ApiEntry *entry = find(call))
    return entry->signature;
  return std::nullopt;
}

bool UserSignatures::onlyReadsArgument(const CallBase &call, unsigned argNo) const {
  const ApiEntry *entry = find(call);
  return entry && argNo < 32 && (entry->readOnlyArgs & (1u << argNo));
}

std::optional<uint64_t> UserSignatures::bytesWrittenThrough(const CallBase &, unsigned) const {
  return std::nullopt;
}

bool UserSignatures::isTable(const GlobalVariable &global) const {
  return global.hasSection() && global.getSection() == MU_TABLE_SECTION;
}

bool UserSignatures::isProgramEntry(const Function &function) const {
  return !function.isDeclaration() && !function.hasLocalLinkage() && function.hasSection() &&
         function.getSection() == MU_HANDLER_SECTION;
}

bool UserSignatures::requiresWritableArguments(const Function &) const { return false; }

} // namespace morpheus::user
