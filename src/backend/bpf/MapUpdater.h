// The control-plane client API: change a map that Morpheus manages so that
// the very next packet sees the change. The guard word pinned beside the map
// is bumped before the update is applied, which sends every packet to the
// generic program until Morpheus has re-specialized for the new contents.
#pragma once

#include "backend/bpf/Guard.h"
#include "core/Tables.h"
#include "support/Error.h"

#include <optional>
#include <string>

namespace morpheus::bpf {

class MapUpdater {
public:
  // Opens the map pinned at `pinPath` and the guard pinned beside it
  // (`morpheus_guard` in the same directory), if any.
  static Expected<MapUpdater> open(const std::string &pinPath);
  // The same, for a map fd the caller already holds.
  static Expected<MapUpdater> forMap(int fd, std::string name, GuardWord *guard);

  MapUpdater(MapUpdater &&other) noexcept;
  ~MapUpdater();

  // For per-CPU maps a single value is written to every CPU. Each call is
  // bracketed by the guard (GuardWord::Update).
  Error update(const core::Bytes &key, const core::Bytes &value,
               uint64_t flags = 0 /* BPF_ANY */);
  Error remove(const core::Bytes &key);

  // The same without the guard bracket, for callers that bracket a whole
  // batch of changes themselves (MapTransaction).
  Error write(const core::Bytes &key, const core::Bytes &value, uint64_t flags = 0);
  Error erase(const core::Bytes &key);
  GuardWord *guardWord() const { return guard; }

  const std::string &name() const { return mapName; }
  int fd() const { return mapFd; }
  uint32_t keySize() const { return keyBytes; }
  uint32_t valueSize() const { return valueBytes; }
  bool perCpu() const;
  bool mapOfMaps() const; // values are inner map fds (written) / ids (read)
  bool guarded() const { return guard != nullptr; }

private:
  MapUpdater() = default;
  Error checkSizes(const core::Bytes &key, const core::Bytes *value) const;

  int mapFd = -1;
  bool ownsFd = false;
  std::string mapName;
  uint32_t keyBytes = 0, valueBytes = 0, mapType = 0;
  std::optional<GuardWord> ownedGuard;
  GuardWord *guard = nullptr;
};

} // namespace morpheus::bpf
