// `morpheus map`: the control plane's command-line client.
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/PinnedObject.h"
#include "cli/Commands.h"
#include "client/Map.h"
#include "support/Log.h"

#include <linux/bpf.h>
#include <llvm/Support/Path.h>
#include <nlohmann/json.hpp>

#include <cstdio>
#include <map>
#include <memory>

namespace morpheus::cli {

namespace {

int dump(const std::string &pin) {
  auto opened = bpf::openPinnedMap(pin);
  if (!opened)
    return fail(opened.takeError());
  FileDescriptor fd(*opened);
  auto layout = bpf::layoutOf(fd.get(), pin);
  if (!layout)
    return fail(layout.takeError());
  // The kernel keeps 15 characters of a map's name; a run pins each map
  // under its whole name in the object, which 'specialize --snapshot'
  // matches: that name, when the kernel's is its start.
  std::string pinned = llvm::sys::path::filename(pin).str();
  const std::string &name =
      llvm::StringRef(pinned).starts_with(layout->kernelName) ? pinned : layout->kernelName;
  core::TableInfo table = bpf::tableInfoFor(name, layout->type, layout->keySize,
                                            layout->valueSize, layout->maxEntries);
  core::TableReadRequest everything;
  everything.wholeTableLimit = layout->maxEntries;
  auto contents = bpf::readTable(fd.get(), table, everything);
  fd.reset();
  if (!contents)
    return fail(contents.takeError());
  core::TableSnapshot snapshot{{name, std::move(*contents)}};
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
      "format 'morpheus specialize --snapshot' reads. The map is named by its\n"
      "pin's file name when the kernel's name (15 characters) is its start:\n"
      "the whole name in the object, as 'morpheus run' pins it.",
      [options](const CLI::App &) { return dump(options->pin); });
  dumpCommand.add_option("PIN", options->pin, PinHelp)->required()->type_name("");
}

} // namespace morpheus::cli
