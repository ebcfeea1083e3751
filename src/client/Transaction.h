// Control-plane changes to several maps, all or nothing.
//
// A control plane first parses and validates its whole input, then queues
// every change in a Transaction and commits: the whole batch is bracketed
// by the Morpheus guard (bumped once before the first change and once
// after the last, so specialized code defers to the original throughout
// and no compilation that overlapped the batch is ever installed; the
// first change waits until every packet that trusted the old version has
// finished, so none sees part of the batch beside folded contents from
// before it: docs/equivalence.md), and if
// the kernel refuses a change (map full, ...) the changes already made are
// undone, so bad input never leaves a program half configured.
#pragma once

#include "client/Map.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::bpf {
class GuardWord;
} // namespace morpheus::bpf

namespace morpheus::client {

// The maps of one program instance, pinned in one directory (as `morpheus
// run` pins them; the Morpheus guard there is used when present).
class PinnedMaps {
public:
  static Expected<PinnedMaps> open(const std::string &pinDir,
                                   const std::vector<std::string> &names);
  // One of the maps opened; asking for another is a programming error.
  Map &operator[](const std::string &name);
  const Map &operator[](const std::string &name) const;

private:
  friend class Transaction;
  // The distinct guards of the maps (normally one: they share a pin dir).
  std::vector<bpf::GuardWord *> guards() const;

  std::map<std::string, Map> maps;
};

class Transaction {
public:
  explicit Transaction(PinnedMaps &maps) : maps(maps) {}

  // Keys and values are structs or Bytes (support/Bytes.h); `flags` as for
  // bpf_map_update_elem.
  template <typename K, typename V>
  void update(const std::string &map, const K &key, const V &value, uint64_t flags = 0) {
    changes.push_back({map, bytesOf(key), bytesOf(value), flags});
  }
  template <typename K> void remove(const std::string &map, const K &key) {
    changes.push_back({map, bytesOf(key), std::nullopt, 0});
  }
  size_t size() const { return changes.size(); }

  // Applies every change in order inside one guard bracket; on the first
  // failure, restores what the earlier ones overwrote and returns the error.
  // Deleting a key that is not there is not a failure.
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

} // namespace morpheus::client
