// Program-array slots an object sets statically (backend/bpf/StaticSlots)
// and map layouts compared field by field (backend/bpf/BpfObject): both
// without a kernel.
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/ProgramSpec.h"

#include <gtest/gtest.h>
#include <algorithm>
#include <llvm/Testing/Support/Error.h>
#include <linux/bpf.h>
#include <llvm/Object/ObjectFile.h>

namespace morpheus::bpf {
namespace {

std::string sourcePath(const std::string &relative) {
  return std::string(MORPHEUS_SOURCE_DIR) + "/" + relative;
}

// The functions an ELF's relocations against `.maps` name: what libbpf
// writes into program arrays at load.
std::vector<std::string> slotRelocations(const std::vector<char> &elf) {
  auto object = llvm::object::ObjectFile::createObjectFile(
      llvm::MemoryBufferRef(llvm::StringRef(elf.data(), elf.size()), "elf"));
  EXPECT_THAT_EXPECTED(object, llvm::Succeeded());
  std::vector<std::string> names;
  for (const llvm::object::SectionRef &section : (*object)->sections()) {
    auto target = section.getRelocatedSection();
    if (!target || *target == (*object)->section_end())
      continue;
    llvm::Expected<llvm::StringRef> name = (*target)->getName();
    if (!name || *name != ".maps")
      continue;
    for (const llvm::object::RelocationRef &relocation : section.relocations())
      if (auto symbol = relocation.getSymbol()->getName())
        names.push_back(symbol->str());
  }
  return names;
}

// The original is built once, without its static slots, for every load of
// it: the live load writes them itself (Optimizer::load; the kernel tests
// Copies.TrafficCountsThroughTheStaticSlotAfterCycles and CompositePrograms'
// read them back from the live arrays), copies never do.
TEST(StaticSlots, OnlyOfflineBuildsCarryThem) {
  auto spec = ProgramSpec::load(sourcePath("tests/programs/maps_prog_array.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  ProgramSlots expected = {{"stages", {{0, "stage2"}}}};
  EXPECT_EQ((*spec)->staticProgramSlots(), expected);
  EXPECT_TRUE(slotRelocations((*spec)->originalElf()).empty())
      << "no load of the original may have libbpf write the live array's slots";

  core::TableSnapshot empty;
  SpecializeRequest request;
  request.guardVersion = 7;
  auto guarded = (*spec)->specialize(empty, request);
  ASSERT_THAT_EXPECTED(guarded, llvm::Succeeded());
  EXPECT_TRUE(slotRelocations(guarded->elf).empty())
      << "a version sharing the live program array must not rewrite its slots";
  request.guardVersion.reset();
  auto offline = (*spec)->specialize(empty, request);
  ASSERT_THAT_EXPECTED(offline, llvm::Succeeded());
  EXPECT_EQ(slotRelocations(offline->elf), std::vector<std::string>{"stage2"})
      << "an unguarded build is a program of its own";
  request.sharesLiveMaps = true;
  auto twin = (*spec)->specialize(empty, request);
  ASSERT_THAT_EXPECTED(twin, llvm::Succeeded());
  EXPECT_TRUE(slotRelocations(twin->elf).empty())
      << "an unguarded twin loaded beside the live version shares its program array";
}

// iproute2's tail-call sections ("ID/KEY", tests/programs/
// iproute2_tail_calls.bpf.c) are static slots of the legacy array of that
// id like any other: the original's object carries none, an offline build
// carries both (a static program among them, made global so libbpf takes
// it), and each program gets the type of the object's XDP entry.
TEST(StaticSlots, Iproute2TailCallSectionsAreStaticSlotsOfTheArrayOfTheirId) {
  auto spec = ProgramSpec::load(sourcePath("tests/programs/iproute2_tail_calls.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  ProgramSlots expected = {{"iproute2_calls", {{1, "stage_one"}, {0x10, "stage_two"}}}};
  EXPECT_EQ((*spec)->staticProgramSlots(), expected);
  EXPECT_TRUE(slotRelocations((*spec)->originalElf()).empty());
  EXPECT_EQ((*spec)->programType("stage_two"), ProgramType::Xdp);
  EXPECT_EQ((*spec)->pinsByNameUnder("/sys/fs/bpf/x"), "/sys/fs/bpf/x/tc/globals");
  EXPECT_EQ((*spec)->pinsByNameUnder(""), "/sys/fs/bpf/tc/globals");
  EXPECT_TRUE((*spec)->tailCalls()) << "a tail call in inline assembly counts";
  core::TableSnapshot empty;
  SpecializeRequest request;
  auto offline = (*spec)->specialize(empty, request);
  ASSERT_THAT_EXPECTED(offline, llvm::Succeeded());
  std::vector<std::string> slots = slotRelocations(offline->elf);
  std::sort(slots.begin(), slots.end());
  EXPECT_EQ(slots, (std::vector<std::string>{"stage_one", "stage_two"}));

  // An object of libbpf's own keeps libbpf's pin root.
  auto plain = ProgramSpec::load(sourcePath("tests/programs/maps_prog_array.bpf.c"), {});
  ASSERT_THAT_EXPECTED(plain, llvm::Succeeded());
  EXPECT_EQ((*plain)->pinsByNameUnder("/sys/fs/bpf/x"), "/sys/fs/bpf/x");
}

// bpf_skb_store_bytes only reads what it copies into the packet: a TC
// program that writes a backend's address from a table into the packet
// (as Cilium's lb4 DNAT does) leaves the table read-only.
TEST(HelperSignatures, StoringATablesBytesIntoThePacketOnlyReadsThem) {
  auto spec = ProgramSpec::load(sourcePath("tests/programs/tc_store_bytes.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  EXPECT_TRUE((*spec)->analysis().isReadOnly("backends"));
}

TEST(StaticSlots, MapsOfMapsInitializersAreNotProgramSlots) {
  auto spec = ProgramSpec::load(sourcePath("tests/programs/maps_in_map.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  EXPECT_TRUE((*spec)->staticProgramSlots().empty());
  // libbpf writes an outer map's static slots only into an outer map it
  // creates, never into one a load re-uses: they stay.
  EXPECT_EQ(slotRelocations((*spec)->originalElf()),
            std::vector<std::string>{"fixed_counts"});
}

MapLayout layout(uint32_t type, uint32_t key, uint32_t value, uint32_t entries,
                 uint32_t flags = 0) {
  MapLayout map;
  map.name = "m";
  map.type = type;
  map.keySize = key;
  map.valueSize = value;
  map.maxEntries = entries;
  map.flags = flags;
  return map;
}

TEST(MapLayouts, EveryDifferingFieldIsNamed) {
  MapLayout declared = layout(BPF_MAP_TYPE_HASH, 8, 16, 1024);
  EXPECT_TRUE(layoutDifferences(declared, declared).empty());
  std::vector<MapFieldDifference> differences =
      layoutDifferences(declared, layout(BPF_MAP_TYPE_LRU_HASH, 4, 16, 8, BPF_F_NO_PREALLOC));
  EXPECT_EQ(differences, (std::vector<MapFieldDifference>{
                             {MapField::Type, false, BPF_MAP_TYPE_HASH, BPF_MAP_TYPE_LRU_HASH},
                             {MapField::KeySize, false, 8, 4},
                             {MapField::MaxEntries, false, 1024, 8},
                             {MapField::Flags, false, 0, BPF_F_NO_PREALLOC}}));
  EXPECT_EQ(describeDifferences(differences),
            "type: declared hash, the map is lru_hash; key size: declared 8, the map has 4; "
            "max_entries: declared 1024, the map has 8; flags: declared 0x0, the map has 0x1");
  // A window of a large map stands in for it in copies.
  EXPECT_TRUE(layoutDifferences(declared, layout(BPF_MAP_TYPE_HASH, 8, 16, 300), false).empty());
  // A perf event array declared without a size gets one slot per CPU.
  EXPECT_TRUE(layoutDifferences(layout(BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4, 0),
                                layout(BPF_MAP_TYPE_PERF_EVENT_ARRAY, 4, 4, 2))
                  .empty());
}

// The inner map's fields follow the outer map's, said once as the inner
// map's; the error keeps them as data beside the message.
TEST(MapLayouts, AnIncompatibleMapNamesTheOuterAndTheInnerFields) {
  std::vector<MapFieldDifference> differences = {{MapField::MaxEntries, false, 64, 128},
                                                 {MapField::ValueSize, true, 8, 4},
                                                 {MapField::MapExtra, true, 0, 3}};
  llvm::Error err = withContext(
      llvm::make_error<IncompatibleMap>("fw", "rules", "the existing map", differences),
      "fw.bpf.c");
  ASSERT_TRUE(err.isA<IncompatibleMap>());
  std::string message;
  llvm::handleAllErrors(std::move(err), [&](const IncompatibleMap &incompatible) {
    EXPECT_EQ(incompatible.map(), "rules");
    EXPECT_EQ(incompatible.differences(), differences);
    message = incompatible.message();
  });
  EXPECT_EQ(message,
            "fw.bpf.c: object 'fw': map 'rules': cannot use the existing map: max_entries: "
            "declared 64, the map has 128; inner map: value size: declared 8, the map has 4; "
            "map_extra: declared 0, the map has 3");
}

} // namespace
} // namespace morpheus::bpf
