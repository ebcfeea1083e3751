// Guarded writes to one map: change a map that Morpheus manages so that the
// very next packet sees the change. The guard word pinned beside the map is
// bumped, and the packets that trusted the old version are waited for,
// before the update is applied, which sends every packet to the generic
// program until Morpheus has re-specialized for the new contents.
// Control planes use it through the client library (src/client); the
// control socket and `morpheus map` directly.
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
  // (`morpheus_guard` in the same directory). With that pin gone, the
  // guard held with the map by a running Morpheus or its specialized code
  // (GuardWord::heldWith; an error when that cannot be told); unguarded
  // only when nothing holds a guard with the map. Refused: a pin that
  // holds no map (a link, a program: said so), and the guard itself.
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

  // The same WITHOUT the guard bracket: only for a caller that holds a
  // GuardWord::Update around a whole batch itself (client::Transaction).
  // Anyone else would let specialized code run on stale contents.
  Error writeUnguarded(const core::Bytes &key, const core::Bytes &value, uint64_t flags = 0);
  Error eraseUnguarded(const core::Bytes &key);
  GuardWord *guardWord() const { return guard; }

  const std::string &name() const { return mapName; }
  int fd() const { return mapFd; }
  uint32_t keySize() const { return keyBytes; }
  uint32_t valueSize() const { return valueBytes; }
  uint32_t maxEntries() const { return entryLimit; }
  bool perCpu() const;
  bool mapOfMaps() const; // values are inner map fds (written) / ids (read)
  bool guarded() const { return guard != nullptr; }
  // Who held the guard open() bumps, when its pin beside the map was gone
  // ("process 812 (morpheus)"); "" when it was pinned there, or none.
  const std::string &guardHolder() const { return heldBy; }

private:
  MapUpdater() = default;
  Error checkSizes(const core::Bytes &key, const core::Bytes *value) const;

  int mapFd = -1;
  bool ownsFd = false;
  std::string mapName;
  uint32_t keyBytes = 0, valueBytes = 0, entryLimit = 0, mapType = 0;
  std::optional<GuardWord> ownedGuard;
  GuardWord *guard = nullptr;
  std::string heldBy;
};

} // namespace morpheus::bpf
