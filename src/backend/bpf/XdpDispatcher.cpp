#include "backend/bpf/XdpDispatcher.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Extension.h"
#include "backend/bpf/ProgramLink.h"
#include "support/Netns.h"

#include <bpf/bpf.h>
#include <bpf/btf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <net/if.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

namespace morpheus::bpf {

namespace {

// struct xdp_dispatcher_config, versions 2 and 3: magic, version, slots
// enabled, fragments (a byte each), then three arrays of DispatcherSlots
// words, then (version 3) the device-bound byte.
constexpr size_t ArraysAt = 4;
constexpr size_t ArrayBytes = DispatcherSlots * sizeof(uint32_t);
constexpr size_t DeviceBoundAt = ArraysAt + 3 * ArrayBytes;
constexpr size_t LayoutSize(uint8_t version) { return DeviceBoundAt + (version >= 3 ? 1 : 0); }

constexpr const char *XdpActions[] = {"XDP_ABORTED", "XDP_DROP", "XDP_PASS", "XDP_TX",
                                      "XDP_REDIRECT"};

std::string slotPinDirectory(const std::string &state, int ifindex, uint32_t dispatcherId) {
  return llvm::formatv("{0}/dispatch-{1}-{2}", state, ifindex, dispatcherId).str();
}
std::string slotPin(const std::string &directory, unsigned slot, const char *what) {
  return llvm::formatv("{0}/prog{1}-{2}", directory, slot, what).str();
}

// Removes a revision's pins (those there are) and its directory.
void unpinRevision(const std::string &directory, unsigned slots) {
  for (unsigned slot = 0; slot < slots; ++slot) {
    unlink(slotPin(directory, slot, "link").c_str());
    unlink(slotPin(directory, slot, "prog").c_str());
  }
  rmdir(directory.c_str());
}

// Where libxdp looks for its BPF objects when LIBXDP_OBJECT_PATH is unset:
// the directories distributions install them in.
constexpr const char *LibxdpObjectDirectories[] = {
    "/usr/lib/x86_64-linux-gnu/bpf", "/usr/lib/aarch64-linux-gnu/bpf", "/usr/lib64/bpf",
    "/usr/lib/bpf", "/usr/local/lib/bpf"};

Expected<std::string> libxdpDispatcherObject() {
  std::vector<std::string> directories;
  if (const char *path = getenv("LIBXDP_OBJECT_PATH"))
    directories.push_back(path);
  else
    directories.assign(std::begin(LibxdpObjectDirectories), std::end(LibxdpObjectDirectories));
  for (const std::string &directory : directories) {
    std::string object = directory + "/xdp-dispatcher.o";
    if (llvm::sys::fs::exists(object))
      return object;
  }
  return makeError("libxdp's dispatcher object (xdp-dispatcher.o) is in none of {0}; "
                   "LIBXDP_OBJECT_PATH names the directory that holds it",
                   llvm::join(directories, ", "));
}

// The dispatcher version an object declares in its xdp_metadata section
// (`__uint(dispatcher_version, N)`: a pointer to an array of N elements).
Expected<uint32_t> declaredVersion(bpf_object *object, const std::string &path) {
  const btf *types = bpf_object__btf(object);
  int var = types ? btf__find_by_name_kind(types, "dispatcher_version", BTF_KIND_VAR) : -1;
  const btf_type *pointer =
      var > 0 ? btf__type_by_id(types, btf__type_by_id(types, var)->type) : nullptr;
  const btf_type *array =
      pointer && btf_is_ptr(pointer) ? btf__type_by_id(types, pointer->type) : nullptr;
  if (!array || !btf_is_array(array))
    return makeError("{0} declares no dispatcher_version: not libxdp's dispatcher", path);
  return btf_array(array)->nelems;
}

} // namespace

Expected<DispatcherConfig> DispatcherConfig::parse(llvm::ArrayRef<uint8_t> value) {
  if (value.size() < ArraysAt || value[0] != DispatcherMagic)
    return makeError("no dispatcher configuration (no magic byte: a dispatcher of libxdp "
                     "before 1.2, which Morpheus does not change)");
  DispatcherConfig config;
  config.version = value[1];
  if (config.version != 2 && config.version != 3)
    return makeError("dispatcher version {0}: Morpheus knows versions 2 and 3", config.version);
  if (value.size() < LayoutSize(config.version))
    return makeError("dispatcher version {0}: its configuration has {1} bytes, fewer than the "
                     "{2} of its layout",
                     config.version, value.size(), LayoutSize(config.version));
  config.slotsEnabled = value[2];
  if (config.slotsEnabled > DispatcherSlots)
    return makeError("the dispatcher's configuration enables {0} slots, more than {1}",
                     config.slotsEnabled, DispatcherSlots);
  config.frags = value[3];
  for (auto [index, array] : llvm::enumerate(
           std::array{&config.chainCallActions, &config.runPriorities, &config.programFlags}))
    std::memcpy(array->data(), value.data() + ArraysAt + index * ArrayBytes, ArrayBytes);
  if (config.version >= 3)
    config.deviceBound = value[DeviceBoundAt];
  return config;
}

std::vector<uint8_t> DispatcherConfig::encode(size_t size) const {
  std::vector<uint8_t> value(std::max(size, LayoutSize(version)), 0);
  value[0] = DispatcherMagic;
  value[1] = version;
  value[2] = slotsEnabled;
  value[3] = frags;
  for (auto [index, array] :
       llvm::enumerate(std::array{&chainCallActions, &runPriorities, &programFlags}))
    std::memcpy(value.data() + ArraysAt + index * ArrayBytes, array->data(), ArrayBytes);
  if (version >= 3)
    value[DeviceBoundAt] = deviceBound;
  return value;
}

std::string slotFunction(unsigned slot, unsigned slotsEnabled) {
  return slotsEnabled == 1 ? DispatcherName : "prog" + std::to_string(slot);
}

std::string LibxdpSlots::stateDirectory() const {
  const char *bpffs = getenv("LIBXDP_BPFFS");
  return std::string(bpffs ? bpffs : "/sys/fs/bpf") + "/xdp";
}

Expected<FileDescriptor> LibxdpSlots::loadDispatcher(const DispatcherConfig &config) const {
  if (config.deviceBound)
    return makeError("a device-bound dispatcher: Morpheus does not build revisions of one");
  auto path = libxdpDispatcherObject();
  if (!path)
    return path.takeError();
  bpf_object *object = bpf_object__open_file(path->c_str(), nullptr);
  if (!object)
    return makeSystemError(errno, "cannot open {0}", *path);
  auto closeObject = llvm::make_scope_exit([&] { bpf_object__close(object); });
  auto version = declaredVersion(object, *path);
  if (!version)
    return version.takeError();
  if (*version != config.version)
    return makeError("{0} is dispatcher version {1}, the interface runs version {2}: a revision "
                     "is built only of the version it replaces (LIBXDP_OBJECT_PATH names the "
                     "directory of the libxdp that built it)",
                     *path, *version, config.version);
  bpf_program *main = nullptr, *program;
  bpf_object__for_each_program(program, object) {
    bool isMain = llvm::StringRef(bpf_program__name(program)) == DispatcherName;
    bpf_program__set_autoload(program, isMain);
    if (isMain)
      main = program;
  }
  bpf_map *rodata = nullptr, *map;
  bpf_object__for_each_map(map, object) {
    if (llvm::StringRef(bpf_map__name(map)).ends_with(".rodata"))
      rodata = map;
  }
  if (!main || !rodata)
    return makeError("{0}: no program '{1}' or no .rodata", *path, DispatcherName);
  size_t size = 0;
  bpf_map__initial_value(rodata, &size);
  std::vector<uint8_t> value = config.encode(size);
  if (value.size() != size || bpf_map__set_initial_value(rodata, value.data(), size))
    return makeError("{0}: its configuration has {1} bytes, version {2}'s layout {3}", *path, size,
                     config.version, value.size());
  if (config.frags)
    bpf_program__set_flags(main, bpf_program__flags(main) | BPF_F_XDP_HAS_FRAGS);
  if (int err = bpf_object__load(object))
    return makeSystemError(err, "the kernel refused a dispatcher revision loaded from {0}", *path);
  int fd = fcntl(bpf_program__fd(main), F_DUPFD_CLOEXEC, 0);
  if (fd < 0)
    return makeSystemError(errno, "cannot keep the dispatcher revision");
  return FileDescriptor(fd);
}

Expected<FileDescriptor> LibxdpSlots::bind(int dispatcher, const DispatcherConfig &config,
                                           unsigned slot, int program) const {
  if (Error err = requireExtensions("binding a program into a libxdp dispatcher slot"))
    return std::move(err);
  return attachExtension(program, dispatcher, slotFunction(slot, config.slotsEnabled));
}

Expected<DispatcherLock> DispatcherLock::take(const std::string &stateDirectory) {
  if (std::error_code ec = llvm::sys::fs::create_directories(
          stateDirectory, /*IgnoreExisting=*/true, llvm::sys::fs::perms::owner_all))
    return makeSystemError(ec.value(), "the dispatcher state directory {0}", stateDirectory);
  FileDescriptor directory(open(stateDirectory.c_str(), O_DIRECTORY | O_RDONLY | O_CLOEXEC));
  if (!directory.valid())
    return makeSystemError(errno, "cannot open the dispatcher state directory {0}", stateDirectory);
  if (flock(directory.get(), LOCK_EX))
    return makeSystemError(errno, "cannot lock the dispatcher state directory {0}", stateDirectory);
  return DispatcherLock(std::move(directory));
}

const DispatcherSlot *Dispatcher::slotHolding(uint32_t programId) const {
  for (const DispatcherSlot &slot : slots)
    if (slot.programId == programId)
      return &slot;
  return nullptr;
}

std::vector<std::string> Dispatcher::describeSlots() const {
  std::vector<std::string> lines;
  for (const DispatcherSlot &slot : slots) {
    std::vector<std::string> actions;
    for (auto [bit, name] : llvm::enumerate(XdpActions))
      if (slot.chainCallActions & (1u << bit))
        actions.push_back(name);
    lines.push_back(llvm::formatv("slot {0}: '{1}' (id {2}), priority {3}, goes on after {4}",
                                  slot.index, slot.name, slot.programId, slot.runPriority,
                                  actions.empty() ? "no verdict" : llvm::join(actions, ", "))
                        .str());
  }
  return lines;
}

Expected<std::optional<DispatcherConfig>> dispatcherConfigOf(uint32_t programId) {
  auto program = liveProgramById(programId);
  if (!program)
    return program.takeError();
  if (program->name != DispatcherName)
    return std::nullopt;
  // Its configuration is its one frozen single-entry map (libxdp's
  // dispatcher has no other; a dispatcher-shaped program may have more).
  std::optional<DispatcherConfig> config;
  for (uint32_t mapId : program->mapIds) {
    FileDescriptor map(bpf_map_get_fd_by_id(mapId));
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    if (!map.valid() || bpf_obj_get_info_by_fd(map.get(), &info, &length))
      return makeSystemError(errno, "dispatcher {0}: cannot read its map {1}", programId, mapId);
    if (!(info.map_flags & BPF_F_RDONLY_PROG) || info.max_entries != 1 || info.key_size != 4)
      continue;
    if (config)
      return makeError("dispatcher {0}: two configuration maps", programId);
    std::vector<uint8_t> value(info.value_size);
    uint32_t zero = 0;
    if (bpf_map_lookup_elem(map.get(), &zero, value.data()))
      return makeSystemError(errno, "dispatcher {0}: cannot read its configuration", programId);
    auto parsed = DispatcherConfig::parse(value);
    if (!parsed)
      return withContext(parsed.takeError(), "dispatcher " + std::to_string(programId));
    config = *parsed;
  }
  if (!config)
    return makeError("program {0} is named {1} but has no configuration map", programId,
                     DispatcherName);
  return config;
}

DispatcherHook::DispatcherHook(std::shared_ptr<const SlotBinding> binding, std::string iface,
                               std::string netns)
    : binding(std::move(binding)), iface(std::move(iface)), netns(std::move(netns)) {}

Expected<int> DispatcherHook::ifindex() const {
  int index = 0;
  Error found = netns::runInNetns(netns, [&]() -> Error {
    index = if_nametoindex(iface.c_str());
    if (!index)
      return makeSystemError(errno, "no interface '{0}'{1}", iface,
                             netns.empty() ? "" : " in network namespace '" + netns + "'");
    return Error::success();
  });
  if (found)
    return std::move(found);
  return index;
}

Expected<std::optional<Dispatcher>> DispatcherHook::read() const {
  auto lock = DispatcherLock::take(binding->stateDirectory());
  if (!lock)
    return lock.takeError();
  return readLocked();
}

Expected<std::optional<Dispatcher>> DispatcherHook::readLocked() const {
  auto index = ifindex();
  if (!index)
    return index.takeError();
  auto attached = attachedXdpProgram(*index, netns);
  if (!attached)
    return attached.takeError();
  if (!attached->programId)
    return std::nullopt;
  auto config = dispatcherConfigOf(attached->programId);
  if (!config)
    return config.takeError();
  if (!*config)
    return std::nullopt;
  Dispatcher dispatcher;
  dispatcher.id = attached->programId;
  dispatcher.ifindex = *index;
  dispatcher.config = **config;
  dispatcher.program.reset(bpf_prog_get_fd_by_id(dispatcher.id));
  if (!dispatcher.program.valid())
    return makeSystemError(errno, "dispatcher {0} on {1}: cannot open it", dispatcher.id, iface);
  dispatcher.pins = slotPinDirectory(binding->stateDirectory(), *index, dispatcher.id);
  for (unsigned slotIndex = 0; slotIndex < dispatcher.config.slotsEnabled; ++slotIndex) {
    std::string pin = slotPin(dispatcher.pins, slotIndex, "prog");
    FileDescriptor program(bpf_obj_get(pin.c_str()));
    if (!program.valid())
      return makeSystemError(errno,
                             "dispatcher {0} on {1}: slot {2} has no program pinned at {3} (a "
                             "dispatcher not built by libxdp's protocol, or one being changed)",
                             dispatcher.id, iface, slotIndex, pin);
    auto live = liveProgram(program.get());
    if (!live)
      return live.takeError();
    DispatcherSlot slot;
    slot.index = slotIndex;
    slot.program = std::move(program);
    slot.programId = live->id;
    slot.name = live->name;
    slot.runPriority = dispatcher.config.runPriorities[slotIndex];
    slot.chainCallActions =
        dispatcher.config.chainCallActions[slotIndex] & ~(1u << DispatcherContinue);
    slot.flags = dispatcher.config.programFlags[slotIndex];
    dispatcher.slots.push_back(std::move(slot));
  }
  return std::optional<Dispatcher>(std::move(dispatcher));
}

bool DispatcherHook::runs(uint32_t programId) const {
  auto dispatcher = read();
  if (!dispatcher) {
    llvm::consumeError(dispatcher.takeError());
    return false;
  }
  return *dispatcher && (*dispatcher)->slotHolding(programId);
}

Error DispatcherHook::replace(uint32_t fromId, int to) {
  constexpr unsigned Attempts = 3;
  for (unsigned attempt = 1;; ++attempt) {
    auto lock = DispatcherLock::take(binding->stateDirectory());
    if (!lock)
      return lock.takeError();
    auto read = readLocked();
    if (!read)
      return read.takeError();
    if (!*read)
      return makeError("interface '{0}' runs no XDP dispatcher any more", iface);
    const Dispatcher &old = **read;
    const DispatcherSlot *replaced = old.slotHolding(fromId);
    if (!replaced)
      return makeError("no slot of the dispatcher on '{0}' (id {1}) holds program {2}", iface,
                       old.id, fromId);
    auto revision = binding->loadDispatcher(old.config);
    if (!revision)
      return withContext(revision.takeError(), "a revision of the dispatcher on '" + iface + "'");
    auto live = liveProgram(revision->get());
    if (!live)
      return live.takeError();
    std::string pins = slotPinDirectory(binding->stateDirectory(), old.ifindex, live->id);
    if (mkdir(pins.c_str(), S_IRWXU) && errno != EEXIST)
      return makeSystemError(errno, "cannot make the revision's pin directory {0}", pins);
    auto unpinNew = llvm::make_scope_exit([&] { unpinRevision(pins, old.config.slotsEnabled); });
    // Bound and pinned before it is attached: a crash from here on leaves
    // a complete revision nobody runs, never a running one that loses its
    // slots when this process goes.
    for (const DispatcherSlot &slot : old.slots) {
      int program = slot.index == replaced->index ? to : slot.program.get();
      auto link = binding->bind(revision->get(), old.config, slot.index, program);
      if (!link)
        return withContext(link.takeError(), llvm::formatv("slot {0} of a revision of the "
                                                           "dispatcher on '{1}'",
                                                           slot.index, iface));
      if (link->valid() && bpf_obj_pin(link->get(), slotPin(pins, slot.index, "link").c_str()))
        return makeSystemError(errno, "cannot pin slot {0}'s link under {1}", slot.index, pins);
      if (bpf_obj_pin(program, slotPin(pins, slot.index, "prog").c_str()))
        return makeSystemError(errno, "cannot pin slot {0}'s program under {1}", slot.index, pins);
    }
    auto swapped = replaceAttachedXdp(old.ifindex, netns, old.program.get(), revision->get());
    if (!swapped)
      return withContext(swapped.takeError(), "swapping the dispatcher on '" + iface + "'");
    if (!*swapped) {
      // Another loader changed the dispatcher since it was read.
      if (attempt == Attempts)
        return makeError("the dispatcher on '{0}' changed {1} times while a revision was built",
                         iface, Attempts);
      continue;
    }
    unpinNew.release();
    // Unpinning detaches the old revision's slots: not while a packet that
    // entered it before the swap may still reach one.
    waitForPacketsInFlight();
    unpinRevision(old.pins, old.config.slotsEnabled);
    return Error::success();
  }
}

} // namespace morpheus::bpf
