// SPDX-License-Identifier: GPL-2.0
// storage maps alone (see maps_features.h).
#define MAPS_WITH_STORAGE
#include "maps_features.h"
