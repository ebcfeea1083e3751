// What `morpheus bench` reports: its results as JSON and as the tables it
// prints.
#include "Bench.h"

#include "core/PhaseClock.h"
#include "runtime/Daemon.h"

#include <llvm/Support/FormatVariadic.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <set>

namespace morpheus::bench {

nlohmann::json toJson(const BenchResult &result) {
  auto series = [](const Series &s) {
    return nlohmann::json{
        {"median", s.median()}, {"min", s.min()}, {"max", s.max()}, {"values", s.values}};
  };
  nlohmann::json traces = nlohmann::json::array();
  for (const TraceResult &trace : result.traces) {
    nlohmann::json variants = nlohmann::json::array();
    for (const VariantResult &v : trace.variants)
      variants.push_back({{"name", v.name},
                          {"net_ns", series(v.net)},
                          {"gross_ns", series(v.gross)},
                          {"speedup_net", series(v.speedup)},
                          {"segment_net_ns", v.segmentNet},
                          {"skips_lookups", v.skipsLookups}});
    traces.push_back({{"name", trace.name},
                      {"segments", trace.segments},
                      {"phases", trace.phases},
                      {"packets", trace.packets},
                      {"flows", trace.flows},
                      {"top10_share", trace.top10Share},
                      {"checked_packets", trace.checked},
                      {"control_ns", series(trace.controlNs)},
                      {"empty_alone_ns", series(trace.emptyAloneNs)},
                      {"mpps", series(trace.mpps)},
                      {"resized_frames", trace.resizedFrames},
                      {"variants", variants},
                      {"followed", trace.followed},
                      {"explored", trace.explored}});
    nlohmann::json &added = traces.back();
    if (!trace.phaseEdges.empty())
      added["phase_edges"] = trace.phaseEdges;
    if (const std::optional<AdaptationResult> &adaptation = trace.adaptation) {
      nlohmann::json slices = nlohmann::json::array(), phases = nlohmann::json::array();
      for (const AdaptationSlice &slice : adaptation->slices)
        slices.push_back({{"phase", slice.phase},
                          {"baseline_net_ns", series(slice.baselineNet)},
                          {"morpheus_net_ns", series(slice.morpheusNet)},
                          {"speedup_net", slice.speedup},
                          {"cycle", slice.cycle},
                          {"installed", slice.installed}});
      for (const PhaseAdaptation &phase : adaptation->phases)
        phases.push_back({{"spec", phase.spec},
                          {"first_slice", phase.firstSlice},
                          {"slices", phase.slices},
                          {"steady_speedup_net", phase.steadySpeedup},
                          {"slices_to_90",
                           phase.slicesTo90 ? nlohmann::json(*phase.slicesTo90) : nullptr}});
      added["adaptation"] = {
          {"period_slices", adaptation->periodSlices}, {"slices", slices}, {"phases", phases}};
    }
  }
  const CompileResult &c = result.compile;
  nlohmann::json predictions = nlohmann::json::array();
  for (const TablePrediction &prediction : c.predictions) {
    nlohmann::json candidates = nlohmann::json::object();
    for (const core::CandidateCost &candidate : prediction.choice.candidates)
      candidates[core::representationName(candidate.representation)] = candidate.ns;
    predictions.push_back({{"table", prediction.table},
                           {"site", prediction.site},
                           {"chosen", core::representationName(prediction.choice.chosen)},
                           {"predicted_ns", candidates}});
  }
  nlohmann::json phases = nlohmann::json::array();
  for (const auto &[phase, ms] : c.codegenPhaseMs)
    phases.push_back({{"phase", phase}, {"ms", series(ms)}});
  return {{"method", result.method},
          {"preset", result.preset},
          {"program", result.program},
          {"program_type", bpf::programTypeName(result.programType)},
          {"compile",
           {{"first_t1_ms", c.first.analysisMs},
            {"first_t2_ms", c.first.codegenMs},
            {"first_injection_ms", c.first.injectionMs},
            {"startup_ms", c.startupMs},
            {"startup_phases", runtime::phasesJson(c.startupPhases)},
            {"first_validation_ms", c.first.validationMs},
            {"first_validation_phases", runtime::phasesJson(c.first.validationPhases)},
            {"first_injection_phases", runtime::phasesJson(c.first.injectionPhases)},
            {"t1_ms", series(c.analysisMs)},
            {"t2_ms", series(c.codegenMs)},
            {"t2_phases", phases},
            {"instructions_original", c.originalInstructions},
            {"instructions_specialized", c.specializedInstructions},
            {"applied", c.applied},
            {"predictions", predictions}}},
          {"cost_model", result.costModel},
          {"traces", traces}};
}

namespace {

// Predicted vs measured per table. Measured: the saving of morpheus-static
// over the baseline (net medians), attributed whole to the one table whose
// representation the model changed (at one site or several); with several
// such tables it cannot be split, and is not: the tables' predicted savings
// are then summed (each changed site counted once per packet, as the
// firewall's per-field lookups run) against the measured whole.
std::string formatPredictions(const BenchResult &result, const TraceResult &trace) {
  const std::vector<TablePrediction> &predictions = result.compile.predictions;
  if (predictions.empty())
    return "";
  std::string text = "  cost model: " + result.costModel + "\n";
  auto net = [&](const char *name) -> std::optional<double> {
    for (const VariantResult &v : trace.variants)
      if (v.name == name)
        return v.net.median();
    return std::nullopt;
  };
  std::optional<double> baseline = net(BaselineName), specialized = net(StaticName);
  std::set<std::string> changedTables;
  for (const TablePrediction &prediction : predictions)
    if (prediction.choice.chosen != core::Representation::OriginalMap)
      changedTables.insert(prediction.table);
  size_t changed = changedTables.size();
  double predictedTogether = 0;
  for (const TablePrediction &prediction : predictions) {
    const core::RepresentationChoice &choice = prediction.choice;
    double map = choice.predictionFor(core::Representation::OriginalMap).value_or(NAN);
    text += llvm::formatv("    {0} site #{1}: predicted map {2:f1} ns -> {3} {4:f1} ns (saves "
                          "{5:f1})",
                          prediction.table, prediction.site, map,
                          core::representationName(choice.chosen), choice.predictedNs,
                          map - choice.predictedNs);
    if (choice.chosen != core::Representation::OriginalMap && changed == 1 && baseline &&
        specialized)
      text += llvm::formatv("; measured: morpheus-static saves {0:f1} ns net, all of it "
                            "attributed to this table: {1} {2:f1} ns",
                            *baseline - *specialized, core::representationName(choice.chosen),
                            map - (*baseline - *specialized));
    else if (choice.chosen != core::Representation::OriginalMap)
      text += llvm::formatv("; measured saving not attributed ({0} tables changed)", changed);
    if (choice.chosen != core::Representation::OriginalMap)
      predictedTogether += map - choice.predictedNs;
    if (!choice.memoryDeclined.empty())
      text += "; " + choice.memoryDeclined;
    text += "\n";
  }
  if (changed > 1 && baseline && specialized)
    text += llvm::formatv("    the {0} tables together: predicted saving {1:f1} ns (each changed "
                          "site once per packet); measured: morpheus-static saves {2:f1} ns "
                          "net\n",
                          changed, predictedTogether, *baseline - *specialized);
  return text;
}

// The adaptation experiment: each slice against the baseline, the slices
// a new version served first marked, then per phase the steady gain and how
// soon the loop reached 90 % of it.
std::string formatAdaptation(const AdaptationResult &adaptation) {
  std::string text = llvm::formatv("  adaptation: a cycle every {0} slices; '*' = the slice a "
                                   "new version served first\n"
                                   "  slice phase  baseline net ns  morpheus net ns  speed-up\n",
                                   adaptation.periodSlices)
                         .str();
  for (size_t i = 0; i < adaptation.slices.size(); ++i) {
    const AdaptationSlice &slice = adaptation.slices[i];
    text += llvm::formatv("  {0,5}{1} {2,5} {3,16:f1} {4,16:f1} {5,8:f2}x\n", i + 1,
                          slice.installed ? '*' : ' ', slice.phase + 1,
                          slice.baselineNet.median(), slice.morpheusNet.median(), slice.speedup);
  }
  for (size_t p = 0; p < adaptation.phases.size(); ++p) {
    const PhaseAdaptation &phase = adaptation.phases[p];
    text += llvm::formatv("  phase {0} ({1}): slices {2}-{3}, steady speed-up {4:f2}x", p + 1,
                          phase.spec, phase.firstSlice + 1, phase.firstSlice + phase.slices,
                          phase.steadySpeedup);
    if (phase.slicesTo90)
      text += llvm::formatv(", 90 % of its gain after {0} slices ({1:f1} periods)",
                            *phase.slicesTo90,
                            double(*phase.slicesTo90) / adaptation.periodSlices);
    else if (phase.slices && phase.steadySpeedup - 1 < 0.02)
      text += ", no gain to reach";
    text += "\n";
  }
  return text;
}

} // namespace

std::string formatResult(const BenchResult &result) {
  std::string text;
  const CompileResult &c = result.compile;
  text += llvm::formatv("{0}: {1} ({2} method{3})\n", result.preset, result.program,
                        result.method,
                        result.programType != bpf::ProgramType::Tc ? ""
                        : result.method == "live"
                            ? ", tc: on tcx ingress behind an XDP program passing every frame"
                            : ", tc: a test run per packet, each on a fresh skb");
  text += llvm::formatv("  specialization: t1 {0:f2} ms, t2 {1:f1} ms, shadow validation "
                        "{2:f1} ms, injection {3:f2} ms; recompiles: t1 median {4:f2} ms, t2 "
                        "median {5:f1} ms; instructions {6} -> {7}\n",
                        c.first.analysisMs, c.first.codegenMs, c.first.validationMs,
                        c.first.injectionMs, c.analysisMs.median(), c.codegenMs.median(),
                        c.originalInstructions, c.specializedInstructions);
  if (!c.codegenPhaseMs.empty()) {
    text += "  t2 by phase (recompile medians, ms):";
    for (const auto &[phase, ms] : c.codegenPhaseMs)
      text += llvm::formatv(" {0} {1:f1};", phase, ms.median()).str();
    text.back() = '\n';
  }
  text += llvm::formatv("  startup {0:f1} ms by phase (ms): {1}\n", c.startupMs,
                        core::phasesText(c.startupPhases));
  if (!c.first.validationPhases.empty())
    text += "  shadow validation by phase (ms): " + core::phasesText(c.first.validationPhases) +
            "\n";
  text += "  injection by phase (ms): " + core::phasesText(c.first.injectionPhases) + "\n";
  for (const std::string &applied : c.applied)
    text += "    " + applied + "\n";
  for (const TraceResult &trace : result.traces) {
    text += llvm::formatv("\n  trace {0}: {1} packets, {2} flows, top-10 share {3:f3}; "
                          "{4} packets checked alike; control {5:f1} ns, empty alone "
                          "{6:f1} ns",
                          trace.name, trace.packets, trace.flows, trace.top10Share,
                          trace.checked, trace.controlNs.median(),
                          trace.emptyAloneNs.median());
    if (trace.resizedFrames)
      text += llvm::formatv("; {0} frames restored to their length after encapsulation",
                            trace.resizedFrames);
    if (!trace.mpps.values.empty())
      text += llvm::formatv("; baseline offered {0:f2} Mpps", trace.mpps.median());
    text += "\n";
    for (const std::string &line : trace.followed)
      text += "    morpheus " + line + "\n";
    for (const std::string &line : trace.explored)
      text += "    explored " + line + "\n";
    text += "  variant                    net ns/pkt (min-max)        gross ns/pkt   speed-up net  gross\n";
    double baselineGross = trace.variants.front().gross.median();
    for (const VariantResult &v : trace.variants)
      text += llvm::formatv("  {0,-24} {1,8:f1} ({2,6:f1}-{3,6:f1})   {4,10:f1}   {5,10:f2}x "
                            "{6,5:f2}x\n",
                            v.name, v.net.median(), v.net.min(), v.net.max(), v.gross.median(),
                            v.speedup.median(), baselineGross / v.gross.median());
    text += formatPredictions(result, trace);
    if (trace.adaptation)
      text += formatAdaptation(*trace.adaptation);
  }
  return text;
}

} // namespace morpheus::bench
