// The user-space backend's description of table accesses for the core:
// calls to the handler API of include/morpheus_user.h (mu_lookup,
// mu_update, mu_delete), recognised by the callee's name as BpfSignatures
// recognises helpers by id; tables are globals in MU_TABLE_SECTION,
// handlers functions in MU_HANDLER_SECTION.
#pragma once

#include "core/AccessSignatures.h"

namespace morpheus::user {

class UserSignatures : public core::AccessSignatureTable {
public:
  std::optional<core::AccessSignature> match(const llvm::CallBase &call) const override;
  // The key (and an update's value) is only read and never kept.
  bool onlyReadsArgument(const llvm::CallBase &call, unsigned argNo) const override;
  // No API call writes part of a value.
  std::optional<uint64_t> bytesWrittenThrough(const llvm::CallBase &call,
                                              unsigned argNo) const override;
  bool isTable(const llvm::GlobalVariable &global) const override;
  bool isProgramEntry(const llvm::Function &function) const override;
  // No verifier: a function may be handed an inlined (read-only) value
  // whenever it only reads it, which the analysis already proves.
  bool requiresWritableArguments(const llvm::Function &callee) const override;
};

} // namespace morpheus::user
