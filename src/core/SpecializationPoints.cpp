#include "core/SpecializationPoints.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>

#include <algorithm>

using namespace llvm;

namespace morpheus::core {

namespace {

struct Marker {
  const char *name;
  PointKind kind;
};
const Marker Markers[] = {
    {"mu_spec_enum", PointKind::Enum},
    {"mu_spec_range", PointKind::Range},
    {"mu_spec_generic", PointKind::Generic},
    {"mu_spec_assume", PointKind::Assume},
};

std::optional<int64_t> integerConstant(const Value *value) {
  if (const auto *constant = dyn_cast<ConstantInt>(value))
    return constant->getSExtValue();
  return std::nullopt;
}

} // namespace

const char *pointKindName(PointKind kind) {
  switch (kind) {
  case PointKind::Enum:
    return "enum";
  case PointKind::Range:
    return "range";
  case PointKind::Generic:
    return "generic";
  case PointKind::Assume:
    return "assume";
  }
  return "?";
}

bool isPointMarker(const Function &function) {
  return function.isDeclaration() &&
         std::any_of(std::begin(Markers), std::end(Markers),
                     [&](const Marker &marker) { return function.getName() == marker.name; });
}

Expected<std::optional<PointCall>> matchPointCall(CallInst &call) {
  const Function *callee = call.getCalledFunction();
  if (!callee || !callee->isDeclaration())
    return std::nullopt;
  const Marker *marker = nullptr;
  for (const Marker &candidate : Markers)
    if (callee->getName() == candidate.name)
      marker = &candidate;
  if (!marker)
    return std::nullopt;
  std::string where = (call.getFunction()->getName() + "()").str();
  if (call.arg_size() < 2 || !call.getType()->isIntegerTy() ||
      !call.getArgOperand(1)->getType()->isIntegerTy())
    return makeError("{0}: {1} has the wrong signature (use morpheus_spec.h)", where,
                     marker->name);
  StringRef label;
  if (!getConstantStringInfo(call.getArgOperand(0), label) || label.empty())
    return makeError("{0}: the label of a {1} point is not a string literal", where,
                     pointKindName(marker->kind));
  PointCall point{&call, marker->kind, label.str(), call.getArgOperand(1)};
  for (unsigned arg = 2; arg < call.arg_size(); ++arg)
    if (!integerConstant(call.getArgOperand(arg)))
      return makeError("{0}: point '{1}': argument {2} is not an integer constant", where,
                       point.label, arg);
  if (marker->kind == PointKind::Range && call.arg_size() != 4)
    return makeError("{0}: point '{1}': spec_range takes low and high", where, point.label);
  if (marker->kind == PointKind::Enum && call.arg_size() < 3)
    return makeError("{0}: point '{1}': spec_enum lists no value", where, point.label);
  return point;
}

Expected<std::vector<PointCall>> pointCalls(Module &module) {
  std::vector<PointCall> points;
  for (Function &function : module)
    for (Instruction &instruction : instructions(function))
      if (auto *call = dyn_cast<CallInst>(&instruction)) {
        auto point = matchPointCall(*call);
        if (!point)
          return withContext(point.takeError(), module.getModuleIdentifier());
        if (*point)
          points.push_back(std::move(**point));
      }
  return points;
}

Expected<std::vector<SpecializationPoint>> specializationSpace(Module &module) {
  auto calls = pointCalls(module);
  if (!calls)
    return calls.takeError();
  std::vector<SpecializationPoint> space;
  for (const PointCall &call : *calls) {
    auto known = std::find_if(space.begin(), space.end(), [&](const SpecializationPoint &p) {
      return p.label == call.label;
    });
    SpecializationPoint described;
    described.label = call.label;
    described.kind = call.kind;
    CallInst &marker = *call.call;
    switch (call.kind) {
    case PointKind::Enum:
      for (unsigned arg = 2; arg < marker.arg_size(); ++arg)
        described.candidates.push_back(*integerConstant(marker.getArgOperand(arg)));
      break;
    case PointKind::Range:
      described.low = *integerConstant(marker.getArgOperand(2));
      described.high = *integerConstant(marker.getArgOperand(3));
      if (described.high >= described.low &&
          described.high - described.low < RangeCandidateLimit)
        for (int64_t value = described.low; value <= described.high; ++value)
          described.candidates.push_back(value);
      break;
    case PointKind::Generic:
      break;
    case PointKind::Assume:
      described.candidates = {1};
      break;
    }
    if (known == space.end()) {
      described.calls = 1;
      space.push_back(std::move(described));
      continue;
    }
    if (known->kind != described.kind || known->candidates != described.candidates ||
        known->low != described.low || known->high != described.high)
      return makeError("{0}: point '{1}' is declared twice with different kinds or values",
                       module.getModuleIdentifier(), call.label);
    ++known->calls;
  }
  return space;
}

bool admits(const SpecializationPoint &point, int64_t value) {
  switch (point.kind) {
  case PointKind::Enum:
    return std::find(point.candidates.begin(), point.candidates.end(), value) !=
           point.candidates.end();
  case PointKind::Range:
    return value >= point.low && value <= point.high;
  case PointKind::Generic:
  case PointKind::Assume:
    return true;
  }
  return false;
}

Error checkConfiguration(const std::vector<SpecializationPoint> &space,
                         const PointConfiguration &configuration) {
  for (const auto &[label, value] : configuration) {
    auto point = std::find_if(space.begin(), space.end(),
                              [&](const SpecializationPoint &p) { return p.label == label; });
    if (point == space.end())
      return makeError("no specialization point '{0}'", label);
    if (!admits(*point, value))
      return makeError("point '{0}' ({1}) does not admit {2}", label,
                       pointKindName(point->kind), value);
  }
  return Error::success();
}

void disablePoint(const PointCall &point) {
  CallInst &call = *point.call;
  Value *replacement;
  if (point.kind == PointKind::Assume) {
    replacement = ConstantInt::get(call.getType(), 1);
  } else {
    IRBuilder<> builder(&call);
    replacement = builder.CreateSExtOrTrunc(point.input, call.getType());
  }
  call.replaceAllUsesWith(replacement);
  call.eraseFromParent();
}

void eraseUnusedMarkers(Module &module) {
  for (Function &function : llvm::make_early_inc_range(module))
    if (isPointMarker(function) && function.use_empty())
      function.eraseFromParent();
}

Error disableSpecializationPoints(Module &module) {
  auto calls = pointCalls(module);
  if (!calls)
    return calls.takeError();
  for (const PointCall &point : *calls)
    disablePoint(point);
  eraseUnusedMarkers(module);
  return Error::success();
}

} // namespace morpheus::core
