// What the agent keeps of each program's past (runtime/AgentHistory) and
// its plot (cli/HistoryPlot, `morpheus status --plot`): bounded as its
// header says, read back as written, and drawn with every period's figure
// and every install. The SVG is read by Python's XML parser, which refuses
// what a browser would refuse to open.
#include "runtime/AgentHistory.h"
#include "cli/HistoryPlot.h"

#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FileUtilities.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Testing/Support/Error.h>

namespace morpheus {
namespace {

using runtime::HistoryInstall;
using runtime::HistorySample;
using runtime::ProgramHistory;

HistorySample measured(double time, bool specialized, double ns) {
  return {time, 1000, specialized, ns};
}

TEST(AgentHistory, KeepsTheLastSamplesAndTheInstallsAmongThem) {
  ProgramHistory history(3);
  history.install({99.5, 1});
  for (int i = 0; i < 5; ++i)
    history.sample(measured(100 + i, i >= 2, 40 - i));
  history.install({104.5, 3});
  ASSERT_EQ(history.samples().size(), 3u) << "the capacity";
  EXPECT_EQ(history.samples().front().time, 102) << "the oldest went first";
  EXPECT_EQ(history.samples().back().time, 104);
  EXPECT_EQ(history.installs(), (std::deque<HistoryInstall>{{104.5, 3}}))
      << "the install before the oldest sample kept went with it";

  ProgramHistory starting(3);
  starting.install({99.5, 1});
  starting.sample(measured(100, true, 20));
  EXPECT_EQ(starting.installs().size(), 1u)
      << "an install before the first period stays while no period is dropped";

  ProgramHistory installsOnly(2);
  for (uint64_t version = 1; version <= 4; ++version)
    installsOnly.install({double(version), version});
  EXPECT_EQ(installsOnly.installs(), (std::deque<HistoryInstall>{{3, 3}, {4, 4}}))
      << "never more installs than the capacity";
}

TEST(AgentHistory, ReadsBackAsWrittenAndRefusesOtherForms) {
  ProgramHistory history;
  history.sample(measured(100.25, false, 41.5));
  history.sample({101.25, 0, false, std::nullopt});
  history.sample(measured(102.25, true, 12.75));
  history.install({101.5, 7});
  nlohmann::json json = history.toJson();
  EXPECT_EQ(json["samples"][1].dump(), R"({"packets":0,"program":"generic","time":101.25})")
      << "a period without packets has no figure";
  auto read = ProgramHistory::fromJson(json);
  ASSERT_THAT_EXPECTED(read, llvm::Succeeded());
  EXPECT_EQ(read->samples(), history.samples());
  EXPECT_EQ(read->installs(), history.installs());

  auto errorOf = [](const nlohmann::json &form) {
    auto refused = ProgramHistory::fromJson(form);
    return refused ? std::string("read") : llvm::toString(refused.takeError());
  };
  EXPECT_EQ(errorOf(nlohmann::json::array()), "history: not a JSON object");
  EXPECT_EQ(errorOf({{"samples", nlohmann::json::array()}}), "history: \"installs\" missing");
  nlohmann::json wrong = json;
  wrong["samples"][2]["program"] = "jit";
  EXPECT_EQ(errorOf(wrong),
            "history: sample 2: \"program\" is neither \"generic\" nor \"specialized\"");
  wrong = json;
  wrong["installs"][0]["version"] = -1;
  EXPECT_EQ(errorOf(wrong), "history: install 0: \"version\" is not a count");
}

// Counts what the SVG draws, as Python's XML parser reads it.
constexpr const char *CountDrawing = R"(
import sys
import xml.etree.ElementTree as ET
svg = '{http://www.w3.org/2000/svg}'
root = ET.parse(sys.argv[1]).getroot()
for kind in ('generic', 'specialized'):
    points = sum(len(line.get('points').split())
                 for line in root.iter(svg + 'polyline') if line.get('class') == kind)
    dots = sum(1 for dot in root.iter(svg + 'circle') if dot.get('class') == kind)
    print(kind, 'points', points, 'dots', dots)
installs = [g for g in root.iter(svg + 'g') if g.get('class') == 'install']
print('installs', ','.join(g.find(svg + 'text').text for g in installs))
print('names', ','.join(t.text for t in root.iter(svg + 'text') if t.get('class') == 'name'))
)";

TEST(HistoryPlot, DrawsEveryFigureAndEveryInstall) {
  // "fw": four generic periods, one without packets, five specialized;
  // installs of versions 3 and 5. "idle": one generic period.
  ProgramHistory fw, idle;
  for (int i = 0; i < 4; ++i)
    fw.sample(measured(1000 + i, false, 50 + i));
  fw.sample({1004, 0, true, std::nullopt});
  for (int i = 5; i < 10; ++i)
    fw.sample(measured(1000 + i, true, 30 - i));
  fw.install({1004.5, 3});
  fw.install({1008.2, 5});
  idle.sample(measured(1003, false, 20));
  std::string svg = cli::plotHistory({{"fw<&>", fw}, {"idle", idle}});

  llvm::SmallString<128> svgPath, countPath;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("history-plot", "svg", svgPath));
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("history-plot-counts", "txt", countPath));
  llvm::FileRemover removeSvg(svgPath), removeCounts(countPath);
  {
    std::error_code error;
    llvm::raw_fd_ostream out(svgPath, error);
    ASSERT_FALSE(error);
    out << svg;
  }
  auto python = llvm::sys::findProgramByName("python3");
  ASSERT_TRUE(bool(python)) << "python3 on PATH";
  std::string message;
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(countPath),
                                                std::nullopt};
  int status =
      llvm::sys::ExecuteAndWait(*python, {*python, "-c", CountDrawing, svgPath}, std::nullopt,
                                redirects, /*SecondsToWait=*/60, 0, &message);
  ASSERT_EQ(status, 0) << "the SVG is not XML: " << message << "\n" << svg;
  auto counts = llvm::MemoryBuffer::getFile(countPath);
  ASSERT_TRUE(bool(counts));
  // The generic line of fw (4 points) and idle's lone period (a dot); the
  // specialized line after the period without a figure (5 points).
  EXPECT_EQ((*counts)->getBuffer().str(), "generic points 4 dots 1\n"
                                          "specialized points 5 dots 0\n"
                                          "installs v3,v5\n"
                                          "names fw<&>,idle\n")
      << svg;
}

TEST(HistoryPlot, TimesAreUtc) {
  EXPECT_EQ(cli::utcTime(0), "1970-01-01 00:00:00");
  EXPECT_EQ(cli::utcTime(86399.9, false), "23:59:59");
}

} // namespace
} // namespace morpheus
