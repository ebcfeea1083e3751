/* The C client API used from C, as a control plane written in C would. */
#include "client/morpheus_client.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

/* Updates `pin` with key/value and returns 0, or prints why and returns 1. */
int morpheus_client_c_smoke(const char *pin, const void *key, size_t key_size,
			    const void *value, size_t value_size)
{
	struct morpheus_map *map = NULL;
	int err = morpheus_map_open(pin, &map);

	if (err) {
		fprintf(stderr, "open: %s\n", morpheus_last_error());
		return 1;
	}
	if (!morpheus_map_guarded(map)) {
		fprintf(stderr, "no guard beside %s\n", pin);
		morpheus_map_close(map);
		return 1;
	}
	/* A wrong key size must fail cleanly with -EINVAL and a message. */
	err = morpheus_map_update(map, key, key_size - 1, value, value_size, 0);
	if (err != -EINVAL || !strstr(morpheus_last_error(), "key has")) {
		fprintf(stderr, "bad size accepted: %d %s\n", err, morpheus_last_error());
		morpheus_map_close(map);
		return 1;
	}
	err = morpheus_map_update(map, key, key_size, value, value_size, 0);
	morpheus_map_close(map);
	if (err)
		fprintf(stderr, "update: %s\n", morpheus_last_error());
	return err ? 1 : 0;
}
