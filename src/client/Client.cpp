// The C client API over MapUpdater; errors become negative errno values and
// a thread-local message.
#include "client/morpheus_client.h"

#include "backend/bpf/MapUpdater.h"

#include <cerrno>
#include <string>

using namespace morpheus;

struct morpheus_map {
  bpf::MapUpdater updater;
};

namespace {

thread_local std::string lastError;

int report(llvm::Error err) {
  if (!err)
    return 0;
  int code = EINVAL;
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &info) {
    lastError = info.message();
    if (std::error_code ec = info.convertToErrorCode())
      code = ec.value();
  });
  return -code;
}

core::Bytes bytes(const void *data, size_t size) {
  const auto *raw = static_cast<const uint8_t *>(data);
  return core::Bytes(raw, raw + size);
}

} // namespace

extern "C" {

int morpheus_map_open(const char *pin_path, morpheus_map **map) {
  if (!pin_path || !map)
    return report(makeError("morpheus_map_open: null argument"));
  auto updater = bpf::MapUpdater::open(pin_path);
  if (!updater)
    return report(updater.takeError());
  *map = new morpheus_map{std::move(*updater)};
  return 0;
}

void morpheus_map_close(morpheus_map *map) { delete map; }

int morpheus_map_update(morpheus_map *map, const void *key, size_t key_size,
                        const void *value, size_t value_size, uint64_t flags) {
  if (!map || !key || !value)
    return report(makeError("morpheus_map_update: null argument"));
  return report(
      map->updater.update(bytes(key, key_size), bytes(value, value_size), flags));
}

int morpheus_map_delete(morpheus_map *map, const void *key, size_t key_size) {
  if (!map || !key)
    return report(makeError("morpheus_map_delete: null argument"));
  return report(map->updater.remove(bytes(key, key_size)));
}

int morpheus_map_guarded(const morpheus_map *map) {
  return map && map->updater.guarded() ? 1 : 0;
}

const char *morpheus_last_error(void) { return lastError.c_str(); }

} // extern "C"
