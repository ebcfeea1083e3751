// Planted crossing (tests/layers/CMakeLists.txt): links morpheus_user only.
#include "backend/bpf/MapTypes.h"
