#include "client/Map.h"

#include "backend/bpf/MapAccess.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/MapUpdater.h"

#include <linux/bpf.h>

#include <cstring>

#include <set>

namespace morpheus::client {

Expected<Map> Map::open(const std::string &pinPath) {
  auto updater = bpf::MapUpdater::open(pinPath);
  if (!updater)
    return updater.takeError();
  Map map;
  map.entryLimit = updater->maxEntries();
  map.updater = std::make_unique<bpf::MapUpdater>(std::move(*updater));
  return map;
}

Map::Map(Map &&other) noexcept = default;
Map &Map::operator=(Map &&other) noexcept = default;
Map::~Map() = default;

const std::string &Map::name() const { return updater->name(); }
int Map::fd() const { return updater->fd(); }
uint32_t Map::keySize() const { return updater->keySize(); }
uint32_t Map::valueSize() const { return updater->valueSize(); }
bool Map::perCpu() const { return updater->perCpu(); }
bool Map::guarded() const { return updater->guarded(); }
const std::string &Map::guardHolder() const { return updater->guardHolder(); }

Error Map::updateBytes(const Bytes &key, const Bytes &value, uint64_t flags) {
  return updater->update(key, value, flags);
}

Error Map::removeBytes(const Bytes &key) { return updater->remove(key); }

size_t Map::perCpuStride() const { return (valueSize() + 7) & ~size_t(7); }

Error Map::checkKey(size_t size) const {
  if (size != keySize())
    return makeError("map '{0}': keys have {1} bytes, not {2}", name(), keySize(), size);
  return Error::success();
}

Error Map::checkValue(size_t size, bool perCpuWanted) const {
  if (size != valueSize())
    return makeError("map '{0}': values have {1} bytes, not {2}", name(), valueSize(), size);
  if (perCpuWanted != perCpu())
    return makeError(perCpu() ? "map '{0}': a per-CPU map, read each CPU's value"
                              : "map '{0}': not a per-CPU map",
                     name());
  return Error::success();
}

Error Map::missing(const Bytes &key) const {
  return makeError("map '{0}': no entry for key {1}", name(), toHex(key));
}

Expected<std::optional<Bytes>> Map::lookupBytes(const Bytes &key) const {
  if (Error err = checkKey(key.size()))
    return err;
  Bytes value(perCpu() ? perCpuStride() * bpf::possibleCpus() : valueSize());
  auto found = bpf::MapAccess(fd(), name()).lookup(key, value);
  if (!found)
    return found.takeError();
  if (!*found)
    return std::nullopt;
  return value;
}

Expected<uint64_t> Map::sumOverCpus(uint32_t index) const {
  auto values = eachCpu<uint64_t>(index);
  if (!values)
    return values.takeError();
  uint64_t sum = 0;
  for (uint64_t value : *values)
    sum += value;
  return sum;
}

Expected<Bytes> Map::slotBytes(uint32_t first, uint32_t count) const {
  if (Error err = checkKey(sizeof(uint32_t)))
    return err;
  Bytes values(size_t(count) * valueSize());
  auto done = bpf::MapAccess(fd(), name())
                  .forEachSlot(first, count, valueSize(),
                               [&](uint32_t index, const uint8_t *row) {
                                 std::memcpy(values.data() + size_t(index - first) * valueSize(),
                                             row, valueSize());
                                 return true;
                               });
  if (!done)
    return done.takeError();
  if (*done < count)
    return makeError("map '{0}': slots {1}..{2} are beyond its end", name(), first,
                     first + count - 1);
  return values;
}

Error Map::forEachKey(llvm::function_ref<bool(const Bytes &)> visit) const {
  return bpf::forEachKey(fd(), keySize(), name(), visit);
}

Expected<std::vector<std::pair<Bytes, Bytes>>> Map::entries() const {
  std::vector<std::pair<Bytes, Bytes>> found;
  std::set<Bytes> seen; // a walk restarted by a concurrent delete repeats keys
  std::optional<Error> failed;
  Error walk = forEachKey([&](const Bytes &key) {
    if (!seen.insert(key).second)
      return true;
    auto value = lookupBytes(key);
    if (!value) {
      failed.emplace(value.takeError());
      return false;
    }
    if (*value) // deleted since the walk listed it: gone
      found.emplace_back(key, std::move(**value));
    return true;
  });
  if (failed) {
    llvm::consumeError(std::move(walk));
    return std::move(*failed);
  }
  if (walk)
    return walk;
  return found;
}

} // namespace morpheus::client
