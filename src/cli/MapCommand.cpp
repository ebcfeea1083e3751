// `morpheus map`: the control plane's command-line client.
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapIO.h"
#include "cli/Commands.h"
#include "client/Map.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <nlohmann/json.hpp>
#include <unistd.h>

#include <cstdio>

namespace morpheus::cli {

namespace {

Expected<uint64_t> parseUpdateFlags(const std::string &text) {
  if (text == "any")
    return uint64_t(BPF_ANY);
  if (text == "noexist")
    return uint64_t(BPF_NOEXIST);
  if (text == "exist")
    return uint64_t(BPF_EXIST);
  return makeError("map update: --flags takes any, noexist or exist, not '{0}'", text);
}

int dump(const std::string &pin) {
  int fd = bpf_obj_get(pin.c_str());
  if (fd < 0)
    return fail(makeSystemError(errno, "map '{0}': cannot open the pinned map", pin));
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length)) {
    close(fd);
    return fail(makeSystemError(errno, "map '{0}': cannot query", pin));
  }
  core::TableInfo table = bpf::tableInfoFor(info.name, info.type, info.key_size,
                                            info.value_size, info.max_entries);
  core::TableReadRequest everything;
  everything.wholeTableLimit = info.max_entries;
  auto contents = bpf::readTable(fd, table, everything);
  close(fd);
  if (!contents)
    return fail(contents.takeError());
  core::TableSnapshot snapshot{{info.name, std::move(*contents)}};
  std::printf("%s\n", bpf::snapshotToJson(snapshot).dump(2).c_str());
  return 0;
}

} // namespace

int mapCommand(int argc, char **argv) {
  std::vector<OptionSpec> specs = {
      {"--flags", "any|noexist|exist", "update only: BPF_ANY (default), BPF_NOEXIST, BPF_EXIST"}};
  auto args = Args::parse("map", argc, argv, 2, specs);
  if (!args)
    return usageError(llvm::toString(args.takeError()));
  const auto &words = args->positional();
  std::string action = words.empty() ? "" : words[0];
  bool valid = (action == "update" && words.size() == 4) ||
               (action == "delete" && words.size() == 3) ||
               (action == "dump" && words.size() == 2);
  if (args->help() || !valid)
    return printUsage(
        *args,
        "morpheus map update PIN KEY VALUE [--flags any|noexist|exist]\n"
        "       morpheus map delete PIN KEY\n"
        "       morpheus map dump PIN",
        "PIN is a map pinned by 'morpheus run' (e.g.\n"
        "/sys/fs/bpf/morpheus/<program>/<map>). KEY and VALUE are the raw bytes\n"
        "in hex, as bpftool prints them: \"0a 00 00 01\" or 0a000001. For\n"
        "per-CPU maps VALUE is written to every CPU. When the guard of a\n"
        "running Morpheus sits beside the map it is bumped first, so the very\n"
        "next packet runs generic code that sees the change; Morpheus then\n"
        "re-specializes.\n",
        specs);
  if (action == "dump")
    return dump(words[1]);
  auto map = client::Map::open(words[1]);
  if (!map)
    return fail(map.takeError());
  if (!map->guarded())
    std::fprintf(stderr, "morpheus: warning: no Morpheus guard beside %s; "
                         "updating the map without invalidating specialized code\n",
                 words[1].c_str());
  auto key = bpf::parseHexBytes(words[2], "map '" + words[1] + "' key");
  if (!key)
    return fail(key.takeError());
  if (action == "delete") {
    if (Error err = map->remove(*key))
      return fail(std::move(err));
    return 0;
  }
  auto value = bpf::parseHexBytes(words[3], "map '" + words[1] + "' value");
  if (!value)
    return fail(value.takeError());
  auto flags = parseUpdateFlags(args->get("--flags").value_or("any"));
  if (!flags)
    return usageError(llvm::toString(flags.takeError()));
  if (Error err = map->update(*key, *value, *flags))
    return fail(std::move(err));
  return 0;
}

} // namespace morpheus::cli
