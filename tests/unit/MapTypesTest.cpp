// Map type names without libbpf (backend/bpf/MapTypes, for morpheus-opt)
// must be libbpf's own, since both appear in reports and errors.
#include "backend/bpf/MapTypes.h"

#include <bpf/libbpf.h>
#include <gtest/gtest.h>

namespace morpheus::bpf {
namespace {

TEST(MapTypes, NamesAreLibbpfs) {
  for (unsigned type = 0; type < 256; ++type) {
    const char *libbpfName = libbpf_bpf_map_type_str(static_cast<bpf_map_type>(type));
    std::string expected = libbpfName ? libbpfName : "type " + std::to_string(type);
    EXPECT_EQ(mapTypeName(type), expected) << "map type " << type;
    if (libbpfName) {
      EXPECT_EQ(mapTypeNamed(libbpfName), type) << libbpfName;
    }
  }
  EXPECT_EQ(mapTypeNamed("no_such_type"), std::nullopt);
}

} // namespace
} // namespace morpheus::bpf
