// The machinery behind copies (runtime/ScratchMaps, runtime/VersionComparison,
// LoadedObject's pins by name) on the real kernel: copies mirror the live
// state and share none of it; the three-way comparison sees a difference in
// every kind of map it compares; only the live load honours pins by name.
#include "KernelSupport.h"
#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/MapIO.h"
#include "runtime/Optimizer.h"
#include "runtime/ScratchMaps.h"
#include "runtime/VersionComparison.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <arpa/inet.h>
#include <linux/bpf.h>
#include <unistd.h>

#include <set>

namespace morpheus::testing {
namespace {

Bytes u32Bytes(uint32_t value) {
  Bytes bytes(4);
  std::memcpy(bytes.data(), &value, 4);
  return bytes;
}

std::string programNameOf(uint32_t id) {
  int fd = bpf_prog_get_fd_by_id(id);
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(fd, &info, &length), 0);
  close(fd);
  return info.name;
}

// A slot's content: a program or map id, or 0 when empty.
uint32_t slot(int fd, uint32_t index) {
  uint32_t id = 0;
  return bpf_map_lookup_elem(fd, &index, &id) == 0 ? id : 0;
}

std::unique_ptr<runtime::Optimizer> liveProgram(const std::string &program, const PinDir &root) {
  runtime::OptimizerOptions options;
  options.program = "entry";
  options.pinRoot = root.path();
  auto created =
      runtime::Optimizer::create(sourcePath("tests/programs/" + program + ".bpf.c"), options);
  EXPECT_THAT_EXPECTED(created, llvm::Succeeded());
  return created ? std::move(*created) : nullptr;
}

TEST(ScratchMaps, CopiesMirrorTheLiveStateAndShareNone) {
  PinDir root("scratch");
  auto live = liveProgram("maps_all", root);
  ASSERT_TRUE(live);
  // A loader's state: hash entries beyond the window, inner maps (one of
  // them in two slots), a device.
  int flows = live->mapFd("per_destination");
  for (uint32_t key = 1; key <= 10; ++key) {
    uint64_t value = key * 100;
    ASSERT_EQ(bpf_map_update_elem(flows, &key, &value, BPF_ANY), 0);
  }
  int inner = bpf_map_create(BPF_MAP_TYPE_ARRAY, "inner_counts", 4, 8, 4, nullptr);
  ASSERT_GE(inner, 0);
  uint32_t zero = 0;
  uint64_t held = 42;
  ASSERT_EQ(bpf_map_update_elem(inner, &zero, &held, BPF_ANY), 0);
  int outer = live->mapFd("by_slot");
  for (uint32_t index : {0u, 1u})
    ASSERT_EQ(bpf_map_update_elem(outer, &index, &inner, BPF_ANY), 0);
  bpf_devmap_val port = {};
  port.ifindex = 1;
  ASSERT_EQ(bpf_map_update_elem(live->mapFd("ports"), &zero, &port, BPF_ANY), 0);

  std::map<std::string, int> liveMaps;
  const std::vector<std::string> names = {"per_destination", "by_slot", "by_destination",
                                          "fixed_counts", "ports", "cpus", "stages", "events",
                                          "samples", "pending", "per_task", "pinned_flows",
                                          "stage_counts", "config"};
  for (const std::string &name : names)
    liveMaps[name] = live->mapFd(name);
  runtime::CopySizing sizing;
  sizing.window = 3;
  sizing.keys["per_destination"] = {u32Bytes(9)};
  auto image = runtime::MapImage::read(
      runtime::LiveMaps{liveMaps, {{"stages", {{0, "stage2"}}}}},
      cantFail(bpf::readMapLayouts(live->spec().originalElf(),
                                   live->spec().objectName())),
      sizing);
  ASSERT_THAT_EXPECTED(image, llvm::Succeeded());
  auto copies = runtime::ScratchMaps::create(*image);
  ASSERT_THAT_EXPECTED(copies, llvm::Succeeded());
  const std::map<std::string, int> &byName = (*copies)->byName();
  for (const std::string &name : names) {
    ASSERT_TRUE(byName.count(name)) << name;
    EXPECT_NE(mapIdOf(byName.at(name)), mapIdOf(liveMaps[name])) << name << " is shared";
  }

  // A window: the first three live entries, plus the key asked for.
  std::set<Bytes> expected = {u32Bytes(9)}, keys;
  int walked = 0;
  ASSERT_FALSE(bool(bpf::forEachKey(flows, 4, "flows", [&](const Bytes &key) {
    expected.insert(key);
    return ++walked < 3;
  })));
  ASSERT_FALSE(bool(bpf::forEachKey(byName.at("per_destination"), 4, "per_destination",
                                    [&](const Bytes &key) {
                                      keys.insert(key);
                                      return true;
                                    })));
  EXPECT_EQ(keys, expected);

  // Inner maps: copies with the same contents, one copy for one live map.
  uint32_t first = slot(byName.at("by_slot"), 0), second = slot(byName.at("by_slot"), 1);
  ASSERT_NE(first, 0u);
  EXPECT_NE(first, mapIdOf(inner)) << "the live inner map is shared";
  EXPECT_EQ(first, second) << "one live inner map, one copy";
  int copyOfInner = bpf_map_get_fd_by_id(first);
  uint64_t copied = 0;
  EXPECT_EQ(bpf_map_lookup_elem(copyOfInner, &zero, &copied), 0);
  EXPECT_EQ(copied, 42u);
  close(copyOfInner);
  // The statically set slot 3 holds the copy of fixed_counts, as live.
  EXPECT_EQ(slot(byName.at("by_slot"), 3), mapIdOf(byName.at("fixed_counts")));

  // Devices: the interface, without a program.
  bpf_devmap_val device = {};
  EXPECT_EQ(bpf_map_lookup_elem(byName.at("ports"), &zero, &device), 0);
  EXPECT_EQ(device.ifindex, 1u);
  EXPECT_EQ(device.bpf_prog.id, 0u);

  // Program arrays: empty until a version binds them to its own programs.
  EXPECT_EQ(slot(byName.at("stages"), 0), 0u);
  bpf::LoadOptions load;
  load.maps = byName;
  load.windowedCopies = true;
  auto copy = bpf::LoadedObject::load(live->spec().originalElf(),
                                      live->spec().objectName(), load);
  ASSERT_THAT_EXPECTED(copy, llvm::Succeeded());
  EXPECT_EQ(slot(byName.at("stages"), 0), 0u) << "libbpf wrote a static slot into a copy";
  ASSERT_FALSE(bool((*copies)->bindProgramSlots(*copy)));
  EXPECT_EQ(slot(byName.at("stages"), 0), programIdOf(copy->programFd("stage2")));
  uint32_t liveStage2 = slot(live->mapFd("stages"), 0);
  EXPECT_EQ(programNameOf(liveStage2), "stage2");
  EXPECT_NE(liveStage2, slot(byName.at("stages"), 0)) << "the live slot moved";
}

// One kind of map per program (tests/programs): a version built with
// MAPS_WRONG_SALT writes other values into it, which the comparison of the
// maps after one packet must name; the original itself passes.
struct WrongWrite {
  const char *program, *map;
};

class VersionComparisonOfOneKind : public ::testing::TestWithParam<WrongWrite> {};

TEST_P(VersionComparisonOfOneKind, SeesADifferenceInTheMapAndNoneWithoutOne) {
  std::string source = sourcePath(std::string("tests/programs/") + GetParam().program + ".bpf.c");
  auto spec = bpf::ProgramSpec::load(source, {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  auto wrong = bpf::ProgramSpec::load(source, {.cflags = {"-DMAPS_WRONG_SALT"}});
  ASSERT_THAT_EXPECTED(wrong, llvm::Succeeded());
  // Pristine maps, as the fuzzer starts from.
  auto reference = bpf::LoadedObject::load((*spec)->originalElf(),
                                           (*spec)->objectName(), {});
  ASSERT_THAT_EXPECTED(reference, llvm::Succeeded());
  uint32_t destination = 0x0700000a; // 10.0.0.7 as the packet carries it
  if (int outer = reference->mapFd("by_destination"); outer >= 0) {
    // An inner map for the packet's destination, as a loader sets one.
    int inner = bpf_map_create(BPF_MAP_TYPE_ARRAY, "inner_counts", 4, 8, 4, nullptr);
    ASSERT_GE(inner, 0);
    ASSERT_EQ(bpf_map_update_elem(outer, &destination, &inner, BPF_ANY), 0);
    close(inner);
  }
  auto comparison = runtime::VersionComparison::create(
      **spec, "entry", {reference->maps(), (*spec)->staticProgramSlots()}, {});
  ASSERT_THAT_EXPECTED(comparison, llvm::Succeeded());
  runtime::MapContents config = {{"config", {{u32Bytes(0), Bytes{1, 0, 0, 0, 5, 0, 0, 0}}}}};
  runtime::Step packet;
  packet.packet = buildPacket(PacketSpec{.daddr = ntohl(destination)});

  for (bool broken : {false, true}) {
    SCOPED_TRACE(broken ? "a version writing other values" : "the original as candidate");
    ASSERT_FALSE(bool((*comparison)->restore({})));
    ASSERT_FALSE(bool((*comparison)->write(config)));
    const bpf::ProgramSpec &candidate = broken ? **wrong : **spec;
    ASSERT_FALSE(bool((*comparison)->loadSpecialized(candidate.originalElf())));
    auto outcome = (*comparison)->run(packet, runtime::MapCheck::All, {});
    ASSERT_THAT_EXPECTED(outcome, llvm::Succeeded());
    EXPECT_EQ(outcome->observed[0].verdict, outcome->observed[2].verdict);
    if (!broken) {
      EXPECT_FALSE(outcome->difference) << *outcome->difference;
      continue;
    }
    ASSERT_TRUE(outcome->difference) << "no difference seen";
    EXPECT_NE(outcome->difference->find(std::string("map '") + GetParam().map + "'"),
              std::string::npos)
        << *outcome->difference;
  }
}

INSTANTIATE_TEST_SUITE_P(
    VersionComparison, VersionComparisonOfOneKind,
    ::testing::Values(WrongWrite{"maps_hash", "per_destination"},
                      WrongWrite{"maps_array", "by_quarter"},
                      WrongWrite{"maps_percpu", "cpu_totals"}, WrongWrite{"maps_lru", "cpu_recent"},
                      WrongWrite{"maps_lpm", "prefixes"}, WrongWrite{"maps_ringbuf", "events"},
                      WrongWrite{"maps_queue_stack", "pending"},
                      WrongWrite{"maps_in_map", "by_destination[0a 00 00 07]"},
                      WrongWrite{"maps_globals", "maps_glo.data"},
                      WrongWrite{"maps_pinned", "pinned_flows"}),
    [](const auto &info) { return std::string(info.param.program); });

// Pins by name: the live load re-uses a pinned map (taking its size) or
// creates and pins one; a pinned map of another layout is refused field by
// field; every other load neither opens nor makes pins.
TEST(PinByName, TheLiveLoadReusesAPinnedMapOfAnotherSize) {
  PinDir root("pinlive");
  int pinned = bpf_map_create(BPF_MAP_TYPE_ARRAY, "pinned_totals", 4, 8, 16, nullptr);
  ASSERT_GE(pinned, 0);
  ASSERT_EQ(bpf_obj_pin(pinned, (root.path() + "/pinned_totals").c_str()), 0);
  auto live = liveProgram("maps_pinned", root);
  ASSERT_TRUE(live);
  EXPECT_EQ(mapIdOf(live->mapFd("pinned_totals")), mapIdOf(pinned))
      << "the pinned map (16 entries where the program declares 4) is the live one";
  // The other map had no pin: made and pinned where libbpf pins it.
  int made = bpf_obj_get((root.path() + "/pinned_flows").c_str());
  ASSERT_GE(made, 0) << strerror(errno);
  EXPECT_EQ(mapIdOf(made), mapIdOf(live->mapFd("pinned_flows")));
  close(made);
  close(pinned);
}

TEST(PinByName, APinnedMapOfAnotherLayoutIsRefusedFieldByField) {
  PinDir root("pinlayout");
  int pinned = bpf_map_create(BPF_MAP_TYPE_HASH, "pinned_flows", 4, 4, 64, nullptr);
  ASSERT_GE(pinned, 0);
  std::string path = root.path() + "/pinned_flows";
  ASSERT_EQ(bpf_obj_pin(pinned, path.c_str()), 0);
  close(pinned);
  runtime::OptimizerOptions options;
  options.pinRoot = root.path();
  options.program = "entry";
  auto live = runtime::Optimizer::create(sourcePath("tests/programs/maps_pinned.bpf.c"), options);
  ASSERT_FALSE(bool(live));
  std::string message = llvm::toString(live.takeError());
  EXPECT_NE(message.find("map 'pinned_flows'"), std::string::npos) << message;
  EXPECT_NE(message.find(path), std::string::npos) << message;
  EXPECT_NE(message.find("value size: declared 8, the map has 4"), std::string::npos) << message;
}

TEST(PinByName, OtherLoadsNeitherOpenNorMakePins) {
  PinDir root("pincopy");
  int pinned = bpf_map_create(BPF_MAP_TYPE_HASH, "pinned_flows", 4, 8, 64, nullptr);
  ASSERT_GE(pinned, 0);
  ASSERT_EQ(bpf_obj_pin(pinned, (root.path() + "/pinned_flows").c_str()), 0);
  auto spec = bpf::ProgramSpec::load(sourcePath("tests/programs/maps_pinned.bpf.c"), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  bpf::LoadOptions copy;
  copy.pinRoot = root.path(); // PinByName::Ignore by default
  auto loaded =
      bpf::LoadedObject::load((*spec)->originalElf(), (*spec)->objectName(), copy);
  ASSERT_THAT_EXPECTED(loaded, llvm::Succeeded());
  EXPECT_NE(mapIdOf(loaded->mapFd("pinned_flows")), mapIdOf(pinned)) << "re-opened the pin";
  EXPECT_NE(access((root.path() + "/pinned_totals").c_str(), F_OK), 0) << "pinned a copy";
  close(pinned);
}

} // namespace
} // namespace morpheus::testing
