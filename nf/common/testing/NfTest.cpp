#include "NfTest.h"

#include <gtest/gtest.h>
#include <unistd.h>

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

} // namespace morpheus::nf::testing
