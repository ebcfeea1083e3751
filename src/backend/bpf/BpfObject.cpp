#include "backend/bpf/BpfObject.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>

#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/statfs.h>

#include <cstdarg>
#include <cstdio>

namespace morpheus::bpf {

namespace {

bool verboseLibbpf = false;

int printLibbpf(enum libbpf_print_level level, const char *format, va_list args) {
  if (level == LIBBPF_DEBUG || (level == LIBBPF_INFO && !verboseLibbpf))
    return 0;
  std::fputs("libbpf: ", stderr);
  return std::vfprintf(stderr, format, args);
}

struct OpenedObject {
  bpf_object *obj = nullptr;
  ~OpenedObject() { bpf_object__close(obj); }
};

Expected<bpf_object *> openElf(llvm::ArrayRef<char> elf,
                               const std::string &objectName,
                               char *logBuffer = nullptr, size_t logSize = 0) {
  static bool installed = [] {
    libbpf_set_print(printLibbpf);
    return true;
  }();
  (void)installed;
  LIBBPF_OPTS(bpf_object_open_opts, options, .object_name = objectName.c_str(),
              .kernel_log_buf = logBuffer, .kernel_log_size = logSize);
  bpf_object *obj = bpf_object__open_mem(elf.data(), elf.size(), &options);
  if (!obj)
    return makeSystemError(errno, "object '{0}': libbpf cannot open the ELF",
                           objectName);
  return obj;
}

} // namespace

void setLibbpfVerbose(bool verbose) { verboseLibbpf = verbose; }

core::TableInfo tableInfoFor(const std::string &name, unsigned type,
                             uint32_t keySize, uint32_t valueSize,
                             uint32_t maxEntries) {
  core::TableInfo info;
  info.name = name;
  const char *typeName = libbpf_bpf_map_type_str(static_cast<bpf_map_type>(type));
  info.typeName = typeName ? typeName : "type " + std::to_string(type);
  info.keySize = keySize;
  info.valueSize = valueSize;
  info.maxEntries = maxEntries;
  switch (type) {
  case BPF_MAP_TYPE_HASH:
    info.match = core::TableMatch::Exact;
    break;
  case BPF_MAP_TYPE_PERCPU_HASH:
    info.match = core::TableMatch::Exact;
    info.perCpu = true;
    break;
  case BPF_MAP_TYPE_LRU_HASH:
  case BPF_MAP_TYPE_LRU_PERCPU_HASH:
    // A lookup sets the entry's reference bit, which decides what a later
    // insert evicts: removing the lookup would change the map's future.
    info.match = core::TableMatch::Exact;
    info.perCpu = type == BPF_MAP_TYPE_LRU_PERCPU_HASH;
    info.lookupHasSideEffects = true;
    break;
  case BPF_MAP_TYPE_ARRAY:
    info.match = core::TableMatch::Index;
    break;
  case BPF_MAP_TYPE_PERCPU_ARRAY:
    info.match = core::TableMatch::Index;
    info.perCpu = true;
    break;
  case BPF_MAP_TYPE_LPM_TRIE:
    info.match = core::TableMatch::LongestPrefix;
    break;
  default:
    info.match = core::TableMatch::Unsupported;
  }
  return info;
}

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
    catalog[name] = tableInfoFor(name, bpf_map__type(map), bpf_map__key_size(map),
                                 bpf_map__value_size(map),
                                 bpf_map__max_entries(map));
  }
  return catalog;
}

Expected<std::map<std::string, size_t>> readProgramSizes(llvm::ArrayRef<char> elf,
                                                         const std::string &objectName) {
  auto obj = openElf(elf, objectName);
  if (!obj)
    return obj.takeError();
  OpenedObject opened{*obj};
  std::map<std::string, size_t> sizes;
  bpf_program *program;
  bpf_object__for_each_program(program, opened.obj)
    sizes[bpf_program__name(program)] = bpf_program__insn_cnt(program);
  return sizes;
}

std::optional<uint64_t> verifiedInstructions(int programFd) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(programFd, &info, &length) || !info.verified_insns)
    return std::nullopt;
  return info.verified_insns;
}

Expected<LoadedObject> LoadedObject::load(llvm::ArrayRef<char> elf,
                                          const std::string &objectName,
                                          const std::map<std::string, int> &sharedMaps) {
  // Filled by the kernel only when a load fails (libbpf then retries with
  // logging on), so the cost is paid only for the error message.
  static thread_local std::vector<char> log(1 << 20);
  log[0] = 0;
  auto obj = openElf(elf, objectName, log.data(), log.size());
  if (!obj)
    return obj.takeError();
  LoadedObject loaded(*obj);
  bpf_map *map;
  bpf_object__for_each_map(map, loaded.obj) {
    auto shared = sharedMaps.find(bpf_map__name(map));
    if (shared == sharedMaps.end())
      continue;
    // The running versions use this map with the layout they were compiled
    // for; sharing it with a different layout would corrupt their state.
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(shared->second, &info, &length))
      return makeSystemError(errno, "object '{0}': map '{1}': cannot query",
                             objectName, shared->first);
    if (info.key_size != bpf_map__key_size(map) ||
        info.value_size != bpf_map__value_size(map) ||
        info.type != bpf_map__type(map))
      return makeError("object '{0}': map '{1}': the program declares {2}-byte "
                       "keys and {3}-byte values, the existing map has {4} and {5}",
                       objectName, shared->first, bpf_map__key_size(map),
                       bpf_map__value_size(map), info.key_size, info.value_size);
    if (int err = bpf_map__reuse_fd(map, shared->second))
      return makeSystemError(err, "object '{0}': map '{1}': cannot share the map",
                             objectName, shared->first);
  }
  if (int err = bpf_object__load(loaded.obj)) {
    std::string verifier(log.data());
    const size_t keep = 4000; // the end of the log says why
    if (verifier.size() > keep)
      verifier = "...\n" + verifier.substr(verifier.size() - keep);
    return makeSystemError(err, "object '{0}': load failed{1}{2}", objectName,
                           verifier.empty() ? "" : "; verifier log:\n",
                           verifier);
  }
  return loaded;
}

LoadedObject::LoadedObject(LoadedObject &&other) noexcept
    : obj(std::exchange(other.obj, nullptr)) {}

LoadedObject &LoadedObject::operator=(LoadedObject &&other) noexcept {
  if (this != &other) {
    bpf_object__close(obj);
    obj = std::exchange(other.obj, nullptr);
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
  bpf_object__for_each_map(map, obj) fds[bpf_map__name(map)] = bpf_map__fd(map);
  return fds;
}

ProgramRunStats programRunStats(int programFd) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(programFd, &info, &length))
    return {};
  return {info.id, info.run_time_ns, info.run_cnt};
}

Error ensureBpffs(const std::string &user) {
  struct statfs fs = {};
  if (statfs("/sys/fs/bpf", &fs) == 0 && fs.f_type == BPF_FS_MAGIC)
    return Error::success();
  if (mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700"))
    return makeSystemError(errno, "cannot mount bpffs at /sys/fs/bpf (needed for {0})", user);
  return Error::success();
}

} // namespace morpheus::bpf
