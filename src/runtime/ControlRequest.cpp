#include "runtime/ControlRequest.h"

#include "backend/bpf/Snapshot.h"
#include "support/Excerpt.h"

#include <llvm/ADT/StringExtras.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>

namespace morpheus::runtime {

namespace {

using nlohmann::json;

struct OpFields {
  const char *op;
  ControlOp kind;
  std::vector<std::string> fields; // every field the op takes, "op" first
  std::vector<std::string> required;
};

const std::array<OpFields, 6> &opTable() {
  static const std::array<OpFields, 6> table = {{
      {"update",
       ControlOp::Update,
       {"op", "program", "map", "key", "value", "flags"},
       {"op", "map", "key", "value"}},
      {"delete", ControlOp::Delete, {"op", "program", "map", "key"}, {"op", "map", "key"}},
      {"status", ControlOp::Status, {"op", "program"}, {"op"}},
      {"history", ControlOp::History, {"op", "program"}, {"op"}},
      {"reload", ControlOp::Reload, {"op"}, {"op"}},
      {"handover", ControlOp::Handover, {"op"}, {"op"}},
  }};
  return table;
}

// "update, delete, ...": the ops, for messages.
std::string opNames() {
  std::vector<std::string> names;
  for (const OpFields &entry : opTable())
    names.push_back(entry.op);
  return llvm::join(names, ", ");
}

// What a client sent where something else was expected, for the message.
std::string describe(const json &value) {
  switch (value.type()) {
  case json::value_t::null:
    return "null";
  case json::value_t::boolean:
    return "a boolean";
  case json::value_t::number_integer:
  case json::value_t::number_unsigned:
    return "the integer " + value.dump();
  case json::value_t::number_float:
    return "the number " + value.dump();
  case json::value_t::string:
    return value.get_ref<const std::string &>().empty() ? "an empty string" : "a string";
  case json::value_t::array:
    return "an array";
  case json::value_t::object:
    return "an object";
  default:
    return "a " + std::string(value.type_name());
  }
}

Error fieldError(const std::string &field, const std::string &expected, const json &got) {
  return makeError("\"{0}\": expected {1}, got {2}", field, expected, describe(got));
}

Expected<uint64_t> parseFlags(const json &flags) {
  // nlohmann reads a non-negative integer as unsigned, a negative one as
  // signed, and one beyond 64 bits as a float: only the first is flags.
  if (!flags.is_number_unsigned())
    return fieldError("flags", "an integer from 0 to 18446744073709551615", flags);
  return flags.get<uint64_t>();
}

} // namespace

Expected<ControlRequest> parseControlRequest(std::string_view line) {
  // Without exceptions: a line that is not JSON (or not UTF-8) is discarded.
  json request = json::parse(line.begin(), line.end(), nullptr, /*allow_exceptions=*/false);
  if (request.is_discarded())
    return makeError("not a JSON object: '{0}'", excerptForMessage(line));
  if (!request.is_object())
    return makeError("expected a JSON object like {{\"op\":\"status\"}, got {0}",
                     describe(request));
  auto op = request.find("op");
  if (op == request.end())
    return makeError("\"op\": missing ({0})", opNames());
  if (!op->is_string())
    return fieldError("op", "a string (" + opNames() + ")", *op);
  const std::string &name = op->get_ref<const std::string &>();
  const auto &table = opTable();
  auto entry = std::find_if(table.begin(), table.end(),
                            [&](const OpFields &candidate) { return name == candidate.op; });
  if (entry == table.end())
    return makeError("\"op\": unknown op '{0}' ({1})", excerptForMessage(name), opNames());

  for (const auto &[field, value] : request.items())
    if (std::find(entry->fields.begin(), entry->fields.end(), field) == entry->fields.end())
      return makeError("\"{0}\": not a field of op '{1}' (it takes {2})",
                       excerptForMessage(field), entry->op, llvm::join(entry->fields, ", "));
  for (const std::string &field : entry->required)
    if (!request.contains(field))
      return makeError("\"{0}\": missing (op '{1}' takes {2})", field, entry->op,
                       llvm::join(entry->fields, ", "));

  ControlRequest parsed;
  parsed.op = entry->kind;
  if (auto program = request.find("program"); program != request.end()) {
    if (!program->is_string() || program->get_ref<const std::string &>().empty())
      return fieldError("program", "a program name", *program);
    parsed.program = program->get<std::string>();
  }
  if (parsed.op == ControlOp::Status || parsed.op == ControlOp::History ||
      parsed.op == ControlOp::Reload || parsed.op == ControlOp::Handover)
    return parsed;
  const json &map = *request.find("map");
  if (!map.is_string() || map.get_ref<const std::string &>().empty())
    return fieldError("map", "a map name", map);
  parsed.map = map.get<std::string>();
  auto key = bpf::parseJsonBytes(*request.find("key"), "\"key\"");
  if (!key)
    return key.takeError();
  parsed.key = std::move(*key);
  if (parsed.op == ControlOp::Delete)
    return parsed;
  auto value = bpf::parseJsonBytes(*request.find("value"), "\"value\"");
  if (!value)
    return value.takeError();
  parsed.value = std::move(*value);
  if (auto flags = request.find("flags"); flags != request.end()) {
    auto checked = parseFlags(*flags);
    if (!checked)
      return checked.takeError();
    parsed.flags = *checked;
  }
  return parsed;
}

} // namespace morpheus::runtime
