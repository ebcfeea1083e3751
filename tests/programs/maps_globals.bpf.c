// SPDX-License-Identifier: GPL-2.0
// globals maps alone (see maps_features.h).
#define MAPS_WITH_GLOBALS
#include "maps_features.h"
