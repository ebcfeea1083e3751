#include "backend/user/Jit.h"

#include "backend/user/Guard.h"
#include "backend/user/UserSignatures.h"

#include <llvm/ExecutionEngine/Orc/Core.h>
#include <llvm/ExecutionEngine/Orc/JITTargetMachineBuilder.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Transforms/Utils/ModuleUtils.h>

#include <mutex>

using namespace llvm;
using namespace llvm::orc;

namespace morpheus::user {

namespace {

void initializeNativeTarget() {
  static std::once_flag once;
  std::call_once(once, [] {
    InitializeNativeTarget();
    InitializeNativeTargetAsmPrinter();
    InitializeNativeTargetAsmParser(); // OpaqueValue's inline asm
  });
}

ExecutorSymbolDef symbolAt(const void *address, JITSymbolFlags flags) {
  return {ExecutorAddr::fromPtr(address), flags};
}

} // namespace

void prepareForJit(Module &module) {
  UserSignatures signatures;
  std::vector<GlobalVariable *> tables;
  for (GlobalVariable &global : module.globals())
    if (signatures.isTable(global))
      tables.push_back(&global);
  removeFromUsedLists(module, [&](Constant *used) {
    return std::find(tables.begin(), tables.end(), used->stripPointerCasts()) != tables.end();
  });
  for (GlobalVariable *table : tables) {
    table->setInitializer(nullptr);
    table->setLinkage(GlobalValue::ExternalLinkage);
    table->setSection("");
    table->setConstant(false);
    table->setDSOLocal(false); // bound to a heap address: reached through the GOT
  }
  for (Function &function : module)
    if (signatures.isProgramEntry(function) ||
        (function.hasSection() && function.getSection() == MU_PREFETCH_SECTION))
      function.setSection("");
}

Expected<std::shared_ptr<Jit>> Jit::create(const TableSet &tables, const Profile &profile,
                                           const WriteCounters &writes) {
  initializeNativeTarget();
  auto builder = JITTargetMachineBuilder::detectHost();
  if (!builder)
    return withContext(builder.takeError(), "JIT: the host target");
  auto machine = builder->createTargetMachine();
  if (!machine)
    return withContext(machine.takeError(), "JIT: the host target machine");
  auto jit = LLJITBuilder().setJITTargetMachineBuilder(*builder).create();
  if (!jit)
    return withContext(jit.takeError(), "JIT");

  auto result = std::make_shared<Jit>();
  result->machine = std::move(*machine);
  result->jit = std::move(*jit);
  auto shared = result->jit->createJITDylib("morpheus_user_shared");
  if (!shared)
    return withContext(shared.takeError(), "JIT");
  result->shared = &*shared;

  SymbolMap symbols;
  auto &jitRef = *result->jit;
  auto bind = [&](StringRef name, const void *address, JITSymbolFlags flags) {
    symbols[jitRef.mangleAndIntern(name)] = symbolAt(address, flags);
  };
  JITSymbolFlags data = JITSymbolFlags::Exported;
  JITSymbolFlags code = JITSymbolFlags::Exported | JITSymbolFlags::Callable;
  for (const auto &[name, table] : tables.tables())
    bind(name, table.get(), data);
  bind("mu_lookup", reinterpret_cast<const void *>(&mu_lookup), code);
  bind("mu_update", reinterpret_cast<const void *>(&mu_update), code);
  bind("mu_delete", reinterpret_cast<const void *>(&mu_delete), code);
  bind("mu_prefetch", reinterpret_cast<const void *>(&mu_prefetch), code);
  bind(Guard::VersionSymbol, tables.guard().versionAddress(), data);
  bind(Profile::StorageSymbol, profile.storage(), data);
  bind(WriteCounters::StorageSymbol, writes.storage(), data);
  if (Error err = result->shared->define(absoluteSymbols(std::move(symbols))))
    return withContext(std::move(err), "JIT: binding the tables");
  return result;
}

namespace {

std::string dylibName(const std::string &label) { return "morpheus_user_" + label; }

} // namespace

Version::~Version() { jit->release(label); }

Expected<VersionHandle> Jit::add(ThreadSafeModule module, const std::string &entry,
                                 const std::string &label) {
  module.withModuleDo([&](Module &ir) {
    prepareForJit(ir);
    ir.setDataLayout(jit->getDataLayout());
  });
  auto dylib = jit->createJITDylib(dylibName(label));
  if (!dylib)
    return withContext(dylib.takeError(), "JIT: version " + label);
  // Until a handle holds it, the dylib is removed on every failure.
  auto version = std::make_shared<Version>(shared_from_this(), label, nullptr);
  dylib->addToLinkOrder(*shared);
  if (Error err = jit->addIRModule(*dylib, std::move(module)))
    return withContext(std::move(err), "JIT: version " + label);
  auto address = jit->lookup(*dylib, entry);
  if (!address)
    return withContext(address.takeError(), "JIT: version " + label + ": handler '" + entry + "'");
  version->function = address->toPtr<HandlerFunction>();
  return version;
}

Expected<void *> Jit::address(const Version &version, const std::string &name) {
  JITDylib *dylib = jit->getExecutionSession().getJITDylibByName(dylibName(version.name()));
  if (!dylib)
    return makeError("JIT: no version '{0}'", version.name());
  auto address = jit->lookup(*dylib, name);
  if (!address)
    return withContext(address.takeError(), "JIT: version " + version.name() + ": '" + name + "'");
  return address->toPtr<void *>();
}

size_t Jit::liveVersions() const {
  // The session's own account: every JITDylib it holds, by name.
  std::string text;
  raw_string_ostream stream(text);
  jit->getExecutionSession().dump(stream);
  size_t count = 0;
  StringRef rest = text;
  const std::string prefix = "JITDylib \"" + dylibName("");
  const std::string sharedName = "JITDylib \"" + shared->getName() + "\"";
  while (!rest.empty()) {
    auto [line, next] = rest.split('\n');
    count += line.starts_with(prefix) && !line.starts_with(sharedName);
    rest = next;
  }
  return count;
}

void Jit::release(const std::string &label) {
  ExecutionSession &session = jit->getExecutionSession();
  JITDylib *dylib = session.getJITDylibByName(dylibName(label));
  if (!dylib)
    return;
  // Nothing can call into it any more (its last handle went): its code and
  // data are freed. A failure here leaks the version, it changes nothing.
  if (Error err = session.removeJITDylib(*dylib))
    session.reportError(std::move(err));
}

} // namespace morpheus::user
