// `morpheus map`: the control plane's command-line client.
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/PinnedObject.h"
#include "cli/Commands.h"
#include "client/Map.h"
#include "support/Log.h"

#include <linux/bpf.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>

namespace morpheus::cli {

namespace {

// The map pinned at `pin`, whole, under its name in the object: the pin's
// file name when the kernel's name (15 characters) is its start, as a run
// pins each map under its whole name, which 'specialize --snapshot'
// matches; otherwise the kernel's name.
Expected<std::pair<std::string, core::TableContents>> dumpMap(const std::string &pin, int fd) {
  auto layout = bpf::layoutOf(fd, pin);
  if (!layout)
    return layout.takeError();
  // A '.' (a section's map, `obj.data`) is a '_' in its pin, which bpffs
  // requires (PinDirectory::pathOf).
  std::string pinned = llvm::sys::path::filename(pin).str();
  std::string kernelPinned = layout->kernelName;
  std::replace(kernelPinned.begin(), kernelPinned.end(), '.', '_');
  std::string name = llvm::StringRef(pinned).starts_with(kernelPinned)
                         ? layout->kernelName + pinned.substr(kernelPinned.size())
                         : layout->kernelName;
  core::TableInfo table = bpf::tableInfoFor(name, layout->type, layout->keySize,
                                            layout->valueSize, layout->maxEntries);
  core::TableReadRequest everything;
  everything.wholeTableLimit = layout->maxEntries;
  auto contents = bpf::readTable(fd, table, everything);
  if (!contents)
    return contents.takeError();
  return std::make_pair(std::move(name), std::move(*contents));
}

// A running program's pin directory as one snapshot: every map of plain
// data pinned there (tables and the globals' section maps), and the
// programs' facts its fallback array holds. The guard is Morpheus's own;
// program arrays and maps of maps hold kernel objects, which a snapshot
// cannot name: each is said on stderr.
Expected<nlohmann::json> dumpDirectory(const std::string &directory) {
  core::TableSnapshot snapshot;
  std::map<std::string, bpf::ProgramFacts> programs;
  std::error_code ec;
  std::vector<std::string> paths;
  for (llvm::sys::fs::directory_iterator file(directory, ec), end; file != end && !ec;
       file.increment(ec))
    paths.push_back(file->path());
  if (ec)
    return makeSystemError(ec.value(), "{0}: cannot list", directory);
  std::sort(paths.begin(), paths.end());
  for (const std::string &path : paths) {
    std::string name = llvm::sys::path::filename(path).str();
    if (name == bpf::GuardMapName)
      continue;
    auto opened = bpf::openPinnedMap(path);
    if (!opened) {
      processLog().warning("not dumped: " + llvm::toString(opened.takeError()));
      continue;
    }
    FileDescriptor fd(*opened);
    if (name == bpf::FallbackMapName) {
      auto facts = bpf::readFallbackFacts(fd.get());
      if (!facts)
        return facts.takeError();
      programs = std::move(*facts);
      continue;
    }
    auto layout = bpf::layoutOf(fd.get(), path);
    if (!layout)
      return layout.takeError();
    if (!bpf::isPlainDataMap(layout->type)) {
      processLog().warning("not dumped: " + path +
                           ": it holds kernel objects (programs, maps, devices), which a "
                           "snapshot cannot name");
      continue;
    }
    auto dumped = dumpMap(path, fd.get());
    if (!dumped)
      return dumped.takeError();
    snapshot.insert(std::move(*dumped));
  }
  nlohmann::json document = bpf::snapshotToJson(snapshot);
  if (!programs.empty())
    document["programs"] = bpf::programFactsToJson(programs);
  return document;
}

int dump(const std::string &pin) {
  if (llvm::sys::fs::is_directory(pin)) {
    auto document = dumpDirectory(pin);
    if (!document)
      return fail(document.takeError());
    std::printf("%s\n", document->dump(2).c_str());
    return 0;
  }
  auto opened = bpf::openPinnedMap(pin);
  if (!opened)
    return fail(opened.takeError());
  FileDescriptor fd(*opened);
  auto dumped = dumpMap(pin, fd.get());
  if (!dumped)
    return fail(dumped.takeError());
  core::TableSnapshot snapshot{std::move(*dumped)};
  std::printf("%s\n", bpf::snapshotToJson(snapshot).dump(2).c_str());
  return 0;
}

struct MapOptions {
  std::string pin, key, value;
  uint64_t flags = BPF_ANY;
};

// The map behind `pin` and `options.key` parsed, for update and delete.
Expected<std::pair<client::Map, Bytes>> openWithKey(const MapOptions &options) {
  auto map = client::Map::open(options.pin);
  if (!map)
    return map.takeError();
  if (!map->guarded())
    processLog().warning("no Morpheus guard beside " + options.pin +
                         ", and no running Morpheus or specialized program holds one with "
                         "the map: nothing specialized depends on it; written directly");
  else if (!map->guardHolder().empty())
    processLog().warning("the guard's pin beside " + options.pin +
                         " is gone (a running Morpheus pins it again within a period): "
                         "bumping the guard " + map->guardHolder() + " holds with the map");
  auto key = bpf::parseHexBytes(options.key, "map '" + options.pin + "' key");
  if (!key)
    return key.takeError();
  return std::make_pair(std::move(*map), std::move(*key));
}

int update(const MapOptions &options) {
  auto target = openWithKey(options);
  if (!target)
    return fail(target.takeError());
  auto value = bpf::parseHexBytes(options.value, "map '" + options.pin + "' value");
  if (!value)
    return fail(value.takeError());
  if (Error err = target->first.update(target->second, *value, options.flags))
    return fail(std::move(err));
  return 0;
}

int remove(const MapOptions &options) {
  auto target = openWithKey(options);
  if (!target)
    return fail(target.takeError());
  if (Error err = target->first.remove(target->second))
    return fail(std::move(err));
  return 0;
}

const char PinHelp[] = "the map as 'morpheus run' pinned it (/sys/fs/bpf/morpheus/<program>/<map>)";
const char HexHelp[] = "raw bytes in hex, as bpftool prints them: \"0a 00 00 01\" or 0a000001";

} // namespace

void addMapCommand(CLI::App &morpheus) {
  CLI::App &map = commandline::addGroup(
      morpheus, "map", "change a managed map so the next packet sees it, or dump it",
      "PIN is a map pinned by 'morpheus run' (e.g.\n"
      "/sys/fs/bpf/morpheus/<program>/<map>). KEY and VALUE are the raw bytes\n"
      "in hex, as bpftool prints them: \"0a 00 00 01\" or 0a000001. For\n"
      "per-CPU maps VALUE is written to every CPU. The guard of the running\n"
      "Morpheus pinned beside the map is bumped first (its pin removed: the\n"
      "guard the running Morpheus or its specialized code holds with the\n"
      "map), so the very next packet runs generic code that sees the change;\n"
      "Morpheus then re-specializes. A map nothing holds a guard with is\n"
      "written directly; PIN must be a map, not the guard or a link.");
  auto options = std::make_shared<MapOptions>();
  CLI::App &update = commandline::addCommand(
      map, "update", "write KEY's VALUE, bumping the guard first",
      "Writes VALUE under KEY. The guard of the running Morpheus is bumped\n"
      "first (pinned beside the map, or held with it: see 'morpheus map'), so\n"
      "the very next packet runs generic code that sees the change; Morpheus\n"
      "then re-specializes. For per-CPU maps VALUE is written to every CPU.",
      [options](const CLI::App &) { return morpheus::cli::update(*options); });
  update.add_option("PIN", options->pin, PinHelp)->required()->type_name("");
  update.add_option("KEY", options->key, HexHelp)->required()->type_name("");
  update.add_option("VALUE", options->value, HexHelp)->required()->type_name("");
  update
      .add_option("--flags", options->flags,
                  "BPF_ANY (default), BPF_NOEXIST, BPF_EXIST")
      ->transform(commandline::oneOf(std::map<std::string, uint64_t>{
          {"any", BPF_ANY}, {"noexist", BPF_NOEXIST}, {"exist", BPF_EXIST}}))
      ->type_name("any|noexist|exist");
  CLI::App &remove = commandline::addCommand(
      map, "delete", "delete KEY, bumping the guard first",
      "Deletes KEY, bumping the guard of the running Morpheus first, as for\n"
      "update.",
      [options](const CLI::App &) { return morpheus::cli::remove(*options); });
  remove.add_option("PIN", options->pin, PinHelp)->required()->type_name("");
  remove.add_option("KEY", options->key, HexHelp)->required()->type_name("");
  CLI::App &dumpCommand = commandline::addCommand(
      map, "dump", "print every entry as JSON (the snapshot format)",
      "Prints every entry of the map as a JSON snapshot (docs/cli.md): the\n"
      "format 'morpheus specialize --snapshot' and 'explain --snapshot' read.\n"
      "The map is named by its pin's file name when the kernel's name (15\n"
      "characters) is its start: the whole name in the object, as 'morpheus\n"
      "run' pins it. PIN may be a run's pin directory: every map of data\n"
      "pinned there (the globals' section maps too) and what the kernel told\n"
      "of the programs in its fallback array, in one snapshot.",
      [options](const CLI::App &) { return dump(options->pin); });
  dumpCommand
      .add_option("PIN", options->pin,
                  "a map as 'morpheus run' pinned it, or its pin directory "
                  "(/sys/fs/bpf/morpheus/<program>)")
      ->required()
      ->type_name("");
}

} // namespace morpheus::cli
