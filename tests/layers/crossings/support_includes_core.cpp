// Planted crossing (tests/layers/CMakeLists.txt): links morpheus_support only.
#include "core/Tables.h"
