// SPDX-License-Identifier: GPL-2.0
// perf maps alone (see maps_features.h).
#define MAPS_WITH_PERF
#include "maps_features.h"
