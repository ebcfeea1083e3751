// SPDX-License-Identifier: GPL-2.0
// ringbuf maps alone (see maps_features.h).
#define MAPS_WITH_RINGBUF
#include "maps_features.h"
