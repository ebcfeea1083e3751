#include "cli/Reports.h"

#include "backend/bpf/MapIO.h"

#include <llvm/Support/FormatVariadic.h>

#include <map>
#include <tuple>

namespace morpheus::cli {

namespace {

const char *kindName(core::AccessKind kind) {
  switch (kind) {
  case core::AccessKind::Lookup:
    return "lookup";
  case core::AccessKind::Update:
    return "update";
  case core::AccessKind::Delete:
    return "delete";
  case core::AccessKind::OtherRead:
    return "read";
  case core::AccessKind::OtherWrite:
    return "write";
  }
  return "?";
}

} // namespace

nlohmann::json analysisToJson(const bpf::ProgramSpec &spec) {
  const core::TableAccessInfo &info = spec.analysis();
  nlohmann::json maps = nlohmann::json::array();
  for (const auto &[name, table] : spec.catalog()) {
    auto usage = info.tables.find(name);
    bool written = usage != info.tables.end() && usage->second.written;
    nlohmann::json map = {{"name", name},
                          {"type", table.typeName},
                          {"key_size", table.keySize},
                          {"value_size", table.valueSize},
                          {"max_entries", table.maxEntries},
                          {"access", written ? "rw" : "ro"},
                          {"sites", usage == info.tables.end() ? 0u
                                                               : usage->second.siteCount}};
    if (written)
      map["write_reasons"] = usage->second.writeReasons;
    maps.push_back(map);
  }
  nlohmann::json sites = nlohmann::json::array();
  for (const core::AccessSite &site : info.sites) {
    nlohmann::json key = {{"sources", site.key.describe()}};
    if (site.key.constantKey)
      key["constant"] = toHex(*site.key.constantKey);
    auto table = spec.catalog().find(site.table);
    if (table != spec.catalog().end())
      key["size"] = table->second.keySize;
    sites.push_back({{"id", site.id},
                     {"map", site.table},
                     {"kind", kindName(site.signature.kind)},
                     {"helper", site.signature.name},
                     {"key", key},
                     {"function", site.function},
                     {"location", site.location}});
  }
  return {{"program", spec.path()},
          {"programs", spec.programs()},
          {"maps", maps},
          {"sites", sites}};
}

std::string analysisToText(const bpf::ProgramSpec &spec) {
  nlohmann::json json = analysisToJson(spec);
  std::string out = spec.path() + ": programs";
  for (const auto &program : json["programs"])
    out += " " + program.get<std::string>();
  out += "\nmaps:\n";
  for (const auto &map : json["maps"]) {
    out += llvm::formatv("  {0,-16} {1,-14} key {2,3}  value {3,4}  max {4,8}  {5}\n",
                         map["name"].get<std::string>(),
                         map["type"].get<std::string>(), map["key_size"].get<int>(),
                         map["value_size"].get<int>(),
                         map["max_entries"].get<uint64_t>(),
                         map["access"].get<std::string>())
               .str();
    if (map.contains("write_reasons"))
      for (const auto &reason : map["write_reasons"])
        out += "      written: " + reason.get<std::string>() + "\n";
  }
  out += "sites:\n";
  for (const auto &site : json["sites"]) {
    std::string key = site["key"]["sources"].get<std::string>();
    if (site["key"].contains("constant"))
      key += " [" + site["key"]["constant"].get<std::string>() + "]";
    out += llvm::formatv("  #{0,-3} {1,-16} {2,-7} key {3}  ({4} {5})\n",
                         site["id"].get<int>(), site["map"].get<std::string>(),
                         site["kind"].get<std::string>(), key,
                         site["function"].get<std::string>(),
                         site["location"].get<std::string>())
               .str();
  }
  return out;
}

nlohmann::json logToJson(const core::SpecializationLog &log) {
  nlohmann::json sites = nlohmann::json::array();
  for (const core::SiteDecision &decision : log.decisions)
    sites.push_back({{"site", decision.site},
                     {"map", decision.table},
                     {"function", decision.function},
                     {"location", decision.location},
                     {"pass", decision.pass},
                     {"applied", decision.applied},
                     {"detail", decision.detail}});
  nlohmann::json inlined = nlohmann::json::object();
  for (const auto &[table, entries] : log.inlined) {
    nlohmann::json list = nlohmann::json::array();
    for (const core::TableEntry &entry : entries) {
      nlohmann::json item = {{"key", toHex(entry.key)}};
      item["value"] = entry.value ? nlohmann::json(toHex(*entry.value))
                                  : nlohmann::json(nullptr);
      list.push_back(item);
    }
    inlined[table] = list;
  }
  nlohmann::json guards = nlohmann::json::array();
  for (const core::GuardDecision &guard : log.guards) {
    nlohmann::json item = {{"function", guard.function},
                           {"callback", guard.callback},
                           {"fallback", core::fallbackName(guard.fallback)},
                           {"detail", guard.detail}};
    if (guard.fallback == core::Fallback::TailCall)
      item["slot"] = guard.slot;
    guards.push_back(item);
  }
  return {{"sites", sites}, {"inlined", inlined}, {"guards", guards}};
}

} // namespace morpheus::cli
