#include "KernelSupport.h"

#include "support/packet/Packet.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <random>

namespace morpheus::testing {

RunResult runOnce(int programFd, const Bytes &packet, uint32_t ingressIfindex) {
  // BPF_PROG_TEST_RUN refuses input shorter than an Ethernet header, but the
  // linear part given by the context may be shorter (the rest becomes a
  // fragment): the program then sees exactly `packet` between data and
  // data_end, and the padding comes back at the end of the output.
  const size_t minimum = 14;
  size_t padding = packet.size() < minimum ? minimum - packet.size() : 0;
  Bytes input = packet;
  input.resize(packet.size() + padding, 0);
  RunResult result;
  result.output.resize(input.size() + 512);
  xdp_md context = {};
  context.data_end = packet.size();
  context.ingress_ifindex = ingressIfindex;
  bool withContext = ingressIfindex || padding;
  LIBBPF_OPTS(bpf_test_run_opts, options, .data_in = input.data(),
              .data_out = result.output.data(), .data_size_in = uint32_t(input.size()),
              .data_size_out = uint32_t(result.output.size()),
              .ctx_in = withContext ? &context : nullptr,
              .ctx_size_in = withContext ? uint32_t(sizeof(context)) : 0u, .repeat = 1);
  int err = bpf_prog_test_run_opts(programFd, &options);
  EXPECT_EQ(err, 0) << "BPF_PROG_TEST_RUN on prog fd " << programFd << ": "
                    << strerror(errno);
  result.verdict = options.retval;
  size_t length = options.data_size_out;
  result.output.resize(length >= padding ? length - padding : 0);
  return result;
}

std::vector<uint64_t> perCpuCounters(int mapFd, uint32_t entries) {
  int cpus = libbpf_num_possible_cpus();
  std::vector<uint64_t> sums(entries, 0), values(cpus);
  for (uint32_t index = 0; index < entries; ++index) {
    EXPECT_EQ(bpf_map_lookup_elem(mapFd, &index, values.data()), 0);
    for (uint64_t value : values)
      sums[index] += value;
  }
  return sums;
}

std::vector<uint32_t> mapIdsOf(int programFd) {
  std::vector<uint32_t> ids(64);
  bpf_prog_info info = {};
  info.nr_map_ids = ids.size();
  info.map_ids = reinterpret_cast<uint64_t>(ids.data());
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(programFd, &info, &length), 0);
  ids.resize(std::min<size_t>(info.nr_map_ids, ids.size()));
  return ids;
}

uint32_t mapIdOf(int mapFd) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(mapFd, &info, &length), 0);
  return info.id;
}

uint32_t programIdOf(int programFd) {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(programFd, &info, &length), 0);
  return info.id;
}

uint32_t mapIdByName(int programFd, const std::string &name) {
  for (uint32_t id : mapIdsOf(programFd)) {
    Fd map(bpf_map_get_fd_by_id(id));
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    EXPECT_EQ(bpf_obj_get_info_by_fd(map.fd, &info, &length), 0);
    if (name == info.name)
      return id;
  }
  return 0;
}

std::map<std::string, HeldProgram> programsHeld(int arrayFd, uint32_t guardMapId,
                                                uint32_t slots) {
  std::map<std::string, HeldProgram> held;
  for (uint32_t slot = 0; slot < slots; ++slot) {
    uint32_t id = 0;
    if (bpf_map_lookup_elem(arrayFd, &slot, &id))
      continue;
    Fd program(bpf_prog_get_fd_by_id(id));
    bpf_prog_info info = {};
    uint32_t length = sizeof(info);
    EXPECT_EQ(bpf_obj_get_info_by_fd(program.fd, &info, &length), 0);
    std::vector<uint32_t> maps = mapIdsOf(program.fd);
    held[info.name] = {id, std::find(maps.begin(), maps.end(), guardMapId) != maps.end()};
  }
  return held;
}

Bytes buildPacket(const PacketSpec &spec) {
  using namespace packet;
  PacketBuilder builder;
  builder.ethernet(parseMac("02:00:00:00:00:02"), parseMac("02:00:00:00:00:01"),
                   spec.etherType);
  Ipv4Options ip;
  ip.saddr = spec.saddr;
  ip.daddr = spec.daddr;
  ip.ttl = spec.ttl;
  ip.tos = spec.tos;
  ip.id = spec.id;
  ip.fragment = spec.fragOff;
  ip.optionWords = spec.ihl > 5 ? spec.ihl - 5 : 0;
  builder.ipv4(ip);
  if (spec.protocol == 6)
    builder.tcp(spec.sport, spec.dport);
  else if (spec.protocol == 1)
    builder.icmpEcho(1, 1);
  else
    builder.udp(spec.sport, spec.dport);
  return builder.payload(spec.payload).build();
}

PinDir::PinDir(const std::string &tag) {
  struct statfs fs = {};
  if (statfs("/sys/fs/bpf", &fs) != 0 || fs.f_type != BPF_FS_MAGIC)
    mount("bpf", "/sys/fs/bpf", "bpf", 0, "mode=0700");
  std::random_device random;
  dir = "/sys/fs/bpf/morpheus-test-" + tag + "-" + std::to_string(getpid()) + "-" +
        std::to_string(random() % 1000000);
  mkdir(dir.c_str(), 0700);
}

PinDir::~PinDir() {
  // Recursively: a run that keeps serving leaves its pin directory (maps,
  // guard, links) inside; unpinning a link detaches it.
  std::error_code ignored;
  std::filesystem::remove_all(dir, ignored);
}

std::string sourcePath(const std::string &relative) {
  return std::string(MORPHEUS_SOURCE_DIR) + "/" + relative;
}

std::string binPath(const std::string &name) {
  return std::string(MORPHEUS_BIN_DIR) + "/" + name;
}

} // namespace morpheus::testing
