// What the core knows about match-action tables, independent of any data
// plane: how a table matches keys, its sizes, and a snapshot of its contents.
// Backends translate their own map types into this vocabulary (the eBPF
// backend maps BPF_MAP_TYPE_* here) and fill snapshots from the live tables.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::core {

using Bytes = std::vector<uint8_t>;

enum class TableMatch {
  Exact,         // hash tables: full-key equality
  Index,         // arrays: a 32-bit index below maxEntries, every slot exists
  LongestPrefix, // LPM tries: a 4-byte prefix length, then the data (network order)
  Unsupported,   // anything whose lookup semantics the core does not model
};

// The layout a table must have to be stored in a table of tables (the
// outer table's inner template): the kernel refuses any other.
struct TableTemplate {
  std::string typeName;
  uint32_t keySize = 0;
  uint32_t valueSize = 0;
  uint32_t flags = 0;
  // Set when a stored table must also have exactly maxEntries slots (the
  // kernel's rule for arrays declared without BPF_F_INNER_MAP).
  std::optional<uint32_t> maxEntries;
};

struct TableInfo {
  std::string name;     // the table's symbol in the IR, also its name in reports
  std::string typeName; // the backend's own name for the type, for humans
  TableMatch match = TableMatch::Unsupported;
  bool perCpu = false;  // each CPU sees its own value for a key
  // Lookups have side effects the core cannot reproduce (e.g. LRU reference
  // bits that steer later evictions), so lookups must stay real calls.
  bool lookupHasSideEffects = false;
  // Set when something besides the program and its control plane removes
  // entries, unseen by the guard (the kernel deletes a devmap's entry when
  // its device is unregistered): says what. A lookup may then miss a key
  // the snapshot holds, though it never finds one the snapshot lacks, and
  // an entry it finds holds the snapshot's value. So no rewrite may answer
  // a lookup as a hit: only those that keep the lookup wherever the
  // snapshot holds the key apply (key-set-filter, fold-read-only-fields).
  std::optional<std::string> entriesRemovedUnguarded = std::nullopt;
  // For a table whose lookups the core does not model (Unsupported): what
  // a lookup does instead of returning the value, in the backend's words;
  // "" when the backend says nothing more.
  std::string lookupNotModelled = {};
  uint32_t keySize = 0;
  uint32_t valueSize = 0;
  uint32_t maxEntries = 0;
  uint32_t flags = 0;   // the backend's creation flags, compared with templates
  // Set for tables of tables: what their lookups return is a table with this
  // layout, never a value.
  std::optional<TableTemplate> innerTemplate;
  // Written by another loader, which the guard does not see, and kept
  // generic by the operator's policy (`run --keep-generic`, `--other-writers
  // keep-generic`): the analysis counts it as written wholesale by the data
  // plane (KeptGenericReason), so nothing is folded from it, no fast path
  // answers for it and no version depends on what it holds; such a writer's
  // change holds from the next packet on.
  bool keptGeneric = false;

  // Whether this table could be stored in a table of tables with `inner`.
  bool fits(const TableTemplate &inner) const {
    return typeName == inner.typeName && keySize == inner.keySize &&
           valueSize == inner.valueSize && flags == inner.flags &&
           (!inner.maxEntries || maxEntries == *inner.maxEntries);
  }
};

using TableCatalog = std::map<std::string, TableInfo>;

// Why a table marked TableInfo::keptGeneric is never specialized: the
// analysis's write reason, the lookup's decline, what explain and the
// daemon print.
inline constexpr const char *KeptGenericReason = "kept generic: written by another loader (policy)";

struct TableEntry {
  Bytes key;
  // The value the data plane would read. For per-CPU tables this is set only
  // when every CPU holds the same bytes; std::nullopt means the value depends
  // on the CPU, which makes the entry impossible to inline as a constant.
  std::optional<Bytes> value;
  // For a per-CPU entry whose CPUs hold different values (value unset):
  // CPU 0's bytes, with `agreed` marking those every CPU holds alike (the
  // configuration beside a per-CPU counter). Empty otherwise.
  Bytes cpuZero = {};
  std::vector<bool> agreed = {};

  // The bytes every CPU holds at [offset, offset + size), or nullopt when
  // some differ (or lie beyond the value).
  std::optional<Bytes> agreedAt(uint64_t offset, uint64_t size) const {
    const Bytes *bytes = value ? &*value : &cpuZero;
    if (offset + size > bytes->size())
      return std::nullopt;
    for (uint64_t i = offset; !value && i < offset + size; ++i)
      if (!agreed[i])
        return std::nullopt;
    return Bytes(bytes->begin() + offset, bytes->begin() + offset + size);
  }

  bool operator==(const TableEntry &) const = default;
};

// What was read of one table. `complete` says whether `entries` is the whole
// table; a partial read (a table larger than any pass could inline) still
// lists the entries for keys a pass asked for explicitly.
struct TableContents {
  bool complete = false;
  std::vector<TableEntry> entries;
  // Keys looked up one by one; an absent one is known to be absent.
  std::set<Bytes> probedKeys;
  // For an array read whole by content: `entries` lists the slots that hold
  // anything but this value, which every other index below maxEntries holds
  // (it exists: never absent). The array's most common value: zeros in an
  // array never written, or the "empty" its loader fills the rest with.
  std::optional<Bytes> unlistedValue;
  // For a table of tables: per key, the program's own table stored there
  // (by name). A key listed in `entries` but not here holds a table the
  // program does not declare (one its loader created).
  std::map<Bytes, std::string> storedTables;

  // Whether `key` is in the table, if the snapshot knows: the entry, or
  // nullptr when it is known to be absent. std::nullopt when the snapshot
  // neither holds the whole table nor probed this key.
  std::optional<const TableEntry *> known(const Bytes &key) const;

  bool operator==(const TableContents &) const = default;
};

using TableSnapshot = std::map<std::string, TableContents>;

// Per table, what the passes need read from the live table this cycle. The
// point is to read as little as possible: reading maps dominated the research
// prototype's recompilation time.
struct TableReadRequest {
  // Read the whole table if it has at most this many entries (0: don't).
  uint32_t wholeTableLimit = 0;
  // Exact keys some site looks up with a compile-time constant key.
  std::vector<Bytes> keys;
  // An array read by content (more slots than wholeTableLimit) is of use
  // to a pass only while at most `contentDiffering` slots hold anything but
  // its most common value (a chain of them), or while its slots hold at
  // most `contentValues` distinct values, however many slots differ (a
  // class per value). The read stops, as a read of only `keys`, as soon
  // as the slots read show both bounds passed; the defaults never stop.
  uint32_t contentDiffering = UINT32_MAX;
  uint32_t contentValues = UINT32_MAX;
};

using ReadPlan = std::map<std::string, TableReadRequest>;

} // namespace morpheus::core
