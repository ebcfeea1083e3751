// Control-plane changes to a network function's maps, all or nothing.
//
// Config loaders first parse and validate the whole file, then queue every
// change here and commit: the whole batch is bracketed by the Morpheus
// guard (bumped once before the first change and once after the last, so
// specialized code defers to the original throughout and no compilation
// that overlapped the batch is ever installed), and if the kernel refuses a
// change (map full, ...) the changes already made are undone, so a bad file
// never leaves the function half configured.
#pragma once

#include "backend/bpf/MapUpdater.h"
#include "support/Bytes.h"
#include "support/Error.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::nf {

// The maps of one network function instance, pinned in one directory (as
// `morpheus run` pins them; a Morpheus guard there is used when present).
class PinnedMaps {
public:
  static Expected<PinnedMaps> open(const std::string &pinDir,
                                   const std::vector<std::string> &names);
  bpf::MapUpdater &operator[](const std::string &name);
  // The distinct guards of the maps (normally one: they share a pin dir).
  std::vector<bpf::GuardWord *> guards() const;

private:
  std::map<std::string, std::unique_ptr<bpf::MapUpdater>> maps;
};

class MapTransaction {
public:
  explicit MapTransaction(PinnedMaps &maps) : maps(maps) {}

  void update(const std::string &map, Bytes key, Bytes value, uint64_t flags = 0);
  void remove(const std::string &map, Bytes key);
  size_t size() const { return changes.size(); }

  // Applies every change in order; on the first failure, restores what the
  // earlier ones overwrote and returns the error.
  Error commit();

private:
  struct Change {
    std::string map;
    Bytes key;
    std::optional<Bytes> value; // none: delete
    uint64_t flags = 0;
  };
  PinnedMaps &maps;
  std::vector<Change> changes;
};

} // namespace morpheus::nf
