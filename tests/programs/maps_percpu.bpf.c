// SPDX-License-Identifier: GPL-2.0
// percpu maps alone (see maps_features.h).
#define MAPS_WITH_PERCPU
#include "maps_features.h"
