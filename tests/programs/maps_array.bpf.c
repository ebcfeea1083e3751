// SPDX-License-Identifier: GPL-2.0
// array maps alone (see maps_features.h).
#define MAPS_WITH_ARRAY
#include "maps_features.h"
