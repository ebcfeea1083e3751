#include "backend/bpf/Snapshot.h"

#include "support/Excerpt.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cctype>
#include <cstring>

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

namespace {

// One map's listing: its entries checked against `info`'s sizes. `cpus`
// grows to the most per-CPU values an entry gives.
Expected<core::TableContents> parseEntries(const nlohmann::json &entries,
                                           const core::TableInfo &info,
                                           const core::TableCatalog &catalog,
                                           const std::string &source, const std::string &name,
                                           size_t &cpus) {
  if (!entries.is_array())
    return makeError("{0}: map '{1}': expected an array of entries", source, name);
  core::TableContents contents;
  contents.complete = true;
  size_t index = 0;
  for (const auto &entry : entries) {
    std::string where = source + ": map '" + name + "' entry " + std::to_string(index++);
    if (!entry.is_object() || !entry.contains("key"))
      return makeError("{0}: expected {{\"key\": ..., \"value\": ...}", where);
    auto key = parseJsonBytes(entry["key"], where + " key");
    if (!key)
      return key.takeError();
    if (key->size() != info.keySize)
      return makeError("{0}: key has {1} bytes, the map's keys have {2}", where, key->size(),
                       info.keySize);
    core::TableEntry parsed{*key, std::nullopt};
    std::vector<Bytes> values;
    // A table of tables names the program's table stored at the key
    // (its id, the value, means nothing offline).
    if (info.innerTemplate && entry.contains("table")) {
      if (!entry["table"].is_string() || !catalog.count(entry["table"].get<std::string>()))
        return makeError("{0}: \"table\" must name a map of the program", where);
      contents.storedTables[*key] = entry["table"].get<std::string>();
      parsed.value = Bytes(info.valueSize, 0);
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
        const auto &raw = perCpu.is_object() && perCpu.contains("value") ? perCpu["value"]
                                                                         : perCpu;
        auto value = parseJsonBytes(raw, where + " per-CPU value");
        if (!value)
          return value.takeError();
        values.push_back(*value);
      }
      cpus = std::max(cpus, values.size());
    } else {
      return makeError("{0}: needs \"value\" (or \"values\" for per-CPU maps)", where);
    }
    for (const Bytes &value : values)
      if (value.size() != info.valueSize)
        return makeError("{0}: value has {1} bytes, the map's values have {2}", where,
                         value.size(), info.valueSize);
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
  return contents;
}

} // namespace

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
    size_t cpus = 1;
    auto contents = parseEntries(entries, info->second, catalog, source, name, cpus);
    if (!contents)
      return contents.takeError();
    snapshot[name] = std::move(*contents);
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

Expected<std::string> programNamed(const std::string &name,
                                   const std::vector<std::string> &programs) {
  if (std::find(programs.begin(), programs.end(), name) != programs.end())
    return name;
  // The kernel keeps 15 characters of a program's name.
  std::vector<std::string> starting;
  for (const std::string &program : programs)
    if (name.size() == 15 && llvm::StringRef(program).starts_with(name))
      starting.push_back(program);
  if (starting.size() == 1)
    return starting.front();
  if (starting.empty())
    return makeError("the object has no program '{0}'", name);
  return makeError("'{0}' starts {1} programs of the object", name, starting.size());
}

nlohmann::json programFactsToJson(const std::map<std::string, ProgramFacts> &programs) {
  nlohmann::json document = nlohmann::json::object();
  for (const auto &[name, facts] : programs) {
    nlohmann::json &program = document[name] = nlohmann::json::object();
    if (facts.verifiedInstructions)
      program["verified_instructions"] = *facts.verifiedInstructions;
    if (facts.fallbackSlot)
      program["fallback_slot"] = *facts.fallbackSlot;
    if (facts.tailCallsBefore)
      program["tail_calls_before"] = *facts.tailCallsBefore;
  }
  return document;
}

Expected<core::TableContents> readTable(TableSource &source, const core::TableInfo &info,
                                        const core::TableReadRequest &request) {
  core::TableContents contents;
  bool wantWhole = request.wholeTableLimit > 0 &&
                   (info.match != core::TableMatch::Index ||
                    info.maxEntries <= request.wholeTableLimit);
  if (wantWhole) {
    // Walk the keys; give up as soon as the table is larger than any pass
    // could use, so a big table costs at most limit+1 steps.
    std::vector<Bytes> keys;
    bool tooLarge = false;
    if (Error err = source.forEachKey([&](const Bytes &key) {
          keys.push_back(key);
          tooLarge = keys.size() > request.wholeTableLimit;
          return !tooLarge;
        }))
      return err;
    contents.complete = !tooLarge;
    if (contents.complete)
      for (const Bytes &key : keys) {
        auto found = source.lookup(key);
        if (!found)
          return found.takeError();
        // An entry deleted between the walk and the read is simply gone.
        if (*found)
          contents.entries.push_back(std::move(**found));
      }
  }
  if (!wantWhole && request.wholeTableLimit > 0 && info.match == core::TableMatch::Index &&
      info.keySize == sizeof(uint32_t)) {
    // An array larger than the inline limit may still hold few slots that
    // differ from the rest (a 1,000-slot backend array holding 3 backends,
    // the others zero; 8,193 rule sets of which a few are used, the others
    // the loader's "empty"): the most common value every CPU agrees on is
    // the unlisted one (zeros on a tie with it), every other slot is
    // listed, however many (a pass that inlines entries declines past its
    // own limit; region-as-table reads every slot's value). Once more
    // slots read differ from their most common value than
    // request.contentDiffering, every value would leave more than that
    // many listed, whatever the rest holds; with more distinct values than
    // request.contentValues too (a slot whose CPUs disagree counting as
    // one), no pass could use the listing: the read stops there (the
    // source reads no further) and the table is read as a partial one.
    std::vector<core::TableEntry> slots;
    std::map<Bytes, uint32_t> counts;
    uint64_t mostCommon = 0, disagreeing = 0;
    bool useless = false;
    auto read = source.forEachSlot([&](core::TableEntry &&slot) {
      if (slot.value)
        mostCommon = std::max<uint64_t>(mostCommon, ++counts[*slot.value]);
      else
        ++disagreeing;
      slots.push_back(std::move(slot));
      useless = slots.size() - mostCommon > request.contentDiffering &&
                counts.size() + disagreeing > request.contentValues;
      return !useless;
    });
    if (!read)
      return read.takeError();
    if (*read && !useless) {
      Bytes common(info.valueSize, 0);
      uint32_t commonCount = counts.count(common) ? counts[common] : 0;
      for (const auto &[value, count] : counts)
        if (count > commonCount) {
          common = value;
          commonCount = count;
        }
      contents.complete = true;
      contents.unlistedValue = common;
      for (core::TableEntry &slot : slots)
        if (slot.value != common)
          contents.entries.push_back(std::move(slot));
    }
  }
  for (const Bytes &key : request.keys) {
    if (contents.complete)
      break;
    if (key.size() != info.keySize || contents.probedKeys.count(key) || !source.answers(key))
      continue;
    auto found = source.lookup(key);
    if (!found)
      return found.takeError();
    contents.probedKeys.insert(key);
    if (*found)
      contents.entries.push_back(std::move(**found));
  }
  // Hash iteration order is the kernel's business; compare by key order.
  std::sort(contents.entries.begin(), contents.entries.end(),
            [](const core::TableEntry &a, const core::TableEntry &b) { return a.key < b.key; });
  return contents;
}

namespace {

// A snapshot's listing of one table, answering as the live map would: a
// listed table holds exactly its entries, except that an array's slot it
// does not list exists with a value the listing does not know.
class ListedTable : public TableSource {
public:
  ListedTable(const core::TableInfo &info, const core::TableContents &listed, size_t cpus)
      : info(info), listed(listed), cpus(cpus) {}

  Error forEachKey(llvm::function_ref<bool(const Bytes &)> visit) override {
    for (const core::TableEntry &entry : listed.entries)
      if (!visit(entry.key))
        break;
    return Error::success();
  }
  bool answers(const Bytes &key) const override {
    return info.match != core::TableMatch::Index || listed.known(key).value_or(nullptr);
  }
  Expected<std::optional<core::TableEntry>> lookup(const Bytes &key) override {
    if (const core::TableEntry *entry = listed.known(key).value_or(nullptr))
      return std::optional(*entry);
    return std::nullopt;
  }
  Expected<bool> forEachSlot(llvm::function_ref<bool(core::TableEntry &&)> visit) override {
    // As the live read: only within ArrayContentReadBytes (per-CPU values
    // as the syscall returns them, for as many CPUs as the listing gives).
    uint64_t slotBytes = info.perCpu ? ((info.valueSize + 7) & ~uint64_t(7)) * cpus
                                     : info.valueSize;
    if (uint64_t(info.maxEntries) * slotBytes > ArrayContentReadBytes)
      return false;
    std::vector<const core::TableEntry *> slots(info.maxEntries);
    for (const core::TableEntry &entry : listed.entries) {
      uint32_t index = 0;
      std::memcpy(&index, entry.key.data(), sizeof(index));
      if (index >= info.maxEntries || slots[index])
        return false;
      slots[index] = &entry;
    }
    if (std::find(slots.begin(), slots.end(), nullptr) != slots.end())
      return false; // a slot the listing does not know
    for (const core::TableEntry *slot : slots)
      if (!visit(core::TableEntry(*slot)))
        break;
    return true;
  }

private:
  const core::TableInfo &info;
  const core::TableContents &listed;
  size_t cpus;
};

// A section map's listing (one slot, key 0, the section's bytes) cut into
// the globals of `layout` it holds.
Error readSection(const std::string &source, const std::string &section,
                  const nlohmann::json &entries, uint64_t sectionBytes,
                  const SnapshotLayout &layout, core::GlobalValues &globals) {
  std::string where = source + ": map '" + section + "'";
  if (!entries.is_array() || entries.size() != 1 || !entries[0].is_object() ||
      !entries[0].contains("key") || !entries[0].contains("value"))
    return makeError("{0}: holds the section's globals: one entry {{\"key\": \"00000000\", "
                     "\"value\": ...} expected",
                     where);
  auto key = parseJsonBytes(entries[0]["key"], where + " key");
  if (!key)
    return key.takeError();
  if (*key != Bytes(sizeof(uint32_t), 0))
    return makeError("{0}: key {1}: the section's map has one slot, key 00000000", where,
                     toHex(*key));
  auto bytes = parseJsonBytes(entries[0]["value"], where + " value");
  if (!bytes)
    return bytes.takeError();
  if (bytes->size() > sectionBytes)
    return makeError("{0}: value has {1} bytes, the section {2}: nothing of the program lies at "
                     "offset {2} and beyond",
                     where, bytes->size(), sectionBytes);
  for (const core::GlobalSlice &slice : layout.globals) {
    if (slice.sectionTable != section)
      continue;
    if (slice.offset + slice.size > bytes->size())
      return makeError("{0}: value has {1} bytes, the section {2}: global '{3}' at offset {4} "
                       "({5} bytes) is not given",
                       where, bytes->size(), sectionBytes, slice.global, slice.offset,
                       slice.size);
    globals[slice.global] =
        Bytes(bytes->begin() + slice.offset, bytes->begin() + slice.offset + slice.size);
  }
  if (bytes->size() != sectionBytes)
    return makeError("{0}: value has {1} bytes, the section {2} (offset {1} on not given)",
                     where, bytes->size(), sectionBytes);
  return Error::success();
}

Expected<std::map<std::string, ProgramFacts>> parsePrograms(const nlohmann::json &programs,
                                                            const std::vector<std::string> &names,
                                                            const std::string &source) {
  std::map<std::string, ProgramFacts> facts;
  if (!programs.is_object())
    return makeError("{0}: \"programs\" must be an object of programs", source);
  for (const auto &[name, given] : programs.items()) {
    std::string where = source + ": program '" + name + "'";
    if (!given.is_object())
      return makeError("{0}: expected {{\"verified_instructions\": N, \"fallback_slot\": "
                       "N, \"tail_calls_before\": N}",
                       where);
    auto named = programNamed(name, names);
    if (!named)
      return makeError("{0}: {1}", where, llvm::toString(named.takeError()));
    ProgramFacts &program = facts[*named];
    for (const auto &[field, value] : given.items()) {
      if (!value.is_number_unsigned() && !value.is_null())
        return makeError("{0}: \"{1}\" must be a number", where, field);
      if (field == "verified_instructions") {
        if (!value.is_null())
          program.verifiedInstructions = value.get<uint64_t>();
      } else if (field == "fallback_slot" || field == "tail_calls_before") {
        if (!value.is_null()) {
          if (value.get<uint64_t>() > UINT32_MAX)
            return makeError("{0}: \"{1}\" {2} is out of range", where, field,
                             value.get<uint64_t>());
          (field == "fallback_slot" ? program.fallbackSlot : program.tailCallsBefore) =
              uint32_t(value.get<uint64_t>());
        }
      } else {
        return makeError("{0}: unknown field \"{1}\"", where, field);
      }
    }
  }
  return facts;
}

} // namespace

Expected<ProgramSnapshot> readSnapshotFile(const std::string &path, const SnapshotLayout &layout,
                                           const core::ReadPlan &plan) {
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
  if (!document.is_object() || !document.contains("maps") || !document["maps"].is_object())
    return makeError("{0}: expected an object with a \"maps\" object", path);

  ProgramSnapshot snapshot;
  if (document.contains("programs")) {
    auto programs = parsePrograms(document["programs"], layout.programs, path);
    if (!programs)
      return programs.takeError();
    snapshot.programs = std::move(*programs);
  }
  for (const auto &[name, entries] : document["maps"].items()) {
    size_t cpus = 1;
    if (auto section = layout.sectionBytes.find(name); section != layout.sectionBytes.end()) {
      if (Error err = readSection(path, name, entries, section->second, layout, snapshot.globals))
        return err;
      continue;
    }
    auto info = layout.catalog.find(name);
    if (info == layout.catalog.end())
      return makeError("{0}: map '{1}' is not a map of the program", path, name);
    auto listed = parseEntries(entries, info->second, layout.catalog, path, name, cpus);
    if (!listed)
      return listed.takeError();
    auto request = plan.find(name);
    if (request == plan.end())
      continue; // a cycle does not read it
    ListedTable source(info->second, *listed, cpus);
    auto contents = readTable(source, info->second, request->second);
    if (!contents)
      return contents.takeError();
    for (const core::TableEntry &entry : contents->entries)
      if (auto stored = listed->storedTables.find(entry.key); stored != listed->storedTables.end())
        contents->storedTables.insert(*stored);
    snapshot.tables[name] = std::move(*contents);
  }
  return snapshot;
}

} // namespace morpheus::bpf
