#include "backend/bpf/BpfObject.h"

#include "backend/bpf/ComparedCopy.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapIO.h"
#include "support/Log.h"
#include "support/VerifierRejection.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>

#include <unistd.h>

#include <cstdarg>
#include <cstdio>
#include <cstring>
#include <functional>
#include <algorithm>
#include <optional>
#include <set>
#include <string_view>

namespace morpheus::bpf {

namespace {

// libbpf's last short warning on this thread since a load began, other than
// its "failed to load object" summary: a load that fails before the kernel
// sees a program (an extern no kernel BTF resolves, a relocation) says why
// only there. (A verifier's log comes with its program, VerifierRejection.)
thread_local std::string libbpfCause;

// libbpf's messages join the log as its own: warnings (a refused program's
// verifier log among them) always, information with -v; its debug chatter
// never. libbpf starts its messages with "libbpf: ", which the log's source
// already says.
int printLibbpf(enum libbpf_print_level level, const char *format, va_list args) {
  LogLevel ours = level == LIBBPF_WARN ? LogLevel::Warning : LogLevel::Info;
  bool shown = level != LIBBPF_DEBUG &&
               processLog().enabled(level == LIBBPF_INFO ? LogLevel::Debug : ours);
  if (!shown && level != LIBBPF_WARN)
    return 0;
  va_list measure;
  va_copy(measure, args);
  int length = std::vsnprintf(nullptr, 0, format, measure);
  va_end(measure);
  if (length < 0)
    return length;
  std::string text(size_t(length) + 1, '\0');
  std::vsnprintf(text.data(), text.size(), format, args);
  text.resize(size_t(length));
  llvm::StringRef message = llvm::StringRef(text).trim();
  message.consume_front("libbpf: ");
  if (level == LIBBPF_WARN && message.size() < 1000 &&
      !message.starts_with("failed to load object"))
    libbpfCause = message.str();
  if (shown)
    processLog().external(ours, "libbpf", message);
  return length;
}

struct OpenedObject {
  bpf_object *obj = nullptr;
  ~OpenedObject() { bpf_object__close(obj); }
};

Expected<bpf_object *> openElf(llvm::ArrayRef<char> elf,
                               const std::string &objectName,
                               char *logBuffer = nullptr, size_t logSize = 0,
                               const std::string &pinRoot = "") {
  static bool installed = [] {
    libbpf_set_print(printLibbpf);
    return true;
  }();
  (void)installed;
  LIBBPF_OPTS(bpf_object_open_opts, options, .object_name = objectName.c_str(),
              .pin_root_path = pinRoot.empty() ? nullptr : pinRoot.c_str(),
              .kernel_log_buf = logBuffer, .kernel_log_size = logSize);
  bpf_object *obj = bpf_object__open_mem(elf.data(), elf.size(), &options);
  if (!obj)
    return makeSystemError(errno, "object '{0}': libbpf cannot open the ELF",
                           objectName);
  return obj;
}

} // namespace


Expected<core::TableCatalog> readCatalog(llvm::ArrayRef<char> elf,
                                         const std::string &objectName) {
  auto obj = openElf(elf, objectName);
  if (!obj)
    return obj.takeError();
  OpenedObject opened{*obj};
  core::TableCatalog catalog;
  bpf_map *map;
  bpf_object__for_each_map(map, opened.obj) {
    if (bpf_map__is_internal(map))
      continue;
    std::string name = bpf_map__name(map);
    core::TableInfo &info = catalog[name] =
        tableInfoFor(name, bpf_map__type(map), bpf_map__key_size(map),
                     bpf_map__value_size(map), bpf_map__max_entries(map));
    info.flags = bpf_map__map_flags(map);
    if (const bpf_map *inner = bpf_map__inner_map(map)) {
      info.innerTemplate = core::TableTemplate{
          tableInfoFor(name, bpf_map__type(inner), 0, 0, 0).typeName,
          bpf_map__key_size(inner), bpf_map__value_size(inner), bpf_map__map_flags(inner), {}};
      // The kernel stores an array in a map of maps only with the
      // template's max_entries, unless the template says BPF_F_INNER_MAP.
      if (isArrayMap(bpf_map__type(inner)) && !(bpf_map__map_flags(inner) & BPF_F_INNER_MAP))
        info.innerTemplate->maxEntries = bpf_map__max_entries(inner);
    }
  }
  return catalog;
}

Expected<std::vector<core::GlobalSlice>> readGlobalSlices(llvm::ArrayRef<char> elf,
                                                          const std::string &objectName,
                                                          bool frozen) {
  auto obj = openElf(elf, objectName);
  if (!obj)
    return obj.takeError();
  OpenedObject opened{*obj};
  std::vector<core::GlobalSlice> slices;
  const btf *types = bpf_object__btf(opened.obj);
  if (!types)
    return slices; // no BTF: no layout, nothing folded
  // libbpf names a section's map OBJECT.data (a prefix of the object's
  // name, then the section) or, for `.data.NAME`, the section's name;
  // opening the object fixed each DATASEC's offsets.
  bpf_map *map;
  bpf_object__for_each_map(map, opened.obj) {
    std::string name = bpf_map__name(map);
    if (!bpf_map__is_internal(map) || isFrozenSection(name) != frozen)
      continue;
    for (uint32_t id = 1; id < btf__type_cnt(types); ++id) {
      const btf_type *type = btf__type_by_id(types, id);
      if (!btf_is_datasec(type))
        continue;
      std::string section = btf__name_by_offset(types, type->name_off);
      bool ownMap = name == section ||
                    (section.rfind('.') == 0 && name.size() > section.size() &&
                     name.compare(name.size() - section.size(), section.size(), section) == 0);
      if (!ownMap)
        continue;
      const btf_var_secinfo *vars = btf_var_secinfos(type);
      for (uint16_t i = 0; i < btf_vlen(type); ++i) {
        const btf_type *var = btf__type_by_id(types, vars[i].type);
        slices.push_back({btf__name_by_offset(types, var->name_off), name, vars[i].offset,
                          vars[i].size});
      }
    }
  }
  return slices;
}

namespace {

MapLayout declaredLayout(const bpf_map *map) {
  MapLayout layout;
  layout.name = bpf_map__name(map);
  layout.type = bpf_map__type(map);
  layout.keySize = bpf_map__key_size(map);
  layout.valueSize = bpf_map__value_size(map);
  layout.maxEntries = bpf_map__max_entries(map);
  layout.flags = bpf_map__map_flags(map);
  layout.extra = bpf_map__map_extra(map);
  if (const bpf_map *inner = bpf_map__inner_map(const_cast<bpf_map *>(map)))
    layout.inner = std::make_shared<MapLayout>(declaredLayout(inner));
  return layout;
}

bool isMapOfMaps(uint32_t type) {
  return type == BPF_MAP_TYPE_ARRAY_OF_MAPS || type == BPF_MAP_TYPE_HASH_OF_MAPS;
}

// The layout of one inner map the outer map behind `fd` holds, if any: the
// kernel reports no inner layout of its own.
std::optional<MapLayout> someInnerLayout(int fd, const MapLayout &outer) {
  uint32_t innerId = 0;
  Error walked = forEachKey(fd, outer.keySize, outer.name, [&](const core::Bytes &key) {
    return bpf_map_lookup_elem(fd, key.data(), &innerId) != 0; // stop at the first inner map
  });
  if (walked) {
    llvm::consumeError(std::move(walked));
    return std::nullopt;
  }
  if (!innerId)
    return std::nullopt;
  int innerFd = bpf_map_get_fd_by_id(innerId);
  if (innerFd < 0)
    return std::nullopt;
  auto layout = layoutOf(innerFd, outer.name + " (inner)");
  close(innerFd);
  if (!layout) {
    llvm::consumeError(layout.takeError());
    return std::nullopt;
  }
  return *layout;
}

// What a map's declaration says, checked against the map that stands in for
// it (given by fd, or pinned by name). A `scratchCopy` (validation, fuzzing)
// may hold a window of the map (any max_entries), have a fixed hash seed
// (BPF_F_ZERO_SEED) and be mappable (BPF_F_MMAPABLE: runtime/ScratchMaps),
// which change no lookup's answer.
Error checkStandIn(const std::string &objectName, const bpf_map *map, int fd, bool scratchCopy,
                   const char *what) {
  MapLayout declared = declaredLayout(map);
  auto existing = layoutOf(fd, declared.name);
  if (!existing)
    return withContext(existing.takeError(), "object '" + objectName + "'");
  auto scratchFlagsAsDeclared = [&](MapLayout &copy, const MapLayout &wanted) {
    for (uint32_t scratchFlag : {uint32_t(BPF_F_ZERO_SEED), uint32_t(BPF_F_MMAPABLE)})
      if (scratchCopy && !(wanted.flags & scratchFlag))
        copy.flags &= ~scratchFlag;
  };
  scratchFlagsAsDeclared(*existing, declared);
  std::vector<MapFieldDifference> differences =
      layoutDifferences(declared, *existing, !scratchCopy);
  if (declared.inner && isMapOfMaps(declared.type))
    if (std::optional<MapLayout> inner = someInnerLayout(fd, *existing)) {
      bool innerSizes = !(declared.inner->flags & BPF_F_INNER_MAP);
      scratchFlagsAsDeclared(*inner, *declared.inner);
      for (MapFieldDifference difference :
           layoutDifferences(*declared.inner, *inner, innerSizes)) {
        difference.innerMap = true;
        differences.push_back(difference);
      }
    }
  if (differences.empty())
    return Error::success();
  return llvm::make_error<IncompatibleMap>(objectName, declared.name, what,
                                           std::move(differences));
}

// A map pinned by name may have been created with another max_entries (a
// loader that resized it): libbpf re-uses a pinned map only if every
// property matches, so the declaration takes the pinned size.
Error adoptPinnedSize(const std::string &objectName, bpf_map *map, int pinned,
                      const std::string &path) {
  auto layout = layoutOf(pinned, bpf_map__name(map));
  if (!layout)
    return withContext(layout.takeError(), "object '" + objectName + "'");
  if (bpf_map__max_entries(map) != layout->maxEntries)
    if (int err = bpf_map__set_max_entries(map, layout->maxEntries))
      return makeSystemError(err, "object '{0}': map '{1}': cannot adopt the size of {2}",
                             objectName, bpf_map__name(map), path);
  return checkStandIn(objectName, map, pinned, false, ("the map pinned at " + path).c_str());
}

// Pins by name: the live load re-uses a map pinned at the path libbpf
// derived from the pin root, sized as the pinned one; other loads forget
// the paths.
Error preparePins(const std::string &objectName, bpf_object *obj, PinByName pinning,
                  std::vector<std::string> &toMake) {
  bpf_map *map;
  bpf_object__for_each_map(map, obj) {
    const char *path = bpf_map__pin_path(map);
    if (!path)
      continue;
    if (pinning == PinByName::Ignore) {
      if (int err = bpf_map__set_pin_path(map, nullptr))
        return makeSystemError(err, "object '{0}': map '{1}': cannot clear its pin path",
                               objectName, bpf_map__name(map));
      continue;
    }
    int pinned = bpf_obj_get(path);
    if (pinned < 0) {
      if (errno == ENOENT) {
        toMake.push_back(path); // libbpf creates the map and pins it
        continue;
      }
      return makeSystemError(errno, "object '{0}': map '{1}': cannot open its pin {2}",
                             objectName, bpf_map__name(map), path);
    }
    Error err = adoptPinnedSize(objectName, map, pinned, path);
    close(pinned);
    if (err)
      return err;
  }
  return Error::success();
}

} // namespace

Expected<MapLayout> layoutOf(int fd, const std::string &name) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length))
    return makeSystemError(errno, "map '{0}': cannot query", name);
  MapLayout layout;
  layout.name = name;
  layout.type = info.type;
  layout.keySize = info.key_size;
  layout.valueSize = info.value_size;
  layout.maxEntries = info.max_entries;
  // The kernel marks device maps read-only for programs by itself; a loader
  // may not ask for it, so the layout is the one a loader declares.
  bool deviceMap = info.type == BPF_MAP_TYPE_DEVMAP || info.type == BPF_MAP_TYPE_DEVMAP_HASH ||
                   info.type == BPF_MAP_TYPE_CPUMAP;
  layout.flags = deviceMap ? info.map_flags & ~uint32_t(BPF_F_RDONLY_PROG) : info.map_flags;
  layout.extra = info.map_extra;
  layout.id = info.id;
  layout.btfId = info.btf_id;
  layout.btfKeyTypeId = info.btf_key_type_id;
  layout.btfValueTypeId = info.btf_value_type_id;
  layout.kernelName = info.name;
  return layout;
}

Expected<std::map<std::string, MapLayout>> readMapLayouts(llvm::ArrayRef<char> elf,
                                                          const std::string &objectName) {
  auto obj = openElf(elf, objectName);
  if (!obj)
    return obj.takeError();
  OpenedObject opened{*obj};
  std::map<std::string, MapLayout> layouts;
  bpf_map *map;
  bpf_object__for_each_map(map, opened.obj) layouts[bpf_map__name(map)] = declaredLayout(map);
  return layouts;
}

Expected<std::map<std::string, std::vector<char>>> readInitialValues(llvm::ArrayRef<char> elf,
                                                                     const std::string &objectName) {
  auto obj = openElf(elf, objectName);
  if (!obj)
    return obj.takeError();
  OpenedObject opened{*obj};
  std::map<std::string, std::vector<char>> values;
  bpf_map *map;
  bpf_object__for_each_map(map, opened.obj) {
    size_t size = 0;
    if (!bpf_map__is_internal(map))
      continue;
    const char *bytes = static_cast<const char *>(bpf_map__initial_value(map, &size));
    values[bpf_map__name(map)] = bytes ? std::vector<char>(bytes, bytes + size)
                                       : std::vector<char>(size, 0);
  }
  return values;
}

std::vector<MapFieldDifference> layoutDifferences(const MapLayout &declared,
                                                  const MapLayout &existing,
                                                  bool compareMaxEntries) {
  std::vector<MapFieldDifference> differences;
  auto field = [&](MapField which, uint64_t want, uint64_t have) {
    if (want != have)
      differences.push_back({which, false, want, have});
  };
  field(MapField::Type, declared.type, existing.type);
  field(MapField::KeySize, declared.keySize, existing.keySize);
  field(MapField::ValueSize, declared.valueSize, existing.valueSize);
  // A perf event array declared without a size gets one slot per CPU.
  bool sizedByLoader = declared.type == BPF_MAP_TYPE_PERF_EVENT_ARRAY && !declared.maxEntries;
  if (compareMaxEntries && !sizedByLoader)
    field(MapField::MaxEntries, declared.maxEntries, existing.maxEntries);
  field(MapField::Flags, declared.flags, existing.flags);
  field(MapField::MapExtra, declared.extra, existing.extra);
  return differences;
}

std::string describeDifferences(const std::vector<MapFieldDifference> &differences) {
  std::string text;
  bool innerSaid = false;
  for (const MapFieldDifference &difference : differences) {
    if (!text.empty())
      text += "; ";
    if (difference.innerMap && !innerSaid) {
      text += "inner map: ";
      innerSaid = true;
    }
    switch (difference.field) {
    case MapField::Type:
      text += "type: declared " + mapTypeName(difference.declared) + ", the map is " +
              mapTypeName(difference.existing);
      continue;
    case MapField::Flags:
      text += llvm::formatv("flags: declared {0:x}, the map has {1:x}", difference.declared,
                            difference.existing)
                  .str();
      continue;
    case MapField::KeySize:
      text += "key size";
      break;
    case MapField::ValueSize:
      text += "value size";
      break;
    case MapField::MaxEntries:
      text += "max_entries";
      break;
    case MapField::MapExtra:
      text += "map_extra";
      break;
    }
    text += llvm::formatv(": declared {0}, the map has {1}", difference.declared,
                          difference.existing)
                .str();
  }
  return text;
}

bool isFrozenSection(const std::string &mapName) {
  return mapName.find(".rodata") != std::string::npos ||
         mapName.find(".kconfig") != std::string::npos;
}

Expected<std::map<std::string, OpenedProgram>> readPrograms(llvm::ArrayRef<char> elf,
                                                            const std::string &objectName) {
  auto obj = openElf(elf, objectName);
  if (!obj)
    return obj.takeError();
  OpenedObject opened{*obj};
  std::map<std::string, OpenedProgram> programs;
  bpf_program *program;
  bpf_object__for_each_program(program, opened.obj) {
    // libbpf adds the flags its section names imply at load, not at open:
    // fragments for "xdp.frags...", sleepable for "KIND.s/..." ("lsm.s/").
    llvm::StringRef kindOfSection =
        llvm::StringRef(bpf_program__section_name(program)).split('/').first;
    uint32_t flags = bpf_program__flags(program) & (BPF_F_XDP_HAS_FRAGS | BPF_F_SLEEPABLE);
    if (kindOfSection.contains(".frags"))
      flags |= BPF_F_XDP_HAS_FRAGS;
    if (kindOfSection.ends_with(".s"))
      flags |= BPF_F_SLEEPABLE;
    ProgramArrayKind kind{uint32_t(bpf_program__type(program)),
                          uint32_t(bpf_program__expected_attach_type(program)), flags};
    programs[bpf_program__name(program)] = {bpf_program__insn_cnt(program), kind};
  }
  return programs;
}

Expected<std::map<std::string, ProgramFacts>> readFallbackFacts(int fallbackFd) {
  bpf_map_info array = {};
  uint32_t length = sizeof(array);
  if (bpf_obj_get_info_by_fd(fallbackFd, &array, &length))
    return makeSystemError(errno, "map '{0}': cannot query", FallbackMapName);
  std::map<std::string, ProgramFacts> facts;
  for (uint32_t slot = 0; slot < array.max_entries; ++slot) {
    uint32_t id = 0; // a program array's lookup from user space gives the program's id
    if (bpf_map_lookup_elem(fallbackFd, &slot, &id)) {
      if (errno == ENOENT)
        continue;
      return makeSystemError(errno, "map '{0}': cannot read slot {1}", FallbackMapName, slot);
    }
    FileDescriptor held(bpf_prog_get_fd_by_id(id));
    if (!held.valid())
      continue; // gone since the lookup
    bpf_prog_info info = {};
    length = sizeof(info);
    if (bpf_obj_get_info_by_fd(held.get(), &info, &length))
      return makeSystemError(errno, "program {0} (slot {1} of '{2}'): cannot query", id, slot,
                             FallbackMapName);
    ProgramFacts &program = facts[info.name];
    program.fallbackSlot = slot;
    if (info.verified_insns)
      program.verifiedInstructions = info.verified_insns;
  }
  return facts;
}

std::optional<uint64_t> verifiedInstructions(int programFd) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(programFd, &info, &length) || !info.verified_insns)
    return std::nullopt;
  return info.verified_insns;
}

size_t translatedInstructions(int programFd) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(programFd, &info, &length) ? 0 : info.xlated_prog_len / 8;
}

Expected<LiveProgram> liveProgram(int programFd) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(programFd, &info, &length))
    return makeSystemError(errno, "cannot read the program's info");
  LiveProgram facts{info.name, info.id, {}, std::vector<uint32_t>(info.nr_map_ids)};
  std::copy(std::begin(info.tag), std::end(info.tag), facts.tag.begin());
  if (!facts.mapIds.empty()) {
    bpf_prog_info again = {};
    again.nr_map_ids = facts.mapIds.size();
    again.map_ids = reinterpret_cast<uint64_t>(facts.mapIds.data());
    length = sizeof(again);
    if (bpf_obj_get_info_by_fd(programFd, &again, &length))
      return makeSystemError(errno, "program '{0}': cannot read its map ids", facts.name);
    facts.mapIds.resize(again.nr_map_ids);
  }
  return facts;
}

Expected<LiveProgram> liveProgramById(uint32_t programId) {
  FileDescriptor program(bpf_prog_get_fd_by_id(programId));
  if (!program.valid())
    return makeSystemError(errno, "program id {0}", programId);
  return liveProgram(program.get());
}

uint32_t mapTypeById(uint32_t mapId) {
  FileDescriptor map(bpf_map_get_fd_by_id(mapId));
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (!map.valid() || bpf_obj_get_info_by_fd(map.get(), &info, &length))
    return 0;
  return info.type;
}

bool sameProgramsInSlots(int a, int b) {
  bpf_map_info infoA = {}, infoB = {};
  uint32_t lengthA = sizeof(infoA), lengthB = sizeof(infoB);
  if (bpf_obj_get_info_by_fd(a, &infoA, &lengthA) || bpf_obj_get_info_by_fd(b, &infoB, &lengthB) ||
      infoA.max_entries != infoB.max_entries)
    return false;
  // What a slot holds, by code; none when empty (a program array's lookup
  // from user space answers the program's id).
  auto codeIn = [](int array, uint32_t slot) -> std::optional<std::array<uint8_t, 8>> {
    uint32_t id = 0;
    if (bpf_map_lookup_elem(array, &slot, &id))
      return std::nullopt;
    auto program = liveProgramById(id);
    if (!program) {
      llvm::consumeError(program.takeError());
      return std::array<uint8_t, 8>{}; // gone meanwhile: no tag matches it
    }
    return program->tag;
  };
  for (uint32_t slot = 0; slot < infoA.max_entries; ++slot) {
    auto inA = codeIn(a, slot), inB = codeIn(b, slot);
    if (inA != inB || (inA && *inA == std::array<uint8_t, 8>{}))
      return false;
  }
  return true;
}

Expected<LoadedObject> LoadedObject::load(llvm::ArrayRef<char> elf,
                                          const std::string &objectName,
                                          const LoadOptions &options) {
  // Filled by the kernel only when a load fails (libbpf then retries with
  // logging on), so the cost is paid only for the error message. Each
  // program has its own: the one the kernel wrote in names the program it
  // refused; the object's gets the rest (the BTF's load).
  constexpr size_t LogSize = 1 << 20;
  static thread_local std::vector<char> log(LogSize);
  static thread_local std::vector<std::unique_ptr<char[]>> programLogs;
  log[0] = 0;
  auto obj = openElf(elf, objectName, log.data(), log.size(), options.pinRoot);
  if (!obj)
    return obj.takeError();
  LoadedObject loaded(*obj, objectName);
  std::vector<std::string> toMake;
  if (Error err = preparePins(objectName, loaded.obj, options.pinning, toMake))
    return err;
  bpf_map *map;
  bpf_object__for_each_map(map, loaded.obj) {
    auto given = options.maps.find(bpf_map__name(map));
    // A version carries the replay runtime for its compared copy
    // (ComparedCopy.h) and calls none of it live: its state's map exists
    // only where a comparison hands one in.
    if (given == options.maps.end() && bpf_map__name(map) == std::string_view(ReplayMapName))
      bpf_map__set_autocreate(map, false);
    if (given == options.maps.end())
      continue;
    // The running versions use this map with the layout they were compiled
    // for; standing in with another layout would corrupt their state.
    if (Error err = checkStandIn(objectName, map, given->second, options.windowedCopies,
                                 options.windowedCopies ? "its scratch copy" : "the existing map"))
      return err;
    if (int err = bpf_map__reuse_fd(map, given->second))
      return makeSystemError(err, "object '{0}': map '{1}': cannot share the map",
                             objectName, given->first);
  }
  if (options.expectedAttachType) {
    bpf_program *program;
    bpf_object__for_each_program(program, loaded.obj) {
      if (bpf_program__type(program) == bpf_prog_type(options.attachTypeOf))
        bpf_program__set_expected_attach_type(program,
                                              bpf_attach_type(*options.expectedAttachType));
    }
  }
  if (options.programs) {
    bpf_program *program;
    bpf_object__for_each_program(program, loaded.obj) {
      if (!options.programs->count(bpf_program__name(program)))
        bpf_program__set_autoload(program, false);
    }
  }
  size_t programs = 0;
  bpf_program *program;
  bpf_object__for_each_program(program, loaded.obj) {
    if (programLogs.size() == programs)
      programLogs.emplace_back(new char[LogSize]);
    programLogs[programs][0] = 0;
    if (int err = bpf_program__set_log_buf(program, programLogs[programs].get(), LogSize))
      return makeSystemError(err, "object '{0}': program '{1}': cannot set its log",
                             objectName, bpf_program__name(program));
    ++programs;
  }
  libbpfCause.clear();
  if (int err = bpf_object__load(loaded.obj)) {
    // libbpf loads the programs in this order and stops at the first the
    // kernel refuses.
    size_t index = 0;
    bpf_object__for_each_program(program, loaded.obj) {
      const char *programLog = programLogs[index++].get();
      if (programLog[0])
        return llvm::make_error<VerifierRejection>(objectName, bpf_program__name(program), err,
                                                   programLog);
    }
    // Not a program the kernel refused with its reasons (a map it could
    // not create, BTF it refused, a program refused before verification).
    std::string kernelLog(log.data());
    const size_t keep = 4000; // the end of the log says why
    if (kernelLog.size() > keep)
      kernelLog = "...\n" + kernelLog.substr(kernelLog.size() - keep);
    return makeSystemError(err, "object '{0}': load failed{1}{2}{3}{4}", objectName,
                           libbpfCause.empty() ? "" : ": ", libbpfCause,
                           kernelLog.empty() ? "" : "; the kernel's log:\n", kernelLog);
  }
  loaded.madePins = std::move(toMake);
  return loaded;
}

LoadedObject::LoadedObject(LoadedObject &&other) noexcept
    : obj(std::exchange(other.obj, nullptr)), objectName(std::move(other.objectName)),
      madePins(std::move(other.madePins)) {}

LoadedObject &LoadedObject::operator=(LoadedObject &&other) noexcept {
  if (this != &other) {
    bpf_object__close(obj);
    obj = std::exchange(other.obj, nullptr);
    objectName = std::move(other.objectName);
    madePins = std::move(other.madePins);
  }
  return *this;
}

LoadedObject::~LoadedObject() { bpf_object__close(obj); }

int LoadedObject::programFd(const std::string &name) const {
  bpf_program *program = bpf_object__find_program_by_name(obj, name.c_str());
  return program ? bpf_program__fd(program) : -1;
}

int LoadedObject::mapFd(const std::string &name) const {
  bpf_map *map = bpf_object__find_map_by_name(obj, name.c_str());
  return map ? bpf_map__fd(map) : -1;
}

std::vector<std::string> LoadedObject::programNames() const {
  std::vector<std::string> names;
  bpf_program *program;
  bpf_object__for_each_program(program, obj) names.push_back(bpf_program__name(program));
  return names;
}

std::map<std::string, int> LoadedObject::maps() const {
  std::map<std::string, int> fds;
  bpf_map *map;
  bpf_object__for_each_map(map, obj) {
    if (bpf_map__autocreate(map)) // a map left uncreated has no fd
      fds[bpf_map__name(map)] = bpf_map__fd(map);
  }
  return fds;
}

Expected<ProgramSlots> LoadedObject::programSlots() const { return readProgramSlots(false); }

namespace {

// Whether instruction `site` of a program's code can run twice in one run:
// whether its control flow comes back to it. A backward jump alone does
// not say so (clang shares a return block with one).
bool onACycle(const bpf_insn *insns, size_t count, size_t site) {
  auto successors = [&](size_t at, std::vector<size_t> &pending) {
    const bpf_insn &insn = insns[at];
    uint8_t kind = BPF_CLASS(insn.code), op = BPF_OP(insn.code);
    if (insn.code == (BPF_LD | BPF_IMM | BPF_DW)) {
      pending.push_back(at + 2); // two instructions long
      return;
    }
    if ((kind != BPF_JMP && kind != BPF_JMP32) || op == BPF_CALL) {
      pending.push_back(at + 1);
      return;
    }
    if (op == BPF_EXIT)
      return;
    // gotol (JMP32 JA) keeps its offset in imm.
    int64_t offset = kind == BPF_JMP32 && op == BPF_JA ? insn.imm : insn.off;
    pending.push_back(size_t(int64_t(at) + 1 + offset));
    if (op != BPF_JA)
      pending.push_back(at + 1);
  };
  std::vector<bool> seen(count);
  std::vector<size_t> pending;
  successors(site, pending);
  while (!pending.empty()) {
    size_t at = pending.back();
    pending.pop_back();
    if (at == site)
      return true;
    if (at >= count || seen[at])
      continue;
    seen[at] = true;
    successors(at, pending);
  }
  return false;
}

} // namespace

Expected<LoadedObject::Code> LoadedObject::programCode(const std::string &name,
                                                       std::optional<uint64_t> guardVersion) const {
  bpf_program *program = bpf_object__find_program_by_name(obj, name.c_str());
  if (!program || bpf_program__fd(program) < 0)
    return makeError("object '{0}': program '{1}' is not loaded", objectName, name);
  std::map<int, bpf_map *> maps; // by fd
  bpf_map *map;
  bpf_object__for_each_map(map, obj) maps[bpf_map__fd(map)] = map;
  Code code;
  const bpf_insn *insns = bpf_program__insns(program);
  size_t count = bpf_program__insn_cnt(program);
  std::vector<size_t> tailCallSites;
  bool callsSubprograms = false;
  for (size_t i = 0; i < count; ++i) {
    const bpf_insn &insn = insns[i];
    bool mapReference = insn.code == (BPF_LD | BPF_IMM | BPF_DW) && i + 1 < count &&
                        (insn.src_reg == BPF_PSEUDO_MAP_FD || insn.src_reg == BPF_PSEUDO_MAP_VALUE);
    if (insn.code == (BPF_JMP | BPF_CALL) && insn.src_reg == 0 && insn.imm == BPF_FUNC_tail_call)
      tailCallSites.push_back(i);
    if ((insn.code == (BPF_JMP | BPF_CALL) && insn.src_reg == BPF_PSEUDO_CALL) ||
        (insn.code == (BPF_LD | BPF_IMM | BPF_DW) && insn.src_reg == BPF_PSEUDO_FUNC))
      callsSubprograms = true;
    if (!mapReference) {
      uint8_t kind = BPF_CLASS(insn.code), op = BPF_OP(insn.code);
      bool versionCheck = guardVersion && (kind == BPF_JMP || kind == BPF_JMP32) &&
                          BPF_SRC(insn.code) == BPF_K && (op == BPF_JEQ || op == BPF_JNE) &&
                          insn.imm >= 0 && uint64_t(insn.imm) == *guardVersion;
      bpf_insn kept = insn;
      if (versionCheck)
        kept.imm = 0;
      code.instructions.append(reinterpret_cast<const char *>(&kept), sizeof(kept));
      if (versionCheck)
        code.instructions += "version";
      continue;
    }
    // The fd is this load's; the name is what two loads share. The second
    // half of the pair holds the offset into a map value.
    auto named = maps.find(insn.imm);
    std::string mapName = named == maps.end() ? "fd " + std::to_string(insn.imm)
                                              : bpf_map__name(named->second);
    if (code.maps.insert(mapName).second && named != maps.end() &&
        bpf_map__is_internal(named->second)) {
      std::vector<char> &bytes = code.sections[mapName];
      bytes.resize(bpf_map__value_size(named->second));
      uint32_t zero = 0;
      if (bpf_map_lookup_elem(insn.imm, &zero, bytes.data()))
        return makeSystemError(errno, "object '{0}': map '{1}': cannot read it", objectName,
                               mapName);
    }
    bpf_insn first = insn;
    first.imm = 0;
    code.instructions.append(reinterpret_cast<const char *>(&first), sizeof(first));
    code.instructions += mapName;
    code.instructions.push_back('\0');
    code.instructions.append(reinterpret_cast<const char *>(&insns[++i]), sizeof(bpf_insn));
  }
  code.mostTailCalls = unsigned(tailCallSites.size());
  for (size_t site : tailCallSites)
    if (callsSubprograms || onACycle(insns, count, site))
      code.mostTailCalls.reset();
  return code;
}

Expected<ProgramSlots> LoadedObject::ownProgramSlots() const { return readProgramSlots(true); }

Expected<ProgramSlots> LoadedObject::readProgramSlots(bool ownArraysOnly) const {
  std::map<uint32_t, std::string> names; // program id -> name
  bpf_program *program;
  bpf_object__for_each_program(program, obj) {
    bpf_prog_info info = {};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(bpf_program__fd(program), &info, &length) == 0)
      names[info.id] = bpf_program__name(program);
  }
  // A program of another load running one of ours: its name as the kernel
  // keeps it, its tag and its maps all agree with that program's. Our own
  // programs' facts are read only when a slot holds another's (an adopted
  // program's arrays), not every cycle of every program.
  std::optional<std::vector<std::pair<std::string, LiveProgram>>> ours;
  auto sameCodeAsOurs = [&](uint32_t id) -> Expected<std::optional<std::string>> {
    if (!ours) {
      ours.emplace();
      bpf_object__for_each_program(program, obj) {
        if (bpf_program__fd(program) < 0)
          continue;
        auto facts = liveProgram(bpf_program__fd(program));
        if (!facts)
          return withContext(facts.takeError(), "object '" + objectName + "'");
        std::sort(facts->mapIds.begin(), facts->mapIds.end());
        ours->emplace_back(bpf_program__name(program), std::move(*facts));
      }
    }
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0)
      return std::nullopt; // unloaded meanwhile
    auto other = liveProgram(fd);
    close(fd);
    if (!other) {
      llvm::consumeError(other.takeError());
      return std::nullopt; // another's, as far as can be told
    }
    std::sort(other->mapIds.begin(), other->mapIds.end());
    for (const auto &[name, facts] : *ours)
      if (facts.name == other->name && facts.tag == other->tag && facts.mapIds == other->mapIds)
        return name;
    return std::nullopt;
  };
  ProgramSlots slots;
  bpf_map *map;
  bpf_object__for_each_map(map, obj) {
    if (bpf_map__type(map) != BPF_MAP_TYPE_PROG_ARRAY)
      continue;
    std::map<uint32_t, std::string> &held = slots[bpf_map__name(map)];
    int fd = bpf_map__fd(map);
    auto layout = layoutOf(fd, bpf_map__name(map));
    if (!layout)
      return layout.takeError();
    bool othersHeld = false;
    for (uint32_t index = 0; index < layout->maxEntries; ++index) {
      uint32_t id = 0;
      if (bpf_map_lookup_elem(fd, &index, &id) == 0) {
        auto name = names.find(id);
        if (name == names.end()) {
          auto same = sameCodeAsOurs(id);
          if (!same)
            return withContext(same.takeError(), "object '" + objectName + "': program array '" +
                                                     bpf_map__name(map) + "'");
          if (*same)
            name = names.emplace(id, **same).first;
        }
        if (name != names.end())
          held[index] = name->second;
        else
          othersHeld = true;
      } else if (errno != ENOENT) {
        return makeSystemError(errno, "object '{0}': program array '{1}': cannot read slot {2}",
                               objectName, bpf_map__name(map), index);
      }
    }
    if (ownArraysOnly && (othersHeld || held.empty()))
      slots.erase(bpf_map__name(map));
  }
  return slots;
}

Error LoadedObject::fillProgramSlots(const ProgramSlots &slots,
                                     const std::map<std::string, int> &arrays,
                                     const std::map<std::string, int> &others) const {
  for (const auto &[name, fd] : arrays) {
    auto layout = layoutOf(fd, name);
    if (!layout)
      return layout.takeError();
    auto wanted = slots.find(name);
    for (uint32_t index = 0; index < layout->maxEntries; ++index) {
      const std::string *program = nullptr;
      if (wanted != slots.end())
        if (auto slot = wanted->second.find(index); slot != wanted->second.end())
          program = &slot->second;
      int programFd = program ? this->programFd(*program) : -1;
      if (program && programFd < 0)
        if (auto other = others.find(*program); other != others.end())
          programFd = other->second;
      if (programFd >= 0 ? bpf_map_update_elem(fd, &index, &programFd, BPF_ANY) == 0
                         : bpf_map_delete_elem(fd, &index) == 0 || errno == ENOENT)
        continue;
      return makeSystemError(errno, "object '{0}': program array '{1}': cannot set slot {2}{3}",
                             objectName, name, index,
                             program ? " to program '" + *program + "'" : std::string());
    }
  }
  return Error::success();
}

Error stampExpectedVersion(int arrayFd, unsigned slot, uint64_t version) {
  bpf_map_info info{};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(arrayFd, &info, &length) != 0)
    return makeSystemError(errno, "the version array: cannot read its layout");
  if ((uint64_t(slot) + 1) * sizeof(uint64_t) > info.value_size)
    return makeError("the version array '{0}' has no slot {1} ({2} bytes)", info.name, slot,
                     info.value_size);
  std::vector<char> value(info.value_size);
  uint32_t key = 0;
  if (bpf_map_lookup_elem(arrayFd, &key, value.data()) != 0)
    return makeSystemError(errno, "the version array '{0}': cannot read it", info.name);
  std::memcpy(value.data() + slot * sizeof(uint64_t), &version, sizeof(version));
  if (bpf_map_update_elem(arrayFd, &key, value.data(), BPF_ANY) != 0)
    return makeSystemError(errno, "the version array '{0}': cannot stamp slot {1} with {2}",
                           info.name, slot, version);
  return Error::success();
}

std::map<std::string, uint32_t>
tailCallsBefore(const std::string &entry, uint32_t beforeEntry,
                const std::map<std::string, LoadedObject::Code> &code, const ProgramSlots &stages) {
  // Who may tail-call whom: every program an array holds, from every
  // program that names the array and makes tail calls (a slot may be
  // computed).
  std::map<std::string, std::set<std::string>> targets, callers;
  for (const auto &[program, was] : code)
    if (was.tailCalls())
      for (const std::string &map : was.maps)
        if (auto array = stages.find(map); array != stages.end())
          for (const auto &[slot, target] : array->second) {
            targets[program].insert(target);
            callers[target].insert(program);
          }
  auto reachedFrom = [&](const std::string &start) {
    std::set<std::string> reached;
    std::vector<std::string> pending = {start};
    while (!pending.empty()) {
      std::string program = std::move(pending.back());
      pending.pop_back();
      for (const std::string &target : targets[program])
        if (reached.insert(target).second)
          pending.push_back(target);
    }
    return reached;
  };
  std::set<std::string> reached = reachedFrom(entry);
  reached.insert(entry);
  // Unbounded: whatever a cycle, or a program attempting any number of
  // tail calls, reaches.
  std::set<std::string> unbounded;
  for (const std::string &program : reached) {
    std::set<std::string> further = reachedFrom(program);
    auto was = code.find(program);
    bool repeats = was == code.end() || !was->second.mostTailCalls;
    if (repeats || further.count(program))
      unbounded.insert(further.begin(), further.end());
  }
  // The rest is reached without a cycle: the longest count over its
  // callers, each of which is bounded too.
  std::map<std::string, uint32_t> before;
  std::function<uint32_t(const std::string &)> countBefore = [&](const std::string &program) {
    if (auto known = before.find(program); known != before.end())
      return known->second;
    uint32_t most = program == entry ? beforeEntry : 0;
    for (const std::string &caller : callers[program])
      if (reached.count(caller))
        most = std::max(most, countBefore(caller) + *code.at(caller).mostTailCalls);
    return before[program] = most;
  };
  std::map<std::string, uint32_t> leaves;
  for (const std::string &program : reached)
    if (auto was = code.find(program);
        !unbounded.count(program) && was != code.end() && !was->second.tailCalls())
      leaves[program] = countBefore(program);
  return leaves;
}

Expected<FallbackArray> createFallbackArray(const LoadedObject &object,
                                            const std::vector<std::string> &programs,
                                            const std::string &entry) {
  FallbackArray fallback;
  fallback.fd = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, FallbackMapName, sizeof(uint32_t),
                               sizeof(uint32_t), MaxPrograms, nullptr);
  if (fallback.fd < 0)
    return makeSystemError(errno, "object '{0}': cannot create the fallback program array",
                           object.name());
  auto entrySlot = uint32_t(std::find(programs.begin(), programs.end(), entry) - programs.begin());
  std::vector<uint32_t> slots = {entrySlot};
  for (uint32_t slot = 0; slot < programs.size(); ++slot)
    if (slot != entrySlot)
      slots.push_back(slot);
  for (uint32_t slot : slots) {
    int fd = object.programFd(programs[slot]);
    ProgramFacts &facts = fallback.programs[programs[slot]];
    if (fd >= 0)
      facts.verifiedInstructions = verifiedInstructions(fd);
    if (fd >= 0 && bpf_map_update_elem(fallback.fd, &slot, &fd, BPF_ANY) == 0) {
      facts.fallbackSlot = slot;
      continue;
    }
    if (slot == entrySlot) {
      Error err = makeSystemError(fd < 0 ? ENOENT : errno,
                                  "object '{0}': program '{1}': cannot register it as fallback",
                                  object.name(), programs[slot]);
      close(fallback.fd);
      return err;
    }
  }
  return fallback;
}

ProgramRunStats programRunStats(int programFd) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(programFd, &info, &length))
    return {};
  return {info.id, info.run_time_ns, info.run_cnt};
}

bool kernelTakesLongJumps() {
  static const bool takes = [] {
    const bpf_insn program[] = {
        {.code = BPF_JMP32 | BPF_JA, .imm = 0}, // gotol +0
        {.code = BPF_ALU64 | BPF_MOV | BPF_K, .dst_reg = BPF_REG_0, .imm = 0},
        {.code = BPF_JMP | BPF_EXIT},
    };
    int fd = bpf_prog_load(BPF_PROG_TYPE_SOCKET_FILTER, nullptr, "GPL", program,
                           std::size(program), nullptr);
    if (fd < 0)
      return false;
    ::close(fd);
    return true;
  }();
  return takes;
}

Expected<FileDescriptor> enableRunTimeStats() {
  int fd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  if (fd < 0)
    return makeSystemError(errno, "cannot enable bpf_stats");
  return FileDescriptor(fd);
}

Error ensureBpffs(const std::string &user) {
  struct statfs fs = {};
  if (statfs(DefaultPinRoot, &fs) == 0 && fs.f_type == BPF_FS_MAGIC)
    return Error::success();
  if (mount("bpf", DefaultPinRoot, "bpf", 0, "mode=0700"))
    return makeSystemError(errno, "cannot mount bpffs at /sys/fs/bpf (needed for {0})", user);
  return Error::success();
}

} // namespace morpheus::bpf
