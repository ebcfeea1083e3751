#include "backend/bpf/MapUpdater.h"

#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/PinnedObject.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <llvm/Support/Path.h>
#include <unistd.h>

namespace morpheus::bpf {

Expected<MapUpdater> MapUpdater::forMap(int fd, std::string name, GuardWord *guard) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length))
    return makeSystemError(errno, "map '{0}': cannot query", name);
  MapUpdater updater;
  updater.mapFd = fd;
  updater.mapName = std::move(name);
  updater.keyBytes = info.key_size;
  updater.valueBytes = info.value_size;
  updater.entryLimit = info.max_entries;
  updater.mapType = info.type;
  updater.guard = guard;
  return updater;
}

Expected<MapUpdater> MapUpdater::open(const std::string &pinPath) {
  auto fd = openPinnedMap(pinPath);
  if (!fd)
    return fd.takeError();
  auto updater = forMap(*fd, pinPath, nullptr);
  if (!updater) {
    close(*fd);
    return updater.takeError();
  }
  updater->ownsFd = true;
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(*fd, &info, &length) == 0 &&
      std::string(info.name) == GuardMapName)
    return makeError("map '{0}': Morpheus's own guard ({1}), not a table of the program: "
                     "every update through Morpheus bumps it; it is never written directly",
                     pinPath, GuardMapName);
  llvm::SmallString<128> guardPath(llvm::sys::path::parent_path(pinPath));
  llvm::sys::path::append(guardPath, GuardMapName);
  if (access(guardPath.c_str(), F_OK) == 0) {
    auto guard = GuardWord::open(guardPath.str().str());
    if (!guard)
      return withContext(guard.takeError(), "map '" + pinPath + "'");
    updater->ownedGuard.emplace(std::move(*guard));
    updater->guard = &*updater->ownedGuard;
    return updater;
  }
  // Its pin gone, the guard may still guard specialized code: an update
  // that did not bump it would leave that code running on the old entry.
  auto held = GuardWord::heldWith(*fd, pinPath);
  if (!held)
    return held.takeError();
  if (*held) {
    updater->ownedGuard.emplace(std::move((*held)->guard));
    updater->guard = &*updater->ownedGuard;
    updater->heldBy = std::move((*held)->holder);
  }
  return updater;
}

MapUpdater::MapUpdater(MapUpdater &&other) noexcept
    : mapFd(std::exchange(other.mapFd, -1)), ownsFd(other.ownsFd),
      mapName(std::move(other.mapName)), keyBytes(other.keyBytes),
      valueBytes(other.valueBytes), entryLimit(other.entryLimit), mapType(other.mapType),
      ownedGuard(std::move(other.ownedGuard)), heldBy(std::move(other.heldBy)) {
  guard = ownedGuard ? &*ownedGuard : other.guard;
}

MapUpdater::~MapUpdater() {
  if (ownsFd && mapFd >= 0)
    close(mapFd);
}

bool MapUpdater::perCpu() const {
  return mapType == BPF_MAP_TYPE_PERCPU_HASH || mapType == BPF_MAP_TYPE_PERCPU_ARRAY ||
         mapType == BPF_MAP_TYPE_LRU_PERCPU_HASH;
}

bool MapUpdater::mapOfMaps() const {
  return mapType == BPF_MAP_TYPE_HASH_OF_MAPS || mapType == BPF_MAP_TYPE_ARRAY_OF_MAPS;
}

Error MapUpdater::checkSizes(const core::Bytes &key, const core::Bytes *value) const {
  if (key.size() != keyBytes)
    return makeError("map '{0}': key has {1} bytes, the map's keys have {2}",
                     mapName, key.size(), keyBytes);
  if (value && value->size() != valueBytes)
    return makeError("map '{0}': value has {1} bytes, the map's values have {2}",
                     mapName, value->size(), valueBytes);
  return Error::success();
}

Error MapUpdater::update(const core::Bytes &key, const core::Bytes &value,
                         uint64_t flags) {
  if (Error err = checkSizes(key, &value))
    return err;
  auto bracket = GuardWord::Update::begin(guard);
  if (!bracket)
    return withContext(bracket.takeError(), "map '" + mapName + "'");
  return writeUnguarded(key, value, flags);
}

Error MapUpdater::remove(const core::Bytes &key) {
  if (Error err = checkSizes(key, nullptr))
    return err;
  auto bracket = GuardWord::Update::begin(guard);
  if (!bracket)
    return withContext(bracket.takeError(), "map '" + mapName + "'");
  return eraseUnguarded(key);
}

Error MapUpdater::writeUnguarded(const core::Bytes &key, const core::Bytes &value, uint64_t flags) {
  if (Error err = checkSizes(key, &value))
    return err;
  core::Bytes raw = value;
  if (perCpu()) {
    size_t stride = (valueBytes + 7) & ~size_t(7);
    raw.assign(stride * possibleCpus(), 0);
    for (int cpu = 0; cpu < possibleCpus(); ++cpu)
      std::copy(value.begin(), value.end(), raw.begin() + cpu * stride);
  }
  if (bpf_map_update_elem(mapFd, key.data(), raw.data(), flags))
    return makeSystemError(errno, "map '{0}': update of key {1} failed", mapName,
                           toHex(key));
  return Error::success();
}

Error MapUpdater::eraseUnguarded(const core::Bytes &key) {
  if (Error err = checkSizes(key, nullptr))
    return err;
  if (bpf_map_delete_elem(mapFd, key.data()))
    return makeSystemError(errno, "map '{0}': delete of key {1} failed", mapName,
                           toHex(key));
  return Error::success();
}

} // namespace morpheus::bpf
