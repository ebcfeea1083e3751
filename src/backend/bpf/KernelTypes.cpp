#include "backend/bpf/KernelTypes.h"

#include <bpf/btf.h>

#include <algorithm>

namespace morpheus::bpf {

namespace {

void collectIntegers(const btf *types, uint32_t id, uint32_t offset,
                     std::vector<IntegerField> &fields, int depth) {
  if (!types || depth > 8)
    return;
  int resolved = btf__resolve_type(types, id);
  if (resolved < 0)
    return;
  const btf_type *type = btf__type_by_id(types, resolved);
  if (!type)
    return;
  if (btf_is_int(type) || btf_is_enum(type) || btf_is_enum64(type)) {
    if (type->size <= 8)
      fields.push_back({offset, type->size});
  } else if (btf_is_composite(type)) {
    const btf_member *member = btf_members(type);
    // A union's members overlap; filling the first is enough.
    int count = btf_is_union(type) ? std::min<int>(1, btf_vlen(type)) : btf_vlen(type);
    for (int i = 0; i < count; ++i)
      if (!btf_member_bitfield_size(type, i))
        collectIntegers(types, member[i].type, offset + btf_member_bit_offset(type, i) / 8,
                        fields, depth + 1);
  } else if (btf_is_array(type)) {
    const struct btf_array *array = btf_array(type);
    long elementSize = btf__resolve_size(types, array->type);
    for (uint32_t i = 0; elementSize > 0 && i < std::min<uint32_t>(array->nelems, 64); ++i)
      collectIntegers(types, array->type, offset + i * elementSize, fields, depth + 1);
  }
}

} // namespace

KernelTypes::~KernelTypes() {
  for (const auto &[id, types] : loaded)
    btf__free(types);
}

std::vector<IntegerField> KernelTypes::integerFields(uint32_t btfId, uint32_t typeId) {
  auto [cached, added] = loaded.emplace(btfId, nullptr);
  if (added)
    cached->second = btf__load_from_kernel_by_id(btfId);
  std::vector<IntegerField> fields;
  collectIntegers(cached->second, typeId, 0, fields, 0);
  return fields;
}

} // namespace morpheus::bpf
