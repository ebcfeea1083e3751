// SPDX-License-Identifier: GPL-2.0
// in_map maps alone (see maps_features.h).
#define MAPS_WITH_IN_MAP
#include "maps_features.h"
