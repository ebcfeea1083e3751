// Where this machine's cost model calibration (`morpheus bench calibrate`)
// is cached, and reading it back for `morpheus run` and `morpheus bench`.
// The file is keyed by host name, kernel release and architecture: a
// calibration measured on another machine or kernel is never used.
#pragma once

#include "core/CostModel.h"
#include "support/Error.h"

#include <optional>
#include <string>

namespace morpheus::runtime {

// $MORPHEUS_CACHE_DIR, else $XDG_CACHE_HOME/morpheus, else
// $HOME/.cache/morpheus, then cost-model-vFORMAT-HOST-RELEASE-ARCH.json.
std::string calibrationPath();

// "HOST, kernel RELEASE (ARCH)": what a calibration names its machine by.
std::string machineDescription();

// The calibration at `path`, or nullopt when there is none; an unreadable
// or malformed file is an error naming it.
Expected<std::optional<core::CostModel>> readCalibration(const std::string &path);

// Writes `model` to `path`, creating its directory.
Error writeCalibration(const std::string &path, const core::CostModel &model);

// The model `run` and `bench` use: the calibration at `path` if there is
// one, else the defaults; `said` tells the operator which, and why.
Expected<core::CostModel> costModelFor(const std::string &path, std::string &said);

} // namespace morpheus::runtime
