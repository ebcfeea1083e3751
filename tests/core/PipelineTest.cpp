// The pipeline as a whole, on IR written here: which sites each pass takes,
// what it reads, and that shared state keeps its layout. The core alone:
// signatures and tables as a backend would describe them.
#include "TestSignatures.h"
#include "core/GuardPlanning.h"
#include "core/Pipeline.h"
#include "core/passes/TableRewriting.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <llvm/AsmParser/Parser.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/SourceMgr.h>
#include <llvm/Transforms/Utils/Cloning.h>

namespace morpheus::core {
namespace {

const char *Program = R"(
target datalayout = "e-m:e-p:64:64-i64:64-i128:128-n32:64-S128"
target triple = "bpf"

@config = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@routes = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@counters = global { ptr, ptr } zeroinitializer, section ".maps", align 8
@packets_seen = global i64 0, section ".bss", align 8

define i32 @prog(ptr %ctx) section "xdp" {
entry:
  %zero = alloca i32, align 4
  %dst = alloca i32, align 4
  store i32 0, ptr %zero, align 4
  %cfg = call ptr inttoptr (i64 1 to ptr)(ptr @config, ptr %zero)
  %field = load i32, ptr %ctx, align 4
  store i32 %field, ptr %dst, align 4
  %route = call ptr inttoptr (i64 1 to ptr)(ptr @routes, ptr %dst)
  %count = call ptr inttoptr (i64 1 to ptr)(ptr @counters, ptr %zero)
  store i64 1, ptr %count, align 8
  %hit = icmp ne ptr %route, null
  %verdict = select i1 %hit, i32 1, i32 2
  ret i32 %verdict
}
)";

class Pipeline : public ::testing::Test {
protected:
  void SetUp() override {
    llvm::SMDiagnostic diagnostic;
    module = llvm::parseAssemblyString(Program, diagnostic, context);
    ASSERT_TRUE(module) << diagnostic.getMessage().str();
    annotateAccessCalls(*module, signatures);
    catalog["config"] = table("config", TableMatch::Index, 4, 256);
    catalog["routes"] = table("routes", TableMatch::Exact, 4, 1024);
    catalog["counters"] = table("counters", TableMatch::Index, 8, 1);
  }

  static TableInfo table(const std::string &name, TableMatch match, uint32_t valueSize,
                         uint32_t maxEntries) {
    TableInfo info;
    info.name = name;
    info.typeName = match == TableMatch::Index ? "array" : "hash";
    info.match = match;
    info.keySize = 4;
    info.valueSize = valueSize;
    info.maxEntries = maxEntries;
    return info;
  }

  const SiteDecision *decisionFor(const SpecializationLog &log, const std::string &table,
                                  bool applied) {
    for (const SiteDecision &decision : log.decisions)
      if (decision.table == table && decision.applied == applied)
        return &decision;
    return nullptr;
  }

  llvm::LLVMContext context;
  std::unique_ptr<llvm::Module> module;
  testing::TestSignatures signatures;
  TableCatalog catalog;
};

TEST_F(Pipeline, PlansToReadOnlyWhatPassesCanUse) {
  TableAccessInfo info = analyzeModule(*module, signatures, catalog);
  ReadPlan plan = planReads(info, catalog, 8);
  // counters is written by the program: never read for specialization.
  EXPECT_FALSE(plan.count("counters"));
  // config: an array larger than the limit, but its constant key is probed.
  ASSERT_TRUE(plan.count("config"));
  EXPECT_EQ(plan["config"].keys, (std::vector<Bytes>{{0, 0, 0, 0}}));
  // routes: read whole up to the larger of the limit and what
  // constant-fields needs to see of tables too large to inline.
  EXPECT_EQ(plan["routes"].wholeTableLimit, WholeTableReadLimit);
  EXPECT_TRUE(plan["routes"].keys.empty());
}

// Two snapshots build the same code when the bytes the data plane never
// writes agree: `counters` (written whole by the program) may move, a byte
// of `config` may not; entries compare by key whatever their order; a
// per-CPU byte the CPUs disagree on compares as unknown; a table the
// analysis does not know compares whole.
TEST_F(Pipeline, SnapshotsAreTheSameWhereTheDataPlaneNeverWrites) {
  TableAccessInfo info = analyzeModule(*module, signatures, catalog);
  auto entry = [](Bytes key, Bytes value) { return TableEntry{std::move(key), std::move(value)}; };
  TableSnapshot a;
  a["config"].entries = {entry({0, 0, 0, 0}, {1, 2, 3, 4}), entry({1, 0, 0, 0}, {5, 6, 7, 8})};
  a["counters"].entries = {entry({0, 0, 0, 0}, {9, 0, 0, 0, 0, 0, 0, 0})};
  EXPECT_TRUE(info.sameWhereReadOnly(a, a));

  TableSnapshot counted = a;
  counted["counters"].entries[0].value = Bytes{10, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(info.sameWhereReadOnly(a, counted)) << "only the data plane's counter moved";
  TableSnapshot reordered = a;
  std::swap(reordered["config"].entries[0], reordered["config"].entries[1]);
  EXPECT_TRUE(info.sameWhereReadOnly(a, reordered)) << "entries compare by key";
  TableSnapshot configured = a;
  configured["config"].entries[1].value = Bytes{5, 6, 7, 9};
  EXPECT_FALSE(info.sameWhereReadOnly(a, configured));
  EXPECT_FALSE(info.sameWhereReadOnly("config", a["config"], configured["config"]));
  TableSnapshot shorter = a;
  shorter["config"].entries.pop_back();
  EXPECT_FALSE(info.sameWhereReadOnly(a, shorter)) << "a key removed";

  // Per-CPU: byte 1 differs between CPUs (unknown), the others agree.
  TableEntry perCpu{{0, 0, 0, 0}, std::nullopt, {1, 2, 3, 4}, {true, false, true, true}};
  TableContents one, other;
  one.entries = {perCpu};
  perCpu.cpuZero[1] = 42;
  other.entries = {perCpu};
  EXPECT_TRUE(info.sameWhereReadOnly("config", one, other))
      << "a byte the CPUs disagree on";
  perCpu.cpuZero[2] = 42;
  other.entries = {perCpu};
  EXPECT_FALSE(info.sameWhereReadOnly("config", one, other)) << "a byte they agree on";

  TableContents unknownA, unknownB;
  unknownA.entries = {entry({0}, {1})};
  unknownB.entries = {entry({0}, {2})};
  EXPECT_FALSE(info.sameWhereReadOnly("not_analyzed", unknownA, unknownB));
}

// A write the program makes to one key (a rule's hit counter, by a
// constant key) exempts those bytes of that key's entry only; another
// entry's same bytes are still compared.
TEST(SameWhereReadOnly, AWriteToOneKeyExemptsOnlyThatEntrysBytes) {
  TableAccessInfo info;
  TableUsage &rules = info.tables["rules"];
  rules.name = "rules";
  rules.written = true;
  for (uint8_t key = 0; key < 4; ++key)
    if (key != 2)
      rules.valueWrites.push_back({Bytes{key, 0, 0, 0}, 4, 4, "hits"});
  auto rulesWith = [](uint8_t hits0, uint8_t hits2, uint8_t action2) {
    TableContents contents;
    contents.complete = true;
    for (uint8_t key = 0; key < 4; ++key)
      contents.entries.push_back(
          {Bytes{key, 0, 0, 0}, Bytes{key == 2 ? action2 : uint8_t(1), 0, 0, 0,
                                      key == 0 ? hits0 : key == 2 ? hits2 : uint8_t(0), 0, 0, 0}});
    return contents;
  };
  TableContents before = rulesWith(0, 0, 7);
  EXPECT_TRUE(info.sameWhereReadOnly("rules", before, rulesWith(9, 0, 7)))
      << "key 0's counter is the data plane's";
  EXPECT_FALSE(info.sameWhereReadOnly("rules", before, rulesWith(0, 9, 7)))
      << "no write names key 2: its bytes are the control plane's";
  EXPECT_FALSE(info.sameWhereReadOnly("rules", before, rulesWith(0, 0, 8)));
}

TEST_F(Pipeline, EverySiteGetsADecisionWithItsReason) {
  TableSnapshot snapshot;
  snapshot["config"].probedKeys.insert({0, 0, 0, 0});
  snapshot["config"].entries.push_back({{0, 0, 0, 0}, Bytes{1, 0, 0, 0}});
  snapshot["routes"].complete = false; // more entries than the limit
  SpecializationOptions options;
  options.inlineLimit = 8;
  auto log = specializeModule(*module, signatures, catalog, snapshot, options);
  ASSERT_THAT_EXPECTED(log, llvm::Succeeded());

  // Typed, for code to decide on; the words for people.
  const SiteDecision *config = decisionFor(*log, "config", true);
  ASSERT_NE(config, nullptr);
  EXPECT_EQ(config->decider, Decider::ConstantKeyLookupPass);
  EXPECT_EQ(config->outcome, SiteOutcome::Applied);
  EXPECT_EQ(config->pass, "constant-key-lookup");
  const SiteDecision *routes = decisionFor(*log, "routes", false);
  ASSERT_NE(routes, nullptr);
  EXPECT_EQ(routes->decider, Decider::InlineSmallTablePass);
  EXPECT_EQ(routes->outcome, SiteOutcome::OverInlineLimit);
  EXPECT_NE(routes->detail.find("larger than the inline limit"), std::string::npos);
  const SiteDecision *counters = decisionFor(*log, "counters", false);
  ASSERT_NE(counters, nullptr);
  EXPECT_EQ(counters->decider, Decider::Analysis);
  EXPECT_EQ(counters->outcome, SiteOutcome::NotReplaceable);
  EXPECT_EQ(counters->pass, "analysis");
  EXPECT_EQ(counters->detail, "table is written by the data plane");
  EXPECT_EQ(log->inlined.at("config").size(), 1u);
}

// A pass that leaves invalid IR behind is named by the verification that
// follows it, not by one after the last pass: constant-key-lookup, broken
// on purpose, runs fifth of the twenty table passes.
TEST_F(Pipeline, VerificationAfterEachPassNamesThePassThatBrokeTheModule) {
  TableSnapshot snapshot;
  snapshot["config"].probedKeys.insert({0, 0, 0, 0});
  snapshot["config"].entries.push_back({{0, 0, 0, 0}, Bytes{1, 0, 0, 0}});
  SpecializationOptions options;
  options.verifyEachPass = true;
  options.faults.invalidConstantKeyLookup = true;
  auto log = specializeModule(*module, signatures, catalog, snapshot, options);
  EXPECT_THAT_EXPECTED(
      log, llvm::FailedWithMessage(::testing::AllOf(
               ::testing::HasSubstr("invalid IR after table pass constant-key-lookup:"),
               ::testing::HasSubstr("Terminator found in the middle of a basic block"))));
}

// One plan per site, from the program alone: what planReads reads for and
// what explain words. The backend's limit on reading arrays by content
// decides whether a large array is inlined while few slots differ.
TEST_F(Pipeline, PlansEachSiteFromTheProgramAlone) {
  catalog["routes"] = table("routes", TableMatch::Index, 4, 1024);
  TableAccessInfo info = analyzeModule(*module, signatures, catalog);
  std::map<unsigned, SitePlan> plans = planSites(info, catalog, 8, nullptr);
  auto siteOf = [&](const std::string &table) {
    for (const AccessSite &site : info.sites)
      if (site.table == table)
        return site.id;
    ADD_FAILURE() << "no site of " << table;
    return 0u;
  };
  auto planOf = [&](const std::string &table) { return plans.at(siteOf(table)); };
  EXPECT_EQ(planOf("config").action, SitePlan::Action::InlinedConstantKey);
  EXPECT_EQ(planOf("config").pass, Decider::ConstantKeyLookupPass);
  // Without a backend limit every array is read by content.
  EXPECT_EQ(planOf("routes").action, SitePlan::Action::InlinedWhileFewDiffer);
  EXPECT_EQ(planOf("routes").pass, Decider::InlineSmallTablePass);
  // counters: written at its constant key, every byte of it.
  SitePlan counters = planOf("counters");
  EXPECT_EQ(counters.action, SitePlan::Action::Kept);
  EXPECT_FALSE(counters.pass.has_value());
  ASSERT_TRUE(counters.decline.has_value());
  EXPECT_EQ(counters.decline->reason, LookupDecline::Reason::WrittenByTheDataPlane);
  EXPECT_EQ(counters.writes, SitePlan::Writes::FieldsNotFoldable);
  EXPECT_EQ(counters.noFieldFolding,
            "every byte of this key's value is written by the data plane");

  // 1024 slots of 4 bytes: over a 4,000-byte limit, kept; within 4,096, not.
  auto bytes = [](const TableInfo &table) { return uint64_t(table.maxEntries) * table.valueSize; };
  ArrayContentReads small{4000, bytes}, large{4096, bytes};
  SitePlan kept = planSites(info, catalog, 8, &small).at(siteOf("routes"));
  EXPECT_EQ(kept.action, SitePlan::Action::KeptArrayTooLargeToRead);
  EXPECT_FALSE(kept.pass.has_value());
  EXPECT_EQ(kept.arrayBytes, 4096u);
  EXPECT_EQ(kept.arrayReadLimit, 4000u);
  EXPECT_EQ(planSites(info, catalog, 8, &large).at(siteOf("routes")).action,
            SitePlan::Action::InlinedWhileFewDiffer);
  // planReads asks the same of the array either way: the backend reads
  // what it can.
  EXPECT_EQ(planReads(info, catalog, 8)["routes"].wholeTableLimit, 8u);
  // Its content read is of use while at most the inline limit of slots
  // differ, or in region-as-table's classes within its slots; past them,
  // only the chain's bound.
  EXPECT_EQ(planReads(info, catalog, 8)["routes"].contentDiffering, 8u);
  EXPECT_EQ(planReads(info, catalog, 8)["routes"].contentValues, 255u);
  catalog["routes"] = table("routes", TableMatch::Index, 4, (1u << 17) + 1);
  EXPECT_EQ(planReads(info, catalog, 8)["routes"].contentDiffering, 8u);
  EXPECT_EQ(planReads(info, catalog, 8)["routes"].contentValues, 0u);
}

// A table policy keeps generic (another loader writes it behind the
// guard) is one the data plane writes wholesale, whatever the program does
// with it: its site is kept for the policy's reason, nothing of it is
// read, and a specialization given its contents anyway folds nothing of
// it (the lookup stays), while the other tables are specialized as before.
TEST_F(Pipeline, ATableKeptGenericIsNeverSpecialized) {
  TableSnapshot snapshot;
  snapshot["config"].probedKeys.insert({0, 0, 0, 0});
  snapshot["config"].entries.push_back({{0, 0, 0, 0}, Bytes{1, 0, 0, 0}});
  auto looksUpConfig = [](llvm::Module &program) {
    for (llvm::Function &function : program)
      for (llvm::BasicBlock &block : function)
        for (llvm::Instruction &inst : block)
          if (auto *call = llvm::dyn_cast<llvm::CallBase>(&inst))
            for (llvm::Value *operand : call->args())
              if (operand == program.getNamedGlobal("config"))
                return true;
    return false;
  };
  // Read-only, its constant-key lookup is inlined.
  std::unique_ptr<llvm::Module> polled = llvm::CloneModule(*module);
  ASSERT_THAT_EXPECTED(specializeModule(*polled, signatures, catalog, snapshot, {}),
                       llvm::Succeeded());
  EXPECT_FALSE(looksUpConfig(*polled)) << "the baseline: config's lookup inlined";

  catalog["config"].keptGeneric = true;
  TableAccessInfo info = analyzeModule(*module, signatures, catalog);
  EXPECT_FALSE(info.isReadOnly("config"));
  EXPECT_TRUE(info.tables.at("config").writtenWholesale);
  EXPECT_EQ(info.tables.at("config").wholesaleReason, KeptGenericReason);
  std::map<unsigned, SitePlan> plans = planSites(info, catalog, 8, nullptr);
  for (const AccessSite &site : info.sites) {
    if (site.table != "config")
      continue;
    const SitePlan &plan = plans.at(site.id);
    EXPECT_EQ(plan.action, SitePlan::Action::Kept);
    ASSERT_TRUE(plan.decline.has_value());
    EXPECT_EQ(plan.decline->reason, LookupDecline::Reason::KeptGeneric);
    EXPECT_EQ(plan.decline->detail, KeptGenericReason);
    EXPECT_TRUE(whyNotInlinable(site, info, catalog, /*writesGuarded=*/true))
        << "no fast path either";
  }
  ReadPlan reads = planReads(info, catalog, 8);
  EXPECT_FALSE(reads.count("config")) << "nothing of it is read";
  EXPECT_TRUE(reads.count("routes"));

  auto log = specializeModule(*module, signatures, catalog, snapshot, {});
  ASSERT_THAT_EXPECTED(log, llvm::Succeeded());
  EXPECT_TRUE(looksUpConfig(*module)) << "kept generic: the lookup in config stays";
}

TEST_F(Pipeline, SharedGlobalsSurviveOptimization) {
  // packets_seen is never used, yet other versions of the program share the
  // .bss map it lives in: dropping it would shift the layout under them.
  auto log = specializeModule(*module, signatures, catalog, {}, {});
  ASSERT_THAT_EXPECTED(log, llvm::Succeeded());
  EXPECT_NE(module->getNamedGlobal("packets_seen"), nullptr);
}

// The facts annotateAccessCalls gives a key argument (nocapture, readonly)
// serve the analysis and the table passes; O2 gets them only where the
// backend keeps them: the eBPF backend takes them back, because what O2 does
// with them costs the kernel's verifier (Katran's balancer: twice the
// instructions verified with nothing specialized).
TEST_F(Pipeline, O2SeesTheAccessCallsFactsOnlyWhereTheBackendKeepsThem) {
  TableSnapshot snapshot;
  snapshot["config"].probedKeys.insert({0, 0, 0, 0});
  snapshot["config"].entries.push_back({{0, 0, 0, 0}, Bytes{1, 0, 0, 0}});
  snapshot["routes"].complete = false; // its lookup stays
  auto routesCall = [](llvm::Module &program) -> llvm::CallBase * {
    for (llvm::Function &function : program)
      for (llvm::BasicBlock &block : function)
        for (llvm::Instruction &inst : block)
          if (auto *call = llvm::dyn_cast<llvm::CallBase>(&inst);
              call && call->arg_size() == 2 &&
              call->getArgOperand(0) == program.getNamedGlobal("routes"))
            return call;
    return nullptr;
  };
  for (bool keep : {true, false}) {
    SCOPED_TRACE(keep ? "facts kept" : "facts dropped");
    std::unique_ptr<llvm::Module> program = llvm::CloneModule(*module);
    ASSERT_TRUE(routesCall(*program)->paramHasAttr(1, llvm::Attribute::NoCapture));
    SpecializationOptions options;
    options.inlineLimit = 8;
    options.keepAccessCallFacts = keep;
    auto log = specializeModule(*program, signatures, catalog, snapshot, options);
    ASSERT_THAT_EXPECTED(log, llvm::Succeeded());
    // The analysis and the passes had the facts either way.
    EXPECT_NE(decisionFor(*log, "config", true), nullptr);
    llvm::CallBase *routes = routesCall(*program);
    ASSERT_NE(routes, nullptr);
    EXPECT_EQ(routes->paramHasAttr(1, llvm::Attribute::NoCapture), keep);
    EXPECT_EQ(routes->paramHasAttr(1, llvm::Attribute::ReadOnly), keep);
  }
}

TEST_F(Pipeline, TheGuardIsElidedWhereThePassesChangedNothing) {
  TableSnapshot snapshot;
  snapshot["config"].probedKeys.insert({0, 0, 0, 0});
  snapshot["config"].entries.push_back({{0, 0, 0, 0}, Bytes{1, 0, 0, 0}});
  snapshot["routes"].complete = false; // more entries than the limit
  auto specialize = [&](llvm::Module &program, std::optional<std::vector<std::string>> passes) {
    SpecializationOptions options;
    options.inlineLimit = 8;
    options.tablePasses = std::move(passes);
    options.guard.emplace();
    options.guard->holdsFunction = "guard_holds";
    options.guard->enterFunction = "guard_enter";
    options.guard->version = 7;
    options.guard->entries = {{"prog", Fallback::InProgram, 0, 0, "test", std::nullopt}};
    options.linkGuardRuntime = [](llvm::Module &m) {
      m.getOrInsertFunction("guard_holds", llvm::Type::getInt32Ty(m.getContext()),
                            llvm::Type::getInt64Ty(m.getContext()));
      return llvm::Error::success();
    };
    return specializeModule(program, signatures, catalog, snapshot, options);
  };
  auto calls = [](llvm::Function &function, llvm::StringRef callee) {
    for (llvm::BasicBlock &block : function)
      for (llvm::Instruction &instruction : block)
        if (auto *call = llvm::dyn_cast<llvm::CallBase>(&instruction))
          if (call->getCalledFunction() && call->getCalledFunction()->getName() == callee)
            return true;
    return false;
  };

  // branch-injection alone takes neither site (routes was not read whole,
  // config is an array): @prog is what it was, and holds for any contents.
  auto declined = specialize(*module, std::vector<std::string>{"branch-injection"});
  ASSERT_THAT_EXPECTED(declined, llvm::Succeeded());
  ASSERT_EQ(declined->guards.size(), 1u);
  EXPECT_EQ(declined->guards[0].fallback, Fallback::None);
  EXPECT_NE(declined->guards[0].detail.find("changed nothing it reaches"), std::string::npos)
      << declined->guards[0].detail;
  EXPECT_FALSE(calls(*module->getFunction("prog"), "guard_holds"));
  EXPECT_EQ(module->getFunction("prog__morpheus_generic"), nullptr);

  // Every pass: config's entry is inlined, so the guard stays.
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> fresh = llvm::parseAssemblyString(Program, diagnostic, context);
  ASSERT_TRUE(fresh);
  annotateAccessCalls(*fresh, signatures);
  auto specialized = specialize(*fresh, std::nullopt);
  ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
  ASSERT_EQ(specialized->guards.size(), 1u);
  EXPECT_EQ(specialized->guards[0].fallback, Fallback::InProgram);
  EXPECT_TRUE(calls(*fresh->getFunction("prog"), "guard_holds"));
}

// Guard elision compares each function's code before and after the table
// passes (imageOf): debug locations, whose metadata numbers shift with
// what the passes add elsewhere, do not count; the code does.
std::unique_ptr<llvm::Module> withLocations(llvm::LLVMContext &context, int constant,
                                            bool shifted) {
  std::string text = R"(
target triple = "bpf"
define i32 @prog(ptr %ctx) section "xdp" !dbg !@SP@ {
  %v = load i32, ptr %ctx, align 4, !dbg !@LOC@
  %r = add i32 %v, @CONSTANT@, !dbg !@LOC@
  ret i32 %r, !dbg !@LOC@
}
!llvm.dbg.cu = !{!0}
!llvm.module.flags = !{!2}
!0 = distinct !DICompileUnit(language: DW_LANG_C11, file: !1, emissionKind: FullDebug)
!1 = !DIFile(filename: "prog.c", directory: "/")
!2 = !{i32 2, !"Debug Info Version", i32 3}
!3 = !DISubroutineType(types: !{})
!4 = distinct !DISubprogram(name: "prog", scope: !1, file: !1, line: 1, type: !3, unit: !0, spFlags: DISPFlagDefinition)
!5 = !DILocation(line: 2, scope: !4)
!6 = distinct !DISubprogram(name: "prog", scope: !1, file: !1, line: 1, type: !3, unit: !0, spFlags: DISPFlagDefinition)
!7 = !DILocation(line: 2, scope: !6)
)";
  auto replace = [&](const std::string &from, const std::string &to) {
    for (size_t at; (at = text.find(from)) != std::string::npos;)
      text.replace(at, from.size(), to);
  };
  replace("@SP@", shifted ? "6" : "4");
  replace("@LOC@", shifted ? "7" : "5");
  replace("@CONSTANT@", std::to_string(constant));
  llvm::SMDiagnostic diagnostic;
  std::unique_ptr<llvm::Module> module = llvm::parseAssemblyString(text, diagnostic, context);
  EXPECT_TRUE(module) << diagnostic.getMessage().str();
  return module;
}

TEST(CodeImage, DebugLocationsDoNotCountTheCodeDoes) {
  llvm::LLVMContext context;
  auto original = withLocations(context, 1, false);
  auto renumbered = withLocations(context, 1, true);
  auto changed = withLocations(context, 2, false);
  ASSERT_TRUE(original && renumbered && changed);
  std::string before = imageOf(*original).functions.at("prog").printed;
  EXPECT_EQ(before.find("!dbg"), std::string::npos) << before;
  EXPECT_NE(before.find("define i32 @prog(ptr %ctx) section \"xdp\"\n"), std::string::npos)
      << "the header keeps all but its location: " << before;
  EXPECT_NE(before.find("add i32 %v, 1\n"), std::string::npos) << before;
  EXPECT_EQ(imageOf(*renumbered).functions.at("prog").printed, before);
  EXPECT_NE(imageOf(*changed).functions.at("prog").printed, before);
}

TEST_F(Pipeline, UnknownPassNamesAreErrors) {
  SpecializationOptions options;
  options.tablePasses = std::vector<std::string>{"inline-everything"};
  auto log = specializeModule(*module, signatures, catalog, {}, options);
  ASSERT_FALSE(bool(log));
  EXPECT_NE(llvm::toString(log.takeError()).find("unknown pass 'inline-everything'"),
            std::string::npos);
}

} // namespace
} // namespace morpheus::core
