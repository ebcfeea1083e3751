// Maps defined the way libbpf before 1.0 and iproute2 took them: a struct
// of 32-bit fields in section "maps" (`struct bpf_map_def SEC("maps")`,
// iproute2's `struct bpf_elf_map`), and iproute2's tail-call sections that
// name them (a program in section "ID/KEY" goes in slot KEY of the program
// array whose `id` field is ID). libbpf 1.x refuses such objects ("legacy
// map definitions in 'maps' section are not supported", and it cannot
// place an "ID/KEY" section), so programs written for it (Suricata's XDP
// filters, older tc programs, Cilium's datapath, whose Go loader takes
// them as iproute2 did) would not load at all.
#pragma once

#include "support/Error.h"

#include <llvm/IR/Module.h>

#include <cstdint>
#include <optional>
#include <string>

namespace morpheus::bpf {

// iproute2's `pinning` values (its include/bpf_elf.h).
enum class Iproute2Pinning : uint32_t {
  None = 0,     // PIN_NONE
  ObjectNs = 1, // PIN_OBJECT_NS: <bpffs>/tc/<hash of the ELF file>/NAME
  GlobalNs = 2, // PIN_GLOBAL_NS: <bpffs>/tc/globals/NAME
};

// Where iproute2 pins a map by name, under the bpffs it works in
// (PIN_GLOBAL_NS); libbpf-mode iproute2 and Cilium's loader pin
// BTF-defined maps with `pinning = LIBBPF_PIN_BY_NAME` there too.
inline constexpr const char *Iproute2GlobalPins = "tc/globals";

// What converting an object's legacy definitions found.
struct LegacyMapFacts {
  // Whether a definition is iproute2's `struct bpf_elf_map`: the object was
  // written for iproute2's loader (or Cilium's), which pins every map by
  // name under <bpffs>/tc/globals (Iproute2GlobalPins), not <bpffs>.
  bool iproute2 = false;
};

// Rewrites every legacy map definition of `module` as the BTF-defined map
// libbpf 1.x takes: a global in ".maps" whose debug type has a member per
// field, each a pointer to an array of that many ints (what __uint()
// expands to), with the legacy global's name, linkage and every use. Both
// layouts start with the same five fields (type, key size, value size,
// max entries, flags), converted as they are. Of iproute2's (told by its
// debug type's member names `id` and `pinning`):
// - `id` names the map for "ID/KEY" sections: each such program becomes
//   the array's static slot KEY (a `values` initializer, as
//   `__array(values, ...)` gives a BTF map, so every load places it as it
//   places any static slot), and keeps its "ID/KEY" section for
//   placeProgramSections to type;
// - `pinning` PIN_GLOBAL_NS becomes `pinning = LIBBPF_PIN_BY_NAME`, which
//   the loader roots under Iproute2GlobalPins for such objects; PIN_NONE
//   and any value iproute2 has no built-in meaning for (it looks those up
//   in /etc/iproute2/bpf_pinning and, absent there, pins nothing; Cilium's
//   CILIUM_PIN_REPLACE asks for a fresh map at each load) pin nothing;
//   PIN_OBJECT_NS is refused: its directory is a hash of the ELF file
//   iproute2 was handed, which Morpheus, building from source, has not.
// Any other later field set (an inner map index or id) is refused naming
// the map and the field, since the BTF form states those otherwise and
// guessing would change what the program's loader meant; so is an "ID/KEY"
// section whose ID no map has, whose KEY is beyond the array, or a slot
// two sections name. Needs the module's debug info (clang -g): the BTF is
// generated from it.
Expected<LegacyMapFacts> convertLegacyMaps(llvm::Module &module, const std::string &path);

// Whether `section` is an iproute2 tail-call section ("ID/KEY", each a
// decimal or 0x-prefixed hexadecimal number), and its two numbers.
struct TailCallSection {
  uint32_t mapId = 0, slot = 0;
};
std::optional<TailCallSection> tailCallSection(llvm::StringRef section);

} // namespace morpheus::bpf
