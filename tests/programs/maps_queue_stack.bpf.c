// SPDX-License-Identifier: GPL-2.0
// queue and stack maps alone (see maps_features.h).
#define MAPS_WITH_QUEUE
#include "maps_features.h"
