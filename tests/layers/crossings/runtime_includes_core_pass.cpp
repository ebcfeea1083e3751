// Planted crossing (tests/layers/CMakeLists.txt): links morpheus_runtime,
// which sees the core's API but not its passes.
#include "core/passes/TableRewriting.h"
