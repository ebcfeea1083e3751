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

nlohmann::json logToJson(const core::SpecializationLog &log);

} // namespace morpheus::cli
