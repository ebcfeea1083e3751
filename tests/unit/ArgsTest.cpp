#include "cli/Args.h"

#include <gtest/gtest.h>

namespace morpheus::cli {
namespace {

const std::vector<OptionSpec> Specs = {{"--iface", "IF", "interface"},
                                       {"--quiet", "", "less output"},
                                       {"-I", "DIR", "include", true}};

Expected<Args> parse(std::vector<std::string> words) {
  std::vector<char *> argv;
  for (std::string &word : words)
    argv.push_back(word.data());
  return Args::parse("run", argv.size(), argv.data(), 0, Specs);
}

TEST(Args, ParsesPositionalsOptionsAndGluedCompilerFlags) {
  auto args = parse({"prog.c", "--iface", "eth0", "--quiet", "-Iinc", "-I", "other",
                     "--iface=ignored-duplicate"});
  ASSERT_FALSE(bool(args));
  EXPECT_NE(llvm::toString(args.takeError()).find("--iface given twice"), std::string::npos);

  args = parse({"prog.c", "--iface=eth0", "--quiet", "-Iinc", "-I", "other"});
  ASSERT_TRUE(bool(args)) << llvm::toString(args.takeError());
  EXPECT_EQ(args->positional(), std::vector<std::string>{"prog.c"});
  EXPECT_EQ(*args->get("--iface"), "eth0");
  EXPECT_TRUE(args->has("--quiet"));
  EXPECT_EQ(args->all("-I"), (std::vector<std::string>{"inc", "other"}));
}

TEST(Args, UnknownOptionsAndMissingValuesAreErrors) {
  auto unknown = parse({"--ifcae", "eth0"});
  ASSERT_FALSE(bool(unknown));
  EXPECT_NE(llvm::toString(unknown.takeError()).find("unknown option '--ifcae'"),
            std::string::npos);
  auto missing = parse({"prog.c", "--iface"});
  ASSERT_FALSE(bool(missing));
  EXPECT_NE(llvm::toString(missing.takeError()).find("needs a value"), std::string::npos);
}

TEST(Args, DurationsAndNumbers) {
  EXPECT_EQ(cantFail(parseDuration("1s", "--period")), 1000);
  EXPECT_EQ(cantFail(parseDuration("250ms", "--period")), 250);
  EXPECT_EQ(cantFail(parseDuration("2", "--period")), 2000);
  for (const char *bad : {"", "fast", "-1s", "3h"}) {
    auto parsed = parseDuration(bad, "--period");
    EXPECT_FALSE(bool(parsed)) << bad;
    llvm::consumeError(parsed.takeError());
  }
  EXPECT_EQ(cantFail(parseUnsigned("64", "--inline-limit")), 64u);
  auto negative = parseUnsigned("-3", "--inline-limit");
  EXPECT_FALSE(bool(negative));
  llvm::consumeError(negative.takeError());
}

} // namespace
} // namespace morpheus::cli
