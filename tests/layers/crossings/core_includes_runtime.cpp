// Planted crossing (tests/layers/CMakeLists.txt): links morpheus_core only.
#include "runtime/Optimizer.h"
