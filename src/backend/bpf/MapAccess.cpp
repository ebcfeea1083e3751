#include "backend/bpf/MapAccess.h"

#include "backend/bpf/MapIO.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <utility>

namespace morpheus::bpf {

namespace {

std::string hexOf(llvm::ArrayRef<uint8_t> bytes) {
  return toHex(Bytes(bytes.begin(), bytes.end()));
}

} // namespace

Expected<bool> MapAccess::lookup(llvm::ArrayRef<uint8_t> key,
                                 llvm::MutableArrayRef<uint8_t> value) const {
  if (bpf_map_lookup_elem(mapFd, key.data(), value.data()) == 0)
    return true;
  if (errno == ENOENT)
    return false;
  return makeSystemError(errno, "map '{0}': cannot read key {1}", mapName, hexOf(key));
}

Error MapAccess::update(llvm::ArrayRef<uint8_t> key, llvm::ArrayRef<uint8_t> value,
                        uint64_t flags) const {
  if (bpf_map_update_elem(mapFd, key.data(), value.data(), flags))
    return makeSystemError(errno, "map '{0}': cannot write key {1}", mapName, hexOf(key));
  return Error::success();
}

Expected<bool> MapAccess::insert(llvm::ArrayRef<uint8_t> key,
                                 llvm::ArrayRef<uint8_t> value) const {
  if (bpf_map_update_elem(mapFd, key.data(), value.data(), BPF_NOEXIST) == 0)
    return true;
  if (errno == EEXIST)
    return false;
  return makeSystemError(errno, "map '{0}': cannot add key {1}", mapName, hexOf(key));
}

Expected<bool> MapAccess::updateWhereRoom(llvm::ArrayRef<uint8_t> key,
                                          llvm::ArrayRef<uint8_t> value) const {
  if (bpf_map_update_elem(mapFd, key.data(), value.data(), BPF_ANY) == 0)
    return true;
  if (errno == E2BIG)
    return false;
  return makeSystemError(errno, "map '{0}': cannot write key {1}", mapName, hexOf(key));
}

Expected<bool> MapAccess::remove(llvm::ArrayRef<uint8_t> key) const {
  if (bpf_map_delete_elem(mapFd, key.data()) == 0)
    return true;
  if (errno == ENOENT)
    return false;
  return makeSystemError(errno, "map '{0}': cannot delete key {1}", mapName, hexOf(key));
}

Error MapAccess::clear(uint32_t keySize) const {
  // Always the first key: deleting while walking would restart the walk
  // anyway.
  Bytes key(keySize);
  while (bpf_map_get_next_key(mapFd, nullptr, key.data()) == 0)
    if (bpf_map_delete_elem(mapFd, key.data()))
      return makeSystemError(errno, "map '{0}': cannot clear", mapName);
  if (errno != ENOENT)
    return makeSystemError(errno, "map '{0}': cannot clear", mapName);
  return Error::success();
}

Expected<bool> MapAccess::pop(llvm::MutableArrayRef<uint8_t> value) const {
  if (bpf_map_lookup_and_delete_elem(mapFd, nullptr, value.data()) == 0)
    return true;
  if (errno == ENOENT)
    return false;
  return makeSystemError(errno, "map '{0}': cannot take an element out", mapName);
}

Error MapAccess::push(llvm::ArrayRef<uint8_t> value) const {
  if (bpf_map_update_elem(mapFd, nullptr, value.data(), BPF_ANY))
    return makeSystemError(errno, "map '{0}': cannot put an element in", mapName);
  return Error::success();
}

Error MapAccess::updateBatch(llvm::ArrayRef<uint8_t> keys, llvm::ArrayRef<uint8_t> values,
                             uint32_t count) const {
  if (count == 0)
    return Error::success();
  size_t keySize = keys.size() / count, valueSize = values.size() / count;
  uint32_t done = 0;
  while (done < count) {
    uint32_t wanted = std::min(SlotBatch, count - done), written = wanted;
    if (bpf_map_update_batch(mapFd, keys.data() + size_t(done) * keySize,
                             values.data() + size_t(done) * valueSize, &written, nullptr) == 0) {
      done += wanted;
      continue;
    }
    // The kernel wrote the entries before the one it refused (a count it
    // did not lower means it refused the call before any entry): that one
    // alone, for update()'s error naming its key (should it go in now, the
    // batch goes on after it).
    if (written < wanted)
      done += written;
    if (Error err = update(keys.slice(size_t(done) * keySize, keySize),
                           values.slice(size_t(done) * valueSize, valueSize)))
      return err;
    ++done;
  }
  return Error::success();
}

Expected<uint32_t>
MapAccess::forEachSlot(uint32_t first, uint32_t count, size_t rowBytes,
                       llvm::function_ref<bool(uint32_t, const uint8_t *)> visit) const {
  std::vector<uint32_t> indexes(std::min(count, SlotBatch));
  Bytes rows(indexes.size() * rowBytes);
  // The kernel's batch cursor is the key before the first one wanted.
  uint32_t previous = first - 1, last = 0, visited = 0;
  bool fromStart = first == 0;
  while (visited < count) {
    uint32_t wanted = std::min<uint32_t>(indexes.size(), count - visited);
    int result = bpf_map_lookup_batch(mapFd, fromStart ? nullptr : &previous, &last,
                                      indexes.data(), rows.data(), &wanted, nullptr);
    if (result && errno != ENOENT)
      return makeSystemError(errno, "map '{0}': cannot read slots {1}..{2}", mapName, first,
                             uint64_t(first) + count - 1);
    for (uint32_t i = 0; i < wanted; ++i) {
      // Past the array's end the kernel's walk starts over at slot 0.
      if (indexes[i] < first)
        return visited;
      ++visited;
      if (!visit(indexes[i], rows.data() + size_t(i) * rowBytes))
        return visited;
    }
    if (result || wanted == 0)
      break; // ENOENT: the array's end
    previous = last;
    fromStart = false;
  }
  return visited;
}

Error MapAccess::forEachListedSlot(llvm::ArrayRef<uint32_t> indexes, size_t rowBytes,
                                   llvm::function_ref<void(uint32_t, const uint8_t *)> visit) const {
  size_t next = 0;
  while (next < indexes.size()) {
    // One range: the listed indexes up to the first gap wider than
    // ListedSlotGap.
    size_t end = next + 1;
    while (end < indexes.size() && indexes[end] - indexes[end - 1] <= ListedSlotGap)
      ++end;
    uint32_t first = indexes[next], count = indexes[end - 1] - first + 1;
    size_t wanted = next;
    auto read = forEachSlot(first, count, rowBytes, [&](uint32_t index, const uint8_t *row) {
      if (index == indexes[wanted]) {
        visit(index, row);
        ++wanted;
      }
      return wanted < end;
    });
    if (!read)
      return read.takeError();
    if (*read < count)
      break; // the array ends before this range's last index, and the rest
    next = end;
  }
  return Error::success();
}

Expected<std::optional<FileDescriptor>> openMapById(uint32_t id, const std::string &name) {
  int fd = bpf_map_get_fd_by_id(id);
  if (fd >= 0)
    return FileDescriptor(fd);
  if (errno == ENOENT)
    return std::nullopt;
  return makeSystemError(errno, "map '{0}': cannot open map id {1}", name, id);
}

namespace {

// The kernel's hash tables, whose buckets follow a seed (random unless
// BPF_F_ZERO_SEED).
bool isSeededHash(uint32_t type) {
  return type == BPF_MAP_TYPE_HASH || type == BPF_MAP_TYPE_PERCPU_HASH ||
         type == BPF_MAP_TYPE_LRU_HASH || type == BPF_MAP_TYPE_LRU_PERCPU_HASH ||
         type == BPF_MAP_TYPE_HASH_OF_MAPS;
}

} // namespace

Expected<FileDescriptor> createMap(const MapLayout &layout, const MapCreation &how) {
  FileDescriptor btf(layout.btfId ? bpf_btf_get_fd_by_id(layout.btfId) : -1);
  uint32_t flags = layout.flags;
  if (how.fixedHashSeed && isSeededHash(layout.type))
    flags |= BPF_F_ZERO_SEED;
  if (how.mmapable && layout.type == BPF_MAP_TYPE_ARRAY)
    flags |= BPF_F_MMAPABLE;
  LIBBPF_OPTS(bpf_map_create_opts, attributes,
              .btf_fd = uint32_t(std::max(btf.get(), 0)),
              .btf_key_type_id = btf.valid() ? layout.btfKeyTypeId : 0,
              .btf_value_type_id = btf.valid() ? layout.btfValueTypeId : 0,
              .inner_map_fd = uint32_t(std::max(how.innerTemplate, 0)), .map_flags = flags,
              .map_extra = layout.extra);
  int fd = bpf_map_create(bpf_map_type(layout.type), how.named ? layout.name.c_str() : nullptr,
                          layout.keySize, layout.valueSize, layout.maxEntries, &attributes);
  if (fd < 0) {
    int err = errno;
    const char *type = libbpf_bpf_map_type_str(bpf_map_type(layout.type));
    return makeSystemError(err, "map '{0}' ({1}): cannot create", layout.name,
                           type ? type : "unknown type");
  }
  return FileDescriptor(fd);
}

Expected<MappedArray> MappedArray::map(int fd, const MapLayout &layout) {
  size_t stride = (size_t(layout.valueSize) + 7) & ~size_t(7);
  size_t page = size_t(sysconf(_SC_PAGESIZE));
  size_t length = (stride * layout.maxEntries + page - 1) / page * page;
  void *base = mmap(nullptr, length, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (base == MAP_FAILED)
    return makeSystemError(errno, "map '{0}': cannot map its values", layout.name);
  return MappedArray(static_cast<uint8_t *>(base), length, stride, layout.maxEntries);
}

MappedArray::MappedArray(MappedArray &&other) noexcept
    : base(std::exchange(other.base, nullptr)), length(other.length), stride(other.stride),
      count(other.count) {}

MappedArray &MappedArray::operator=(MappedArray &&other) noexcept {
  if (this != &other) {
    if (base)
      munmap(base, length);
    base = std::exchange(other.base, nullptr);
    length = other.length;
    stride = other.stride;
    count = other.count;
  }
  return *this;
}

MappedArray::~MappedArray() {
  if (base)
    munmap(base, length);
}

Expected<RingReader> RingReader::open(const MapAccess &ring) {
  RingReader reader(ring.name());
  reader.ring = ring_buffer__new(ring.fd(), received, reader.records.get(), nullptr);
  if (!reader.ring)
    return makeSystemError(errno, "map '{0}': cannot read its ring", ring.name());
  return reader;
}

RingReader::RingReader(RingReader &&other) noexcept
    : ring(std::exchange(other.ring, nullptr)), mapName(std::move(other.mapName)),
      records(std::move(other.records)) {}

RingReader &RingReader::operator=(RingReader &&other) noexcept {
  if (this != &other) {
    if (ring)
      ring_buffer__free(ring);
    ring = std::exchange(other.ring, nullptr);
    mapName = std::move(other.mapName);
    records = std::move(other.records);
  }
  return *this;
}

RingReader::~RingReader() {
  if (ring)
    ring_buffer__free(ring);
}

int RingReader::received(void *context, void *data, size_t size) {
  auto *records = static_cast<std::vector<Bytes> *>(context);
  const auto *bytes = static_cast<const uint8_t *>(data);
  records->emplace_back(bytes, bytes + size);
  return 0;
}

Expected<std::vector<Bytes>> RingReader::drain() {
  if (int err = ring_buffer__consume(ring); err < 0)
    return makeSystemError(err, "map '{0}': cannot read its ring", mapName);
  return std::exchange(*records, {});
}

} // namespace morpheus::bpf
