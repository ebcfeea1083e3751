#include "client/Transaction.h"

#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/MapUpdater.h"

#include <algorithm>
#include <cstring>

namespace morpheus::client {

Expected<PinnedMaps> PinnedMaps::open(const std::string &pinDir,
                                      const std::vector<std::string> &names) {
  PinnedMaps pinned;
  for (const std::string &name : names) {
    auto map = Map::open(pinDir + "/" + name);
    if (!map)
      return withContext(map.takeError(),
                         "is the function running? ('morpheus run' pins its maps in " +
                             pinDir + ")");
    pinned.maps.emplace(name, std::move(*map));
  }
  return pinned;
}

Map &PinnedMaps::operator[](const std::string &name) { return maps.at(name); }
const Map &PinnedMaps::operator[](const std::string &name) const { return maps.at(name); }

std::vector<bpf::GuardWord *> PinnedMaps::guards() const {
  std::vector<bpf::GuardWord *> found;
  for (const auto &[name, map] : maps)
    if (bpf::GuardWord *guard = map.updater->guardWord();
        guard && std::find(found.begin(), found.end(), guard) == found.end())
      found.push_back(guard);
  return found;
}

namespace {

// What to write back to restore `key` as it is now, or none if absent.
// Per-CPU maps: CPU 0's copy, which is what MapUpdater writes to every CPU.
// Maps of maps read back an inner map's id but are written with an fd: the
// id is turned into an fd, kept open in `heldFds` until the commit ends
// (an inner map freed meanwhile: none).
Expected<std::optional<Bytes>> restoreValue(const bpf::MapUpdater &updater, const Bytes &key,
                                            std::vector<FileDescriptor> &heldFds) {
  uint32_t valueSize = updater.valueSize();
  size_t stride = (valueSize + 7) & ~size_t(7);
  Bytes raw(updater.perCpu() ? stride * bpf::possibleCpus() : valueSize);
  auto found = bpf::MapAccess(updater.fd(), updater.name()).lookup(key, raw);
  if (!found)
    return found.takeError();
  if (!*found)
    return std::nullopt;
  raw.resize(valueSize);
  if (updater.mapOfMaps()) {
    uint32_t id;
    std::memcpy(&id, raw.data(), sizeof(id));
    auto inner = bpf::openMapById(id, updater.name() + " (inner map)");
    if (!inner)
      return inner.takeError();
    if (!*inner)
      return std::nullopt;
    int innerFd = (*inner)->get();
    heldFds.push_back(std::move(**inner));
    std::memcpy(raw.data(), &innerFd, sizeof(innerFd));
  }
  return raw;
}

} // namespace

Error Transaction::commit() {
  struct Undo {
    std::string map;
    Bytes key;
    std::optional<Bytes> previous;
  };
  std::vector<Undo> undo;
  std::vector<FileDescriptor> heldFds;
  // One bracket around the whole batch: the changes below are the
  // unguarded writes it exists for.
  std::vector<bpf::GuardWord::Update> brackets;
  for (bpf::GuardWord *guard : maps.guards()) {
    auto bracket = bpf::GuardWord::Update::begin(guard);
    if (!bracket)
      return withContext(bracket.takeError(), "nothing changed");
    brackets.push_back(std::move(*bracket));
  }
  for (size_t i = 0; i < changes.size(); ++i) {
    const Change &change = changes[i];
    bpf::MapUpdater &updater = *maps[change.map].updater;
    // What the change overwrites, read first so that it can be undone.
    auto previous = restoreValue(updater, change.key, heldFds);
    Error err = previous ? Error::success() : previous.takeError();
    if (!err) {
      err = change.value ? updater.writeUnguarded(change.key, *change.value, change.flags)
                         : updater.eraseUnguarded(change.key);
      if (change.value == std::nullopt && err && !*previous) {
        // Deleting what is not there leaves the map as wanted.
        llvm::consumeError(std::move(err));
        continue;
      }
      if (!err) {
        undo.push_back({change.map, change.key, std::move(*previous)});
        continue;
      }
    }
    for (auto it = undo.rbegin(); it != undo.rend(); ++it) {
      bpf::MapUpdater &target = *maps[it->map].updater;
      Error restored = it->previous ? target.writeUnguarded(it->key, *it->previous)
                                    : target.eraseUnguarded(it->key);
      llvm::consumeError(std::move(restored)); // best effort; report the cause
    }
    return withContext(std::move(err), "change " + std::to_string(i + 1) + " of " +
                                           std::to_string(changes.size()) +
                                           " failed, earlier changes undone");
  }
  return Error::success();
}

} // namespace morpheus::client
