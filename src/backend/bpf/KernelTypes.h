// The types the kernel holds of loaded maps (their BTF), read for the
// integer fields of keys and values: generated keys and values then get
// meaningful numbers in whole fields, and sample packets carry a key's
// fields (runtime/PacketSamples, runtime/MapStates).
#pragma once

#include <cstdint>
#include <map>
#include <vector>

struct btf;

namespace morpheus::bpf {

// An integer field of a key or value: byte offset and width.
struct IntegerField {
  uint32_t offset, width;
};

// The kernel's BTF objects, each loaded once by id (the maps of one object
// share one) and freed with this.
class KernelTypes {
public:
  KernelTypes() = default;
  KernelTypes(const KernelTypes &) = delete;
  KernelTypes &operator=(const KernelTypes &) = delete;
  ~KernelTypes();

  // The integer members of type `typeId` of BTF object `btfId`, flattened
  // (structs; a union's first member; arrays up to 64 elements; no
  // bitfields); none when that BTF cannot be read.
  std::vector<IntegerField> integerFields(uint32_t btfId, uint32_t typeId);

private:
  std::map<uint32_t, btf *> loaded;
};

} // namespace morpheus::bpf
