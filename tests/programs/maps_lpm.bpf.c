// SPDX-License-Identifier: GPL-2.0
// lpm maps alone (see maps_features.h).
#define MAPS_WITH_LPM
#include "maps_features.h"
