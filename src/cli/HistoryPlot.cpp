#include "cli/HistoryPlot.h"

#include <llvm/Support/FormatVariadic.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <ctime>
#include <limits>

namespace morpheus::cli {

namespace {

// The page's geometry, in SVG user units.
constexpr double Width = 960, Left = 72, Right = 24, PanelsTop = 76, PanelHeight = 170,
                 PanelGap = 56, Footer = 40;
constexpr double PlotWidth = Width - Left - Right;

std::string escaped(const std::string &text) {
  std::string out;
  for (char c : text) {
    switch (c) {
    case '&':
      out += "&amp;";
      break;
    case '<':
      out += "&lt;";
      break;
    case '>':
      out += "&gt;";
      break;
    case '"':
      out += "&quot;";
      break;
    case '\'':
      out += "&apos;";
      break;
    default:
      out += c;
    }
  }
  return out;
}

std::string number(double value) { return llvm::formatv("{0:f1}", value).str(); }

// 1, 2 or 5 times a power of ten, at least `rough`.
double niceStep(double rough) {
  double power = std::pow(10, std::floor(std::log10(rough)));
  for (double factor : {1.0, 2.0, 5.0, 10.0})
    if (factor * power >= rough)
      return factor * power;
  return 10 * power;
}

// A tick of `step`'s scale: no more decimals than the step has.
std::string tickLabel(double tick, double step) {
  int decimals = step >= 1 ? 0 : int(std::ceil(-std::log10(step) - 1e-9));
  char text[32];
  std::snprintf(text, sizeof text, "%.*f", decimals, tick);
  return text;
}

// Seconds between time ticks: at most eight ticks over `span`.
double timeStep(double span) {
  for (double step : {1.0, 2.0, 5.0, 10.0, 15.0, 30.0, 60.0, 120.0, 300.0, 600.0, 900.0, 1800.0,
                      3600.0, 7200.0, 10800.0, 21600.0, 43200.0})
    if (span / step <= 8)
      return step;
  return 86400 * std::ceil(span / 86400 / 8);
}

struct TimeAxis {
  double from, to;
  double x(double time) const { return Left + (time - from) / (to - from) * PlotWidth; }
};

TimeAxis timeAxis(const std::vector<PlottedProgram> &programs) {
  double from = std::numeric_limits<double>::infinity(), to = -from;
  for (const PlottedProgram &program : programs) {
    for (const runtime::HistorySample &sample : program.history.samples()) {
      from = std::min(from, sample.time);
      to = std::max(to, sample.time);
    }
    for (const runtime::HistoryInstall &install : program.history.installs()) {
      from = std::min(from, install.time);
      to = std::max(to, install.time);
    }
  }
  if (!std::isfinite(from))
    from = to = 0;
  if (to <= from)
    to = from + 1;
  return {from, to};
}

// One program's panel, its plot area's top at `top`.
void panel(std::string &svg, const PlottedProgram &program, const TimeAxis &time, double top,
           bool last) {
  const auto &samples = program.history.samples();
  double highest = 0;
  for (const runtime::HistorySample &sample : samples)
    if (sample.nsPerPacket)
      highest = std::max(highest, *sample.nsPerPacket);
  double step = niceStep(highest > 0 ? highest / 4 : 1);
  double ceiling = step * std::max(1.0, std::ceil(highest / step));
  auto y = [&](double ns) { return top + PanelHeight - ns / ceiling * PanelHeight; };

  svg += llvm::formatv("<text class=\"name\" x=\"{0}\" y=\"{1}\">{2}</text>\n", number(Left),
                       number(top - 10), escaped(program.name))
             .str();
  svg += llvm::formatv("<rect class=\"frame\" x=\"{0}\" y=\"{1}\" width=\"{2}\" height=\"{3}\"/>\n",
                       number(Left), number(top), number(PlotWidth), number(PanelHeight))
             .str();
  for (double tick = 0; tick <= ceiling * (1 + 1e-9); tick += step)
    svg +=
        llvm::formatv("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{2}\" y2=\"{1}\"/>"
                      "<text class=\"tick\" x=\"{3}\" y=\"{4}\" text-anchor=\"end\">{5}</text>\n",
                      number(Left), number(y(tick)), number(Left + PlotWidth), number(Left - 6),
                      number(y(tick) + 4), tickLabel(tick, step))
            .str();
  svg += llvm::formatv("<text class=\"axis\" transform=\"translate({0},{1}) rotate(-90)\" "
                       "text-anchor=\"middle\">ns/packet</text>\n",
                       number(Left - 48), number(top + PanelHeight / 2))
             .str();
  double tickStep = timeStep(time.to - time.from);
  for (double tick = std::ceil(time.from / tickStep) * tickStep; tick <= time.to;
       tick += tickStep) {
    svg += llvm::formatv("<line class=\"grid\" x1=\"{0}\" y1=\"{1}\" x2=\"{0}\" y2=\"{2}\"/>\n",
                         number(time.x(tick)), number(top), number(top + PanelHeight))
               .str();
    if (last)
      svg +=
          llvm::formatv("<text class=\"tick\" x=\"{0}\" y=\"{1}\" "
                        "text-anchor=\"middle\">{2}</text>\n",
                        number(time.x(tick)), number(top + PanelHeight + 16), utcTime(tick, false))
              .str();
  }
  if (highest == 0)
    svg += llvm::formatv("<text class=\"empty\" x=\"{0}\" y=\"{1}\" text-anchor=\"middle\">{2}"
                         "</text>\n",
                         number(Left + PlotWidth / 2), number(top + PanelHeight / 2),
                         samples.empty() ? "no status period yet"
                                         : "no packet measured (none ran, or bpf_stats is off)")
               .str();

  // Runs of periods measured on the same program are lines; a period with
  // no figure, or the other program, starts a new one.
  std::vector<std::pair<double, double>> run;
  bool runSpecialized = false;
  auto flush = [&] {
    const char *kind = runSpecialized ? "specialized" : "generic";
    if (run.size() == 1)
      svg += llvm::formatv("<circle class=\"{0}\" cx=\"{1}\" cy=\"{2}\" r=\"2\"/>\n", kind,
                           number(run[0].first), number(run[0].second))
                 .str();
    else if (run.size() > 1) {
      svg += llvm::formatv("<polyline class=\"{0}\" points=\"", kind).str();
      for (size_t i = 0; i < run.size(); ++i)
        svg += (i ? " " : "") + number(run[i].first) + "," + number(run[i].second);
      svg += "\"/>\n";
    }
    run.clear();
  };
  for (const runtime::HistorySample &sample : samples) {
    if (!sample.nsPerPacket || (!run.empty() && sample.specialized != runSpecialized))
      flush();
    if (!sample.nsPerPacket)
      continue;
    runSpecialized = sample.specialized;
    run.push_back({time.x(sample.time), y(*sample.nsPerPacket)});
  }
  flush();

  for (const runtime::HistoryInstall &install : program.history.installs()) {
    double x = time.x(install.time);
    svg += llvm::formatv("<g class=\"install\"><title>version {0} installed at {1} UTC</title>"
                         "<line x1=\"{2}\" y1=\"{3}\" x2=\"{2}\" y2=\"{4}\"/>"
                         "<text x=\"{5}\" y=\"{6}\">v{0}</text></g>\n",
                         install.version, utcTime(install.time, true), number(x), number(top),
                         number(top + PanelHeight), number(x + 3), number(top + 11))
               .str();
  }
}

} // namespace

std::string utcTime(double unixSeconds, bool withDate) {
  std::time_t seconds = std::time_t(std::floor(unixSeconds));
  std::tm utc{};
  gmtime_r(&seconds, &utc);
  char text[32];
  std::strftime(text, sizeof text, withDate ? "%Y-%m-%d %H:%M:%S" : "%H:%M:%S", &utc);
  return text;
}

std::string plotHistory(const std::vector<PlottedProgram> &programs) {
  TimeAxis time = timeAxis(programs);
  size_t panels = std::max<size_t>(programs.size(), 1);
  double height = PanelsTop + double(panels) * (PanelHeight + PanelGap) - PanelGap + Footer;
  std::string svg = llvm::formatv("<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" "
                                  "height=\"{1}\" viewBox=\"0 0 {0} {1}\">\n",
                                  number(Width), number(height))
                        .str();
  svg += "<style>\n"
         "text { font-family: sans-serif; font-size: 11px; fill: #222; }\n"
         ".title { font-size: 15px; } .name { font-size: 13px; font-weight: bold; }\n"
         ".frame { fill: none; stroke: #999; } .grid { stroke: #e4e4e4; }\n"
         ".generic { stroke: #1f77b4; fill: none; stroke-width: 1.5; }\n"
         ".specialized { stroke: #ff7f0e; fill: none; stroke-width: 1.5; }\n"
         "circle.generic { fill: #1f77b4; } circle.specialized { fill: #ff7f0e; }\n"
         ".install line { stroke: #444; stroke-dasharray: 4 3; }\n"
         ".install text { fill: #444; font-size: 10px; }\n"
         "</style>\n"
         "<rect width=\"100%\" height=\"100%\" fill=\"white\"/>\n";
  svg += llvm::formatv("<text class=\"title\" x=\"{0}\" y=\"22\">Morpheus: ns/packet per "
                       "program, {1} to {2} UTC</text>\n",
                       number(Left), utcTime(time.from, true), utcTime(time.to, true))
             .str();
  // The legend, right under the title.
  double legend = Left;
  for (auto [kind, words] :
       {std::pair{"generic", "generic program"}, {"specialized", "specialized version"}}) {
    svg += llvm::formatv("<line class=\"{0}\" x1=\"{1}\" y1=\"36\" x2=\"{2}\" y2=\"36\"/>"
                         "<text x=\"{3}\" y=\"40\">{4}</text>\n",
                         kind, number(legend), number(legend + 18), number(legend + 22), words)
               .str();
    legend += 150;
  }
  svg += llvm::formatv("<g class=\"legend\"><line x1=\"{0}\" y1=\"30\" x2=\"{0}\" y2=\"42\" "
                       "stroke=\"#444\" stroke-dasharray=\"4 3\"/><text x=\"{1}\" y=\"40\">"
                       "install (vN: its guard version)</text></g>\n",
                       number(legend + 6), number(legend + 12))
             .str();
  if (programs.empty())
    svg += llvm::formatv("<text x=\"{0}\" y=\"{1}\">no programs</text>\n", number(Left),
                         number(PanelsTop))
               .str();
  for (size_t i = 0; i < programs.size(); ++i)
    panel(svg, programs[i], time, PanelsTop + double(i) * (PanelHeight + PanelGap),
          i + 1 == programs.size());
  return svg + "</svg>\n";
}

} // namespace morpheus::cli
