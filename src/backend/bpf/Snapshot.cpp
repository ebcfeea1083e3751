#include "backend/bpf/Snapshot.h"

#include "support/Excerpt.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>

namespace morpheus::bpf {

using core::Bytes;

Expected<Bytes> parseHexBytes(std::string_view text, const std::string &what) {
  Bytes bytes;
  std::string digits;
  size_t i = 0;
  auto flush = [&]() -> Error {
    if (digits.size() % 2)
      return makeError("{0}: '{1}' has an odd number of hex digits", what,
                       excerptForMessage(digits));
    for (size_t d = 0; d < digits.size(); d += 2)
      bytes.push_back(std::stoi(digits.substr(d, 2), nullptr, 16));
    digits.clear();
    return Error::success();
  };
  while (i < text.size()) {
    char c = text[i];
    if (std::isspace(static_cast<unsigned char>(c)) || c == ',' || c == ':') {
      if (Error err = flush())
        return err;
      ++i;
    } else if (c == '0' && i + 1 < text.size() && (text[i + 1] == 'x' || text[i + 1] == 'X') &&
               digits.empty()) {
      i += 2;
    } else if (std::isxdigit(static_cast<unsigned char>(c))) {
      digits.push_back(c);
      ++i;
    } else {
      return makeError("{0}: unexpected character '{1}' in hex bytes \"{2}\"", what,
                       excerptForMessage(std::string_view(&c, 1)), excerptForMessage(text));
    }
  }
  if (Error err = flush())
    return err;
  if (bytes.empty())
    return makeError("{0}: no bytes given", what);
  return bytes;
}

Expected<Bytes> parseJsonBytes(const nlohmann::json &value, const std::string &what) {
  if (value.is_string())
    return parseHexBytes(value.get<std::string>(), what);
  if (value.is_array()) {
    std::string joined;
    for (const auto &item : value) {
      if (!item.is_string())
        return makeError("{0}: expected hex strings like \"0x0a\"", what);
      joined += item.get<std::string>() + " ";
    }
    return parseHexBytes(joined, what);
  }
  return makeError("{0}: expected a hex string or an array of hex bytes", what);
}

Expected<core::TableSnapshot> parseSnapshot(const nlohmann::json &document,
                                            const core::TableCatalog &catalog,
                                            const std::string &source) {
  if (!document.is_object() || !document.contains("maps") ||
      !document["maps"].is_object())
    return makeError("{0}: expected an object with a \"maps\" object", source);
  core::TableSnapshot snapshot;
  for (const auto &[name, entries] : document["maps"].items()) {
    auto info = catalog.find(name);
    if (info == catalog.end())
      return makeError("{0}: map '{1}' is not a map of the program", source, name);
    if (!entries.is_array())
      return makeError("{0}: map '{1}': expected an array of entries", source, name);
    core::TableContents &contents = snapshot[name];
    contents.complete = true;
    size_t index = 0;
    for (const auto &entry : entries) {
      std::string where = source + ": map '" + name + "' entry " + std::to_string(index++);
      if (!entry.is_object() || !entry.contains("key"))
        return makeError("{0}: expected {{\"key\": ..., \"value\": ...}", where);
      auto key = parseJsonBytes(entry["key"], where + " key");
      if (!key)
        return key.takeError();
      if (key->size() != info->second.keySize)
        return makeError("{0}: key has {1} bytes, the map's keys have {2}", where,
                         key->size(), info->second.keySize);
      core::TableEntry parsed{*key, std::nullopt};
      std::vector<Bytes> values;
      // A table of tables names the program's table stored at the key
      // (its id, the value, means nothing offline).
      if (info->second.innerTemplate && entry.contains("table")) {
        if (!entry["table"].is_string() || !catalog.count(entry["table"].get<std::string>()))
          return makeError("{0}: \"table\" must name a map of the program", where);
        contents.storedTables[*key] = entry["table"].get<std::string>();
        parsed.value = Bytes(info->second.valueSize, 0);
        contents.entries.push_back(std::move(parsed));
        continue;
      }
      if (entry.contains("value")) {
        auto value = parseJsonBytes(entry["value"], where + " value");
        if (!value)
          return value.takeError();
        values.push_back(*value);
      } else if (entry.contains("values") && entry["values"].is_array()) {
        for (const auto &perCpu : entry["values"]) {
          const auto &raw = perCpu.is_object() && perCpu.contains("value")
                                ? perCpu["value"]
                                : perCpu;
          auto value = parseJsonBytes(raw, where + " per-CPU value");
          if (!value)
            return value.takeError();
          values.push_back(*value);
        }
      } else {
        return makeError("{0}: needs \"value\" (or \"values\" for per-CPU maps)", where);
      }
      for (const Bytes &value : values)
        if (value.size() != info->second.valueSize)
          return makeError("{0}: value has {1} bytes, the map's values have {2}",
                           where, value.size(), info->second.valueSize);
      if (std::all_of(values.begin(), values.end(),
                      [&](const Bytes &v) { return v == values.front(); })) {
        parsed.value = values.front();
      } else {
        parsed.cpuZero = values.front();
        parsed.agreed.assign(values.front().size(), true);
        for (const Bytes &value : values)
          for (size_t byte = 0; byte < value.size(); ++byte)
            if (value[byte] != values.front()[byte])
              parsed.agreed[byte] = false;
      }
      contents.entries.push_back(std::move(parsed));
    }
  }
  return snapshot;
}

nlohmann::json snapshotToJson(const core::TableSnapshot &snapshot) {
  nlohmann::json maps = nlohmann::json::object();
  for (const auto &[name, contents] : snapshot) {
    nlohmann::json entries = nlohmann::json::array();
    for (const core::TableEntry &entry : contents.entries) {
      nlohmann::json item = {{"key", toHex(entry.key)}};
      if (auto stored = contents.storedTables.find(entry.key);
          stored != contents.storedTables.end())
        item["table"] = stored->second;
      if (entry.value)
        item["value"] = toHex(*entry.value);
      else
        item["value_varies_by_cpu"] = true;
      entries.push_back(item);
    }
    maps[name] = entries;
  }
  return {{"maps", maps}};
}

Expected<core::TableSnapshot> readSnapshotFile(const std::string &path,
                                               const core::TableCatalog &catalog) {
  // Read whole: a legitimate snapshot of even a million-entry map stays far
  // below the limit, so a larger file is a wrong file, not a snapshot.
  constexpr uint64_t MaxSnapshotBytes = uint64_t(1) << 30;
  llvm::sys::fs::file_status status;
  if (std::error_code ec = llvm::sys::fs::status(path, status))
    return makeSystemError(ec.value(), "{0}: cannot open", path);
  if (status.type() != llvm::sys::fs::file_type::regular_file)
    return makeError("{0}: not a regular file", path);
  if (status.getSize() > MaxSnapshotBytes)
    return makeError("{0}: {1} bytes; a snapshot larger than {2} bytes is refused", path,
                     status.getSize(), MaxSnapshotBytes);
  auto buffer = llvm::MemoryBuffer::getFile(path);
  if (!buffer)
    return makeSystemError(buffer.getError().value(), "{0}: cannot read", path);
  llvm::StringRef text = (*buffer)->getBuffer();
  nlohmann::json document =
      nlohmann::json::parse(text.begin(), text.end(), nullptr, /*allow_exceptions=*/false);
  if (document.is_discarded())
    return makeError("{0}: not valid JSON", path);
  return parseSnapshot(document, catalog, path);
}

} // namespace morpheus::bpf
