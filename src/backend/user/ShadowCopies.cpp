#include "backend/user/ShadowCopies.h"

#include "backend/user/EventLoop.h"

#include <llvm/Support/FormatVariadic.h>

namespace morpheus::user {

namespace {

// What `result` shows of a packet, for the difference's description.
std::string shown(const PacketResult &result) {
  return llvm::formatv("verdict {0} port {1}", result.verdict, result.port).str();
}

} // namespace

Expected<std::unique_ptr<ShadowCopies::Copy>> ShadowCopies::makeCopy(const llvm::Module &pristine) {
  auto copy = std::make_unique<Copy>();
  auto tables = TableSet::fromModule(pristine);
  if (!tables)
    return tables.takeError();
  copy->tables = std::move(*tables);
  auto jit = Jit::create(*copy->tables, copy->profile, copy->writes);
  if (!jit)
    return jit.takeError();
  copy->jit = std::move(*jit);
  return copy;
}

Expected<std::unique_ptr<ShadowCopies>> ShadowCopies::create(const llvm::Module &pristine,
                                                            const core::PristineBitcode &generic,
                                                            const std::string &entry) {
  std::unique_ptr<ShadowCopies> copies(new ShadowCopies());
  copies->entry = entry;
  auto original = makeCopy(pristine);
  if (!original)
    return original.takeError();
  auto specialized = makeCopy(pristine);
  if (!specialized)
    return specialized.takeError();
  copies->original = std::move(*original);
  copies->specialized = std::move(*specialized);
  llvm::orc::ThreadSafeContext context(std::make_unique<llvm::LLVMContext>());
  auto module = generic.parse(*context.getContext());
  if (!module)
    return module.takeError();
  auto version = copies->original->jit->add(
      llvm::orc::ThreadSafeModule(std::move(*module), std::move(context)), entry, "generic");
  if (!version)
    return version.takeError();
  copies->generic = std::move(*version);
  return copies;
}

Expected<std::optional<ShadowDifference>>
ShadowCopies::compare(const TableSet &live, const WriteCounters &writes,
                      const core::PristineBitcode &candidate, uint64_t version,
                      const std::vector<ShadowPacket> &samples) {
  for (Copy *copy : {original.get(), specialized.get()}) {
    if (Error err = copy->tables->copyFrom(live))
      return std::move(err);
    copy->writes.copyFrom(writes);
  }
  // The candidate runs specialized only while its copy's guard holds the
  // version it was built for.
  specialized->tables->guard().holdForCopy(version);
  llvm::orc::ThreadSafeContext context(std::make_unique<llvm::LLVMContext>());
  auto module = candidate.parse(*context.getContext());
  if (!module)
    return module.takeError();
  auto specializedVersion = specialized->jit->add(
      llvm::orc::ThreadSafeModule(std::move(*module), std::move(context)), entry,
      "shadow" + std::to_string(++versions));
  if (!specializedVersion)
    return specializedVersion.takeError();
  for (size_t i = 0; i < samples.size(); ++i) {
    PacketResult expected = runPacket(generic->entry(), samples[i].frame, samples[i].port);
    PacketResult actual =
        runPacket((*specializedVersion)->entry(), samples[i].frame, samples[i].port);
    if (expected == actual)
      continue;
    std::string what = shown(expected) == shown(actual)
                           ? std::string("output bytes differ")
                           : "generic " + shown(expected) + ", specialized " + shown(actual);
    return ShadowDifference{what, uint32_t(i + 1)};
  }
  auto before = original->tables->dump(), after = specialized->tables->dump();
  for (const auto &[table, entries] : before)
    if (after.at(table) != entries)
      return ShadowDifference{"table '" + table + "' differs after the sample", std::nullopt};
  return std::nullopt;
}

} // namespace morpheus::user
