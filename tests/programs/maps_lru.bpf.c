// SPDX-License-Identifier: GPL-2.0
// lru maps alone (see maps_features.h).
#define MAPS_WITH_LRU
#include "maps_features.h"
