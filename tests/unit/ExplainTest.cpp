// What `morpheus explain` calls specialized: a site a pass rewrote whose
// function emits other code than the original's, on a real build of
// tests/programs/field_counter.bpf.c (the command's own output is
// CliTest's). The function-by-function comparison tells a version from the
// original; a rewrite whose function emits the original's code (the
// original's object compared with itself stands for such a version) is
// "unchanged", never "specialized".
#include "backend/bpf/EmittedCode.h"
#include "backend/bpf/ProgramSpec.h"
#include "backend/bpf/Snapshot.h"
#include "cli/Reports.h"

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <nlohmann/json.hpp>

namespace morpheus {
namespace {

const std::string Program =
    std::string(MORPHEUS_SOURCE_DIR) + "/tests/programs/field_counter.bpf.c";

const cli::ExplainedSite &siteOf(const cli::Explanation &explanation, const std::string &map) {
  for (const cli::ExplainedMap &explained : explanation.maps)
    if (explained.name == map && !explained.sites.empty())
      return explained.sites.front();
  throw std::runtime_error("no site of " + map);
}

TEST(Explain, ARewriteIsSpecializedOnlyWhereTheEmittedCodeDiffers) {
  auto spec = bpf::ProgramSpec::load(Program, bpf::FrontendOptions{});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  auto snapshot = bpf::parseSnapshot(
      nlohmann::json::parse(
          R"({"maps": {"rules": [{"key": "00000000", "value": "01000000 02000000 0000000000000000"}]}})"),
      (*spec)->catalog(), "rules");
  ASSERT_THAT_EXPECTED(snapshot, llvm::Succeeded());
  auto version = (*spec)->specialize(*snapshot, bpf::SpecializeRequest{});
  ASSERT_THAT_EXPECTED(version, llvm::Succeeded());

  // The program's function, as the version and the original emit it.
  auto emitted = bpf::functionCode(version->elf);
  auto original = bpf::functionCode((*spec)->originalElf());
  ASSERT_THAT_EXPECTED(emitted, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(original, llvm::Succeeded());
  ASSERT_TRUE(emitted->count("field_counter_prog"));
  ASSERT_TRUE(original->count("field_counter_prog"));
  EXPECT_NE(emitted->at("field_counter_prog"), original->at("field_counter_prog"))
      << "folding rules' fields changes the code";
  EXPECT_FALSE(original->at("field_counter_prog").relocations.empty())
      << "the map loads are relocations";

  cli::BuiltVersion built;
  built.source = "rules";
  built.log = version->log;
  auto unchanged = bpf::unchangedFunctions(version->elf, (*spec)->originalElf());
  ASSERT_THAT_EXPECTED(unchanged, llvm::Succeeded());
  EXPECT_FALSE(unchanged->count("field_counter_prog"));
  built.unchangedFunctions = *unchanged;
  cli::Explanation explanation = cli::explainProgram(**spec, 64, built);
  const cli::ExplainedSite &rules = siteOf(explanation, "rules");
  EXPECT_EQ(rules.verdict, cli::ExplainedSite::Verdict::Specialized) << rules.text;
  EXPECT_EQ(rules.text.rfind("specialized by fold-read-only-fields: ", 0), 0u) << rules.text;

  // The same log, had the version emitted the original's code.
  auto same = bpf::unchangedFunctions((*spec)->originalElf(), (*spec)->originalElf());
  ASSERT_THAT_EXPECTED(same, llvm::Succeeded());
  EXPECT_TRUE(same->count("field_counter_prog"));
  built.unchangedFunctions = *same;
  explanation = cli::explainProgram(**spec, 64, built);
  const cli::ExplainedSite &copy = siteOf(explanation, "rules");
  EXPECT_EQ(copy.verdict, cli::ExplainedSite::Verdict::Unchanged) << copy.text;
  EXPECT_EQ(copy.text.rfind("not specialized: rewritten by fold-read-only-fields: ", 0), 0u)
      << copy.text;
  EXPECT_NE(copy.text.find("but field_counter_prog emits the original's code"), std::string::npos)
      << copy.text;
  EXPECT_EQ(cli::explanationToJson(explanation)["maps"][0]["sites"][0]["action"], "unchanged");
}

} // namespace
} // namespace morpheus
