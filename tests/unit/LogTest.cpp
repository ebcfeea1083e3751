// The one logger (support/Log): text as Morpheus always printed it, JSON
// lines with the same content, levels.
#include "support/Log.h"

#include <gtest/gtest.h>
#include <llvm/Support/raw_ostream.h>
#include <nlohmann/json.hpp>

#include <sstream>

namespace morpheus {
namespace {

struct Streams {
  std::string out, errors;
  llvm::raw_string_ostream outStream{out}, errorStream{errors};
};

std::vector<nlohmann::json> jsonLines(const std::string &text) {
  std::vector<nlohmann::json> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);)
    lines.push_back(nlohmann::json::parse(line)); // throws (and fails) unless each line is JSON
  return lines;
}

TEST(Log, TextKeepsRecordsAsGivenAndPrefixesProblems) {
  Streams streams;
  Log log(streams.outStream, streams.errorStream);
  log.record("cycle", {{"cycle", 1}}, "cycle 1: installed\n");
  log.error("cannot write the reproducer /x");
  log.warning("no Morpheus guard beside /p");
  log.info("progress");
  log.debug("hidden at the default level");
  log.external(LogLevel::Warning, "libbpf", "prog 'x': failed\n");
  EXPECT_EQ(streams.out, "cycle 1: installed\n");
  EXPECT_EQ(streams.errors, "morpheus: cannot write the reproducer /x\n"
                            "morpheus: warning: no Morpheus guard beside /p\n"
                            "progress\n"
                            "libbpf: prog 'x': failed\n");
}

TEST(Log, JsonWritesOneObjectALineOnOut) {
  Streams streams;
  Log log(streams.outStream, streams.errorStream, LogLevel::Info, LogFormat::Json);
  log.record("status", {{"cycle", 3}, {"program", "specialized"}}, "status: ...\n");
  log.error("interface 'eth9': gone");
  log.external(LogLevel::Warning, "libbpf", "line one\nline two\n");
  EXPECT_EQ(streams.errors, "");
  std::vector<nlohmann::json> lines = jsonLines(streams.out);
  ASSERT_EQ(lines.size(), 3u);
  EXPECT_EQ(lines[0]["event"], "status");
  EXPECT_EQ(lines[0]["cycle"], 3);
  EXPECT_EQ(lines[0]["program"], "specialized");
  EXPECT_EQ(lines[1]["event"], "log");
  EXPECT_EQ(lines[1]["level"], "error");
  EXPECT_EQ(lines[1]["message"], "interface 'eth9': gone");
  EXPECT_EQ(lines[2]["source"], "libbpf");
  EXPECT_EQ(lines[2]["message"], "line one\nline two");
}

TEST(Log, JsonRecordWithoutFieldsIsItsEventAlone) {
  Streams streams;
  Log log(streams.outStream, streams.errorStream, LogLevel::Info, LogFormat::Json);
  log.record("agent_stopping", {}, "agent: stopping\n"); // threw: update() of a null
  std::vector<nlohmann::json> lines = jsonLines(streams.out);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0], nlohmann::json({{"event", "agent_stopping"}}));
}

// The agent's programs share its streams: every line says whose it is.
TEST(Log, ASubjectStartsEveryTextLineAndNamesEveryJsonLine) {
  Streams text;
  Log log(text.outStream, text.errorStream, LogLevel::Info, LogFormat::Text, "morpheus",
          "edge_fw");
  log.record("cycle", {}, "cycle 1: installed\n  injection by phase (ms): load 3\n");
  log.error("interface 'eth9': gone");
  log.info("progress");
  EXPECT_EQ(text.out, "[edge_fw] cycle 1: installed\n[edge_fw]   injection by phase (ms): load 3\n");
  EXPECT_EQ(text.errors, "morpheus: [edge_fw] interface 'eth9': gone\n[edge_fw] progress\n");

  Streams json;
  Log jsonLog(json.outStream, json.errorStream, LogLevel::Info, LogFormat::Json, "morpheus",
              "edge_fw");
  jsonLog.record("status", {{"cycle", 3}}, "");
  jsonLog.warning("slow");
  std::vector<nlohmann::json> lines = jsonLines(json.out);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0]["name"], "edge_fw");
  EXPECT_EQ(lines[1]["name"], "edge_fw");
  EXPECT_EQ(lines[1]["message"], "slow");
}

TEST(Log, LevelsHideWhatIsBelowThem) {
  Streams quiet;
  Log warnings(quiet.outStream, quiet.errorStream, LogLevel::Warning);
  warnings.record("cycle", {}, "cycle 1: installed\n");
  warnings.info("progress");
  warnings.warning("kept");
  EXPECT_EQ(quiet.out, "");
  EXPECT_EQ(quiet.errors, "morpheus: warning: kept\n");

  Streams verbose;
  Log debug(verbose.outStream, verbose.errorStream, LogLevel::Debug);
  debug.debug("shown with -v");
  EXPECT_EQ(verbose.errors, "shown with -v\n");
}

} // namespace
} // namespace morpheus
