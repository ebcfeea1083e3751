// SPDX-License-Identifier: GPL-2.0
// devmap maps alone (see maps_features.h).
#define MAPS_WITH_DEVMAP
#include "maps_features.h"
