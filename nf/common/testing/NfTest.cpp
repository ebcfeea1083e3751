#include "NfTest.h"

#include "backend/bpf/MapIO.h"
#include "backend/bpf/ProgramSpec.h"

#include <bpf/bpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <system_error>

namespace morpheus::nf::testing {

std::string objectPath(const std::string &name) {
  return std::string(MORPHEUS_NF_OBJECT_DIR) + "/" + name + ".bpf.o";
}

NfProgram::NfProgram(const std::string &path, const std::string &pinDir) : pins(pinDir) {
  bpf_object *opened = bpf_object__open_file(path.c_str(), nullptr);
  if (!opened) {
    ADD_FAILURE() << path << ": cannot open: " << strerror(errno);
    return;
  }
  bpf_map *map;
  bpf_object__for_each_map(map, opened) {
    if (!bpf_map__is_internal(map))
      bpf_map__set_pin_path(map, (pinDir + "/" + bpf_map__name(map)).c_str());
  }
  if (int err = bpf_object__load(opened)) {
    ADD_FAILURE() << path << ": load failed: " << strerror(-err);
    bpf_object__close(opened);
    return;
  }
  object = opened;
}

NfProgram::~NfProgram() {
  if (!object)
    return;
  bpf_map *map;
  bpf_object__for_each_map(map, object) {
    if (!bpf_map__is_internal(map))
      bpf_map__unpin(map, nullptr);
  }
  bpf_object__close(object);
}

int NfProgram::programFd(const std::string &name) const {
  bpf_program *program = name.empty()
                             ? bpf_object__next_program(object, nullptr)
                             : bpf_object__find_program_by_name(object, name.c_str());
  return program ? bpf_program__fd(program) : -1;
}

int NfProgram::mapFd(const std::string &name) const {
  bpf_map *map = bpf_object__find_map_by_name(object, name.c_str());
  return map ? bpf_map__fd(map) : -1;
}

RunResult NfProgram::run(const Bytes &packet, uint32_t ingressIfindex,
                         const std::string &program) const {
  return morpheus::testing::runOnce(programFd(program), packet, ingressIfindex);
}

TempDir::TempDir() {
  char pattern[] = "/tmp/nf-test-XXXXXX";
  // Thrown, not a test failure: files must never be written relative to "".
  if (!mkdtemp(pattern))
    throw std::system_error(errno, std::generic_category(), "mkdtemp");
  dir = pattern;
}

TempDir::~TempDir() { std::filesystem::remove_all(dir); }

std::string TempDir::write(const std::string &name, const std::string &text) const {
  std::string path = dir + "/" + name;
  std::ofstream out(path);
  out << text;
  EXPECT_TRUE(out.flush()) << "cannot write " << path;
  return path;
}

std::map<Bytes, Bytes> rawEntries(int mapFd) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(mapFd, &info, &length), 0);
  bool perCpu = info.type == BPF_MAP_TYPE_PERCPU_ARRAY || info.type == BPF_MAP_TYPE_PERCPU_HASH;
  // The kernel rounds each CPU's value up to 8 bytes.
  size_t valueSize = perCpu ? ((info.value_size + 7) & ~7u) * libbpf_num_possible_cpus()
                            : info.value_size;
  std::map<Bytes, Bytes> entries;
  Bytes value(valueSize);
  llvm::Error err = bpf::forEachKey(mapFd, info.key_size, info.name, [&](const Bytes &key) {
    EXPECT_EQ(bpf_map_lookup_elem(mapFd, key.data(), value.data()), 0);
    entries[key] = value;
    return true;
  });
  EXPECT_THAT_ERROR(std::move(err), llvm::Succeeded());
  return entries;
}

SpecializedAlone::SpecializedAlone(runtime::Optimizer &optimizer)
    : entry(optimizer.entryName()) {
  build(optimizer);
}

void SpecializedAlone::build(runtime::Optimizer &optimizer) {
  auto spec = bpf::ProgramSpec::load(optimizer.spec().path(), {});
  ASSERT_THAT_EXPECTED(spec, llvm::Succeeded());
  core::TableSnapshot snapshot;
  std::map<std::string, int> maps;
  for (const auto &[name, info] : (*spec)->catalog())
    maps[name] = optimizer.mapFd(name);
  for (const auto &[name, request] : (*spec)->readPlan(64)) {
    auto contents = bpf::readTable(optimizer.mapFd(name), (*spec)->catalog().at(name), request);
    ASSERT_THAT_EXPECTED(contents, llvm::Succeeded());
    snapshot[name] = std::move(*contents);
  }
  auto specialized = (*spec)->specialize(snapshot, bpf::SpecializeRequest{});
  ASSERT_THAT_EXPECTED(specialized, llvm::Succeeded());
  bpf::LoadOptions sharing;
  sharing.maps = maps;
  auto loaded = bpf::LoadedObject::load(specialized->elf, (*spec)->objectName(), sharing);
  ASSERT_THAT_EXPECTED(loaded, llvm::Succeeded());
  object.emplace(std::move(*loaded));
}

bool usesMap(int programFd, int mapFd) {
  uint32_t id = morpheus::testing::mapIdOf(mapFd);
  for (uint32_t used : morpheus::testing::mapIdsOf(programFd))
    if (used == id)
      return true;
  return false;
}

int runCommand(const Function &function, std::vector<std::string> words) {
  return runFunction(function, words);
}

} // namespace morpheus::nf::testing
