// How analyses and specialization decisions are shown: one JSON form (for
// machines and tests) and one text form (for operators), built from the same
// data so they agree.
#pragma once

#include "backend/bpf/ProgramSpec.h"
#include "core/passes/TableRewriting.h"

#include <nlohmann/json.hpp>

#include <string>

namespace morpheus::cli {

nlohmann::json analysisToJson(const bpf::ProgramSpec &spec);
std::string analysisToText(const bpf::ProgramSpec &spec);

// `morpheus analyze --explain`: per map and site, what Morpheus would do
// with it and, when not, the precise reason and what would change it;
// per global variable, whether Morpheus touches it. Field names come from
// the program's debug info.
std::string explanationToText(const bpf::ProgramSpec &spec, uint32_t inlineLimit);

nlohmann::json logToJson(const core::SpecializationLog &log);

} // namespace morpheus::cli
