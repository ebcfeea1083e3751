// Element by element access to one kernel map, by fd, for the layers above
// the backend: lookups, writes, deletes, queue and stack elements, batches,
// array ranges and ring buffer records, plus creating a map like another
// and opening one by id. Writes here are NOT bracketed by the guard: they
// are for maps no specialized code trusts (scratch copies, a benchmark's
// driver, a calibration's tables, a map of the program before anything is
// specialized for it). A map that specialized code reads is written through
// MapUpdater.
//
// One convention: a key that is not there is an answer (false, nullopt),
// every other failure an error naming the map and, where there is one, the
// key ("map 'routes': cannot read key 20 0a 00 00 01: Bad address").
#pragma once

#include "backend/bpf/BpfObject.h"
#include "support/Bytes.h"
#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/STLFunctionalExtras.h>

#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

struct ring_buffer;

namespace morpheus::bpf {

// One map, by an fd the caller keeps open, and the name its errors give it.
// Values are as the syscalls read and write them: for per-CPU maps every
// CPU's copy, each padded to 8 bytes (syscallValueSize).
class MapAccess {
public:
  MapAccess(int fd, std::string name) : mapFd(fd), mapName(std::move(name)) {}

  int fd() const { return mapFd; }
  const std::string &name() const { return mapName; }

  // Copies the value of `key` into `value`; false when the map holds no
  // entry for it.
  Expected<bool> lookup(llvm::ArrayRef<uint8_t> key, llvm::MutableArrayRef<uint8_t> value) const;
  // The same for a plain struct key and value: nullopt when absent.
  template <typename Value, typename Key>
  Expected<std::optional<Value>> find(const Key &key) const {
    Value value;
    auto found = lookup(byteView(key), mutableByteView(value));
    if (!found)
      return found.takeError();
    if (!*found)
      return std::nullopt;
    return value;
  }

  // Writes `value` at `key`; `flags` as bpf_map_update_elem's (BPF_ANY,
  // BPF_NOEXIST, BPF_EXIST). For maps of maps and program arrays the value
  // is the fd of the map or program to put in the slot.
  Error update(llvm::ArrayRef<uint8_t> key, llvm::ArrayRef<uint8_t> value,
               uint64_t flags = 0 /* BPF_ANY */) const;
  template <typename Key, typename Value> Error put(const Key &key, const Value &value) const {
    return update(byteView(key), byteView(value));
  }
  // Adds `key` only when the map does not hold it (BPF_NOEXIST): false
  // when it does.
  Expected<bool> insert(llvm::ArrayRef<uint8_t> key, llvm::ArrayRef<uint8_t> value) const;
  // Writes `key` (BPF_ANY) unless the map is full (E2BIG): false then.
  Expected<bool> updateWhereRoom(llvm::ArrayRef<uint8_t> key,
                                 llvm::ArrayRef<uint8_t> value) const;
  // Deletes `key`: false when the map did not hold it.
  Expected<bool> remove(llvm::ArrayRef<uint8_t> key) const;
  // Deletes every entry of a map with keys (not an array): `keySize` bytes
  // each.
  Error clear(uint32_t keySize) const;

  // Queues and stacks: takes the next element out into `value`; false when
  // there is none.
  Expected<bool> pop(llvm::MutableArrayRef<uint8_t> value) const;
  Error push(llvm::ArrayRef<uint8_t> value) const;

  // Writes `count` entries, `keys` and `values` packed one after another
  // (keys.size() / count and values.size() / count bytes each), in order,
  // as update() would write them one by one, but a batch of them per
  // syscall (BPF_MAP_UPDATE_BATCH: plain data maps, arrays, hashes and LPM
  // tries of every kind, and maps of maps; devmaps and cpumaps have no
  // batch operations on kernel 6.18, ENOTSUPP). An entry the kernel
  // refuses is written once more alone, so its error is update()'s,
  // naming the map and its key; the entries before it are written, those
  // after it not.
  Error updateBatch(llvm::ArrayRef<uint8_t> keys, llvm::ArrayRef<uint8_t> values,
                    uint32_t count) const;

  // Calls `visit(index, row)` for the slots [first, first + count) of an
  // array in index order, read in batches (BPF_MAP_LOOKUP_BATCH) of
  // SlotBatch slots, each row `rowBytes` long (syscallValueSize), until
  // `visit` returns false; stops at the array's end. Returns how many
  // slots it visited. The one batched read of array slots.
  Expected<uint32_t> forEachSlot(uint32_t first, uint32_t count, size_t rowBytes,
                                 llvm::function_ref<bool(uint32_t, const uint8_t *)> visit) const;
  // The same for the slots `indexes` (ascending, distinct) of an array:
  // indexes at most ListedSlotGap apart are read in one range, so a listing
  // of many slots costs a syscall per batch, not per slot; an index beyond
  // the array's end is not visited (as a lookup finds no entry there).
  Error forEachListedSlot(llvm::ArrayRef<uint32_t> indexes, size_t rowBytes,
                          llvm::function_ref<void(uint32_t, const uint8_t *)> visit) const;

  // Slots per batch syscall: the kernel copies a slot in about 0.6 us here
  // against several us a syscall, so larger batches save nothing, and a
  // read that stops early reads at most this many slots too far.
  static constexpr uint32_t SlotBatch = 1024;
  // Slots read between two listed ones rather than a syscall more: a
  // syscall costs about as much as the kernel's copy of this many slots.
  static constexpr uint32_t ListedSlotGap = 8;

private:
  int mapFd;
  std::string mapName;
};

// The fd of the map the kernel knows by `id`; nullopt when there is none
// (it was freed). `name` names it in errors.
Expected<std::optional<FileDescriptor>> openMapById(uint32_t id, const std::string &name);

struct MapCreation {
  // Maps of maps: a map of the layout every inner map must have.
  int innerTemplate = -1;
  // Hash maps of every kind get BPF_F_ZERO_SEED: filled in the same order,
  // two such maps place every key in the same bucket, so iterating them
  // visits the same order.
  bool fixedHashSeed = false;
  // The kernel shows the map under layout.name; otherwise it is unnamed.
  bool named = false;
  // A plain array gets BPF_F_MMAPABLE, so that MappedArray can map its
  // values (a program's lookups answer alike). The kernel refuses it for
  // values holding a lock, a timer or a kernel pointer.
  bool mmapable = false;
};

// The values of an array created with BPF_F_MMAPABLE, mapped into this
// process: slot i at i times the value size rounded up to 8 bytes, as the
// kernel lays an array out. Reads and writes are plain memory accesses on
// the map's own values; they are unmapped when this goes.
class MappedArray {
public:
  static Expected<MappedArray> map(int fd, const MapLayout &layout);
  MappedArray(MappedArray &&other) noexcept;
  MappedArray &operator=(MappedArray &&other) noexcept;
  ~MappedArray();

  uint8_t *slot(uint32_t index) const { return base + size_t(index) * stride; }
  uint32_t slots() const { return count; }

private:
  MappedArray(uint8_t *base, size_t length, size_t stride, uint32_t count)
      : base(base), length(length), stride(stride), count(count) {}
  uint8_t *base = nullptr;
  size_t length = 0;
  size_t stride = 0;
  uint32_t count = 0;
};

// A new map of `layout`'s type, key and value sizes, max_entries, flags,
// map_extra and BTF (the kernel's BTF object layout.btfId, when it has
// one). The error names layout.name and the map type.
Expected<FileDescriptor> createMap(const MapLayout &layout, const MapCreation &how = {});

// Reads the records a BPF ring buffer delivers, in order.
class RingReader {
public:
  static Expected<RingReader> open(const MapAccess &ring);
  RingReader(RingReader &&other) noexcept;
  RingReader &operator=(RingReader &&other) noexcept;
  RingReader(const RingReader &) = delete;
  ~RingReader();

  // Every record that came since the last call (none if none came).
  Expected<std::vector<Bytes>> drain();

private:
  RingReader(std::string name) : mapName(std::move(name)) {}
  static int received(void *context, void *data, size_t size);
  ring_buffer *ring = nullptr;
  std::string mapName;
  // Behind a pointer: libbpf holds its address while the reader moves.
  std::unique_ptr<std::vector<Bytes>> records = std::make_unique<std::vector<Bytes>>();
};

} // namespace morpheus::bpf
