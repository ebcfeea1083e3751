// Planted crossing (tests/layers/CMakeLists.txt): links morpheus_client only,
// which links the backend PRIVATE.
#include "backend/bpf/MapIO.h"
