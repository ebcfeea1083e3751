// SPDX-License-Identifier: GPL-2.0
// pinned maps alone (see maps_features.h).
#define MAPS_WITH_PINNED
#include "maps_features.h"
