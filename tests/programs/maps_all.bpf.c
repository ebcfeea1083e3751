// SPDX-License-Identifier: GPL-2.0
// Every kind of map a program can write, in one program (see maps_features.h).
#define MAPS_WITH_HASH
#define MAPS_WITH_ARRAY
#define MAPS_WITH_PERCPU
#define MAPS_WITH_LRU
#define MAPS_WITH_LPM
#define MAPS_WITH_RINGBUF
#define MAPS_WITH_PERF
#define MAPS_WITH_QUEUE
#define MAPS_WITH_IN_MAP
#define MAPS_WITH_DEVMAP
#define MAPS_WITH_STORAGE
#define MAPS_WITH_GLOBALS
#define MAPS_WITH_PINNED
#define MAPS_WITH_PROG_ARRAY
#include "maps_features.h"
