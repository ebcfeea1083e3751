// SPDX-License-Identifier: GPL-2.0
// hash maps alone (see maps_features.h).
#define MAPS_WITH_HASH
#include "maps_features.h"
