// Scratch copies of a live program's maps, for every object Morpheus loads
// besides the live one (shadow validation's versions, the fuzzer's).
//
// A copy shares nothing with the live program that a program, libbpf or the
// kernel could write: every map of the live object gets a scratch map of
// the same type and layout in each copy, or is one the copy's own load
// creates frozen (.rodata*, .kconfig). What a scratch map starts with:
//   data maps (hash, array, per-CPU, LRU, LPM, .data, .bss)
//                      a window of the live entries plus the keys asked for
//   maps of maps       scratch copies of the live inner maps, one per live
//                      inner map (two slots holding one map hold one copy)
//   program arrays     empty; a version binds them to its own programs of
//                      the names the live slots name (bindProgramSlots)
//   devmaps, cpumaps   the live slots' interfaces and queue sizes, without
//                      the programs attached to them
//   ring buffers, perf event arrays, queues, stacks, bloom filters, storage
//   and socket maps    empty: their contents are records for a consumer,
//                      or cannot be read without consuming them, or belong
//                      to kernel objects
// Every version starts from the same MapImage, so whatever a copy lacks it
// lacks in all versions alike.
#pragma once

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapAccess.h"
#include "core/Tables.h"
#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::runtime {

// What copies of the live program mirror.
struct LiveMaps {
  // Every map of the live object by name, internal ones included (the
  // guard's maps, if given, are left out: copies get their own).
  std::map<std::string, int> maps;
  // What the live program arrays hold, by program name (slots holding a
  // program of another object are not listed and stay empty in copies).
  bpf::ProgramSlots programSlots;
};

struct CopySizing {
  // Live entries copied per map (the first ones in the kernel's order);
  // none copies whole maps at their full size.
  std::optional<uint32_t> window;
  // Room left in hash-like copies for entries the runs insert.
  uint32_t headroom = 0;
  // Keys copied whatever the window (those a specialization read).
  std::map<std::string, std::vector<core::Bytes>> keys;
};

// How a scratch map is made and observed.
enum class CopyKind {
  Data,       // entries copied; compared entry by entry
  Programs,   // program array, bound by name after loading
  MapsOfMaps, // slots hold scratch copies of the inner maps
  Devices,    // devmap/cpumap slots copied without programs
  Ring,       // ring buffer: empty; records compared as they come
  Sequence,   // queue/stack: empty; contents compared in order
  Empty,      // perf event arrays, storage, sockets, bloom filters, ...
};

// The live maps as every copy starts from them, read once.
class MapImage {
public:
  struct Map {
    std::string name; // the map's name; inner maps "<outer>[<key hex>]"
    bpf::MapLayout layout; // of the copy: max_entries as it is created
    CopyKind kind = CopyKind::Empty;
    // Data and Devices: (key, value) as the syscalls write them.
    std::vector<std::pair<core::Bytes, core::Bytes>> rows;
    // MapsOfMaps: (key, index of the inner map in maps()).
    std::vector<std::pair<core::Bytes, size_t>> inner;
    // MapsOfMaps: the declared inner layout, for a template when the live
    // outer map holds no inner map to copy one from.
    std::shared_ptr<const bpf::MapLayout> innerLayout;
    bool named = false; // a map of the object (not only an inner map)
  };

  // `declared` are the maps as the object declares them (inner layouts).
  static Expected<MapImage> read(const LiveMaps &live,
                                 const std::map<std::string, bpf::MapLayout> &declared,
                                 const CopySizing &sizing);

  const std::vector<Map> &maps() const { return all; }
  const bpf::ProgramSlots &programSlots() const { return slots; }

private:
  std::vector<Map> all;
  bpf::ProgramSlots slots;
};

// What a version's map holds now, as compared between versions.
struct MapDump {
  core::Bytes flat; // whole arrays: slot i at i * row
  size_t row = 0;
  std::map<core::Bytes, core::Bytes> entries;
  std::vector<core::Bytes> sequence; // ring records, queue/stack elements
};

// One version's scratch copies of every map of a MapImage.
class ScratchMaps {
public:
  // With `fixedHashSeeds`, hash maps (of every kind, inner maps too) are
  // created with BPF_F_ZERO_SEED: filled in the same order, two copies
  // place every key in the same bucket, so iterating them
  // (bpf_for_each_map_elem, the key walk) visits the same order. Off only
  // for tests (core::FaultInjection::randomHashSeeds).
  static Expected<std::unique_ptr<ScratchMaps>> create(const MapImage &image,
                                                       bool fixedHashSeeds = true);
  ~ScratchMaps();
  ScratchMaps(const ScratchMaps &) = delete;
  ScratchMaps &operator=(const ScratchMaps &) = delete;

  // The copies of the object's own maps, by name, to load a version on
  // (bpf::LoadOptions::maps, with windowedCopies).
  const std::map<std::string, int> &byName() const { return named; }
  int fd(size_t index) const { return fds[index].get(); }

  // Points the program arrays at `object`'s programs of the names the live
  // slots name.
  Error bindProgramSlots(const bpf::LoadedObject &object) const;

  // Map `index`'s contents; arrays larger than a whole-dump limit are read
  // at `keys` only. Ring buffer records are those that came since the
  // last dump; queues and stacks are read and put back.
  Expected<MapDump> dump(size_t index, const std::vector<core::Bytes> &keys) const;

  // Puts the maps back as the image holds them (`touched`: keys written
  // into arrays too large to compare whole); queues and stacks emptied,
  // ring buffers drained.
  Error restore(const std::map<std::string, std::vector<core::Bytes>> &touched);

private:
  ScratchMaps(const MapImage &image, bool fixedHashSeeds)
      : image(image), fixedHashSeeds(fixedHashSeeds) {}
  Error createAll();
  Error fill(size_t index);
  Error drainRings() const;
  // Map `index`'s copy.
  bpf::MapAccess access(size_t index) const;

  const MapImage &image;
  bool fixedHashSeeds;
  std::vector<FileDescriptor> fds;
  // By map index, the values of a plain array's copy mapped into this
  // process (BPF_F_MMAPABLE): filled, dumped and restored in memory.
  std::vector<std::optional<bpf::MappedArray>> mapped;
  std::map<std::string, int> named;
  // Readers of the ring buffers, by map index; mutable: reading consumes.
  mutable std::map<size_t, bpf::RingReader> rings;
  // Records a ring delivered, not yet dumped, per ring map index.
  mutable std::map<size_t, std::vector<core::Bytes>> records;
};

// Bytes of one row as the syscalls read and write it.
size_t rowSize(const bpf::MapLayout &layout);

} // namespace morpheus::runtime
