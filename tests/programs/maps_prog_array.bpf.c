// SPDX-License-Identifier: GPL-2.0
// prog_array maps alone (see maps_features.h).
#define MAPS_WITH_PROG_ARRAY
#include "maps_features.h"
