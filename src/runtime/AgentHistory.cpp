#include "runtime/AgentHistory.h"

#include <algorithm>
#include <limits>
#include <string>

namespace morpheus::runtime {

namespace {

using nlohmann::json;

Expected<const json *> field(const json &object, const char *name, const std::string &where) {
  auto found = object.find(name);
  if (found == object.end())
    return makeError("{0}: \"{1}\" missing", where, name);
  return &*found;
}

Expected<double> number(const json &object, const char *name, const std::string &where) {
  auto value = field(object, name, where);
  if (!value)
    return value.takeError();
  if (!(*value)->is_number())
    return makeError("{0}: \"{1}\" is not a number", where, name);
  return (*value)->get<double>();
}

Expected<uint64_t> count(const json &object, const char *name, const std::string &where) {
  auto value = field(object, name, where);
  if (!value)
    return value.takeError();
  if (!(*value)->is_number_unsigned())
    return makeError("{0}: \"{1}\" is not a count", where, name);
  return (*value)->get<uint64_t>();
}

Expected<const json *> list(const json &object, const char *name) {
  auto value = field(object, name, "history");
  if (!value)
    return value.takeError();
  if (!(*value)->is_array())
    return makeError("history: \"{0}\" is not an array", name);
  return *value;
}

} // namespace

void ProgramHistory::sample(const HistorySample &sample) {
  sampled.push_back(sample);
  if (sampled.size() <= capacity)
    return;
  sampled.pop_front();
  // The installs of the periods dropped go with them.
  while (!installed.empty() && installed.front().time < sampled.front().time)
    installed.pop_front();
}

void ProgramHistory::install(const HistoryInstall &install) {
  installed.push_back(install);
  if (installed.size() > capacity)
    installed.pop_front();
}

json ProgramHistory::toJson() const {
  json samples = json::array();
  for (const HistorySample &sample : sampled) {
    json point = {{"time", sample.time},
                  {"packets", sample.packets},
                  {"program", sample.specialized ? "specialized" : "generic"}};
    if (sample.nsPerPacket)
      point["ns_per_packet"] = *sample.nsPerPacket;
    samples.push_back(std::move(point));
  }
  json installs = json::array();
  for (const HistoryInstall &install : installed)
    installs.push_back({{"time", install.time}, {"version", install.version}});
  return {{"samples", std::move(samples)}, {"installs", std::move(installs)}};
}

Expected<ProgramHistory> ProgramHistory::fromJson(const json &history) {
  if (!history.is_object())
    return makeError("history: not a JSON object");
  auto samples = list(history, "samples");
  if (!samples)
    return samples.takeError();
  auto installs = list(history, "installs");
  if (!installs)
    return installs.takeError();
  ProgramHistory read(std::max((*samples)->size(), (*installs)->size()));
  for (size_t i = 0; i < (*samples)->size(); ++i) {
    const json &point = (**samples)[i];
    std::string where = "history: sample " + std::to_string(i);
    if (!point.is_object())
      return makeError("{0}: not a JSON object", where);
    HistorySample sample;
    auto time = number(point, "time", where);
    if (!time)
      return time.takeError();
    sample.time = *time;
    auto packets = count(point, "packets", where);
    if (!packets)
      return packets.takeError();
    sample.packets = *packets;
    auto program = field(point, "program", where);
    if (!program)
      return program.takeError();
    if (**program != "generic" && **program != "specialized")
      return makeError("{0}: \"program\" is neither \"generic\" nor \"specialized\"", where);
    sample.specialized = **program == "specialized";
    if (point.contains("ns_per_packet")) {
      auto ns = number(point, "ns_per_packet", where);
      if (!ns)
        return ns.takeError();
      sample.nsPerPacket = *ns;
    }
    read.sampled.push_back(sample);
  }
  for (size_t i = 0; i < (*installs)->size(); ++i) {
    const json &entry = (**installs)[i];
    std::string where = "history: install " + std::to_string(i);
    if (!entry.is_object())
      return makeError("{0}: not a JSON object", where);
    auto time = number(entry, "time", where);
    if (!time)
      return time.takeError();
    auto version = count(entry, "version", where);
    if (!version)
      return version.takeError();
    read.installed.push_back({*time, *version});
  }
  return read;
}

} // namespace morpheus::runtime
