// The C client API over the C++ client library (client/Map.h); errors
// become negative errno values and a thread-local message.
#include "client/morpheus_client.h"

#include "client/Map.h"

#include <cerrno>
#include <string>

using namespace morpheus;

struct morpheus_map {
  client::Map map;
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

Bytes bytes(const void *data, size_t size) {
  const auto *raw = static_cast<const uint8_t *>(data);
  return Bytes(raw, raw + size);
}

} // namespace

extern "C" {

int morpheus_map_open(const char *pin_path, morpheus_map **map) {
  if (!pin_path || !map)
    return report(makeError("morpheus_map_open: null argument"));
  auto opened = client::Map::open(pin_path);
  if (!opened)
    return report(opened.takeError());
  *map = new morpheus_map{std::move(*opened)};
  return 0;
}

void morpheus_map_close(morpheus_map *map) { delete map; }

int morpheus_map_update(morpheus_map *map, const void *key, size_t key_size,
                        const void *value, size_t value_size, uint64_t flags) {
  if (!map || !key || !value)
    return report(makeError("morpheus_map_update: null argument"));
  return report(map->map.update(bytes(key, key_size), bytes(value, value_size), flags));
}

int morpheus_map_delete(morpheus_map *map, const void *key, size_t key_size) {
  if (!map || !key)
    return report(makeError("morpheus_map_delete: null argument"));
  return report(map->map.remove(bytes(key, key_size)));
}

int morpheus_map_guarded(const morpheus_map *map) {
  return map && map->map.guarded() ? 1 : 0;
}

const char *morpheus_last_error(void) { return lastError.c_str(); }

} // extern "C"
