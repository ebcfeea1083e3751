/* The C client API: change a map that Morpheus manages so that the very next
 * packet sees the change (the guard pinned beside the map is bumped around
 * the write). For C control planes; it sits on the C++ client library
 * (client/Map.h, client/Transaction.h), which C++ control planes use
 * directly and which adds typed reads, key walks and all-or-nothing
 * batches.
 *
 * Every function returns 0 on success or a negative errno; on failure
 * morpheus_last_error() describes what went wrong, naming the map. */
#ifndef MORPHEUS_CLIENT_H
#define MORPHEUS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

struct morpheus_map;

/* Opens the map pinned at `pin_path` (e.g. /sys/fs/bpf/morpheus/prog/policy). */
int morpheus_map_open(const char *pin_path, struct morpheus_map **map);
void morpheus_map_close(struct morpheus_map *map);

/* `flags` as for bpf_map_update_elem (0 = BPF_ANY). For per-CPU maps the
 * value is written to every CPU. Sizes must match the map's. */
int morpheus_map_update(struct morpheus_map *map, const void *key, size_t key_size,
			const void *value, size_t value_size, uint64_t flags);
int morpheus_map_delete(struct morpheus_map *map, const void *key, size_t key_size);

/* Whether a Morpheus guard sits beside the map (1) or not (0). */
int morpheus_map_guarded(const struct morpheus_map *map);

/* The message of this thread's last failed call. */
const char *morpheus_last_error(void);

#ifdef __cplusplus
}
#endif

#endif /* MORPHEUS_CLIENT_H */
