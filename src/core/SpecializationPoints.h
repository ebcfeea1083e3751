// Specialization points (after Iridescent): values and conditions the
// author of a handler marks, in its source, as ones a specialized version
// may assume (backend/user/include/morpheus_spec.h). In the IR a point is a
// call to a marker function the core recognises by name:
//   i64 mu_spec_enum(ptr label, i64 input, <candidates>...)
//   i64 mu_spec_range(ptr label, i64 input, i64 low, i64 high)
//   i64 mu_spec_generic(ptr label, i64 input)
//   i32 mu_spec_assume(ptr label, i32 condition)
// A disabled point is its input (an assumption: true); an enabled one is
// lowered by the specialization-points pass behind a guard
// (passes/SpecializationPoints.cpp). Like a table, a point is an
// assumption about what the program will see, checked where it is used.
#pragma once

#include "support/Error.h"

#include <llvm/IR/Instructions.h>
#include <llvm/IR/Module.h>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::core {

// The pass that lowers them (Passes.def), which every pipeline with
// points must run.
constexpr const char *SpecializationPointsPassName = "specialization-points";

enum class PointKind { Enum, Range, Generic, Assume };
const char *pointKindName(PointKind kind);

// One marker call.
struct PointCall {
  llvm::CallInst *call = nullptr;
  PointKind kind = PointKind::Generic;
  std::string label;
  llvm::Value *input = nullptr; // the value (or condition) it stands for
};

// What a handler's points are: one per label (the calls of one label are
// one choice), with the values the policy may choose from.
struct SpecializationPoint {
  std::string label;
  PointKind kind = PointKind::Generic;
  // Enum: the listed values; Range: low..high when at most
  // RangeCandidateLimit of them, else empty; Generic: none (the policy
  // names them); Assume: {1} (assumed).
  std::vector<int64_t> candidates;
  int64_t low = 0, high = 0; // Range
  unsigned calls = 0;        // marker calls with this label
};

constexpr int64_t RangeCandidateLimit = 64;

// Whether `function` is one of the marker functions (which do nothing).
bool isPointMarker(const llvm::Function &function);

// The marker call `call` is, or nullopt. A marker whose label is not a
// constant string or whose candidates are not integer constants is an
// error naming the function.
Expected<std::optional<PointCall>> matchPointCall(llvm::CallInst &call);

// Every marker call of `module`, in function and instruction order.
Expected<std::vector<PointCall>> pointCalls(llvm::Module &module);

// The module's specialization space: its points by label. Calls of one
// label must agree on the kind.
Expected<std::vector<SpecializationPoint>> specializationSpace(llvm::Module &module);

// Which points a specialization assumes, by label, and with what value (an
// assumption: any value, it is assumed or absent). Labels absent are
// disabled.
using PointConfiguration = std::map<std::string, int64_t>;

// Whether `value` is one a point of `kind` may take (Enum: listed; Range:
// within bounds; Generic: any; Assume: any).
bool admits(const SpecializationPoint &point, int64_t value);

// Checks a configuration against the space: every label known, every value
// admitted. The error names the label and the value.
Error checkConfiguration(const std::vector<SpecializationPoint> &space,
                         const PointConfiguration &configuration);

// Replaces `point` by what a disabled point is: its input, converted to
// the marker's type (an assumption: true).
void disablePoint(const PointCall &point);

// Removes the declarations of markers nothing calls any more.
void eraseUnusedMarkers(llvm::Module &module);

// Disables every point of `module` (the generic handler).
Error disableSpecializationPoints(llvm::Module &module);

} // namespace morpheus::core
