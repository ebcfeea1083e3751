#include "KernelSupport.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <linux/bpf.h>
#include <linux/magic.h>
#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <random>

namespace morpheus::testing {

RunResult runOnce(int programFd, const Bytes &packet) {
  RunResult result;
  result.output.resize(packet.size() + 512);
  LIBBPF_OPTS(bpf_test_run_opts, options, .data_in = packet.data(),
              .data_out = result.output.data(), .data_size_in = uint32_t(packet.size()),
              .data_size_out = uint32_t(result.output.size()), .repeat = 1);
  int err = bpf_prog_test_run_opts(programFd, &options);
  EXPECT_EQ(err, 0) << "BPF_PROG_TEST_RUN on prog fd " << programFd << ": "
                    << strerror(errno);
  result.verdict = options.retval;
  result.output.resize(options.data_size_out);
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

namespace {

void put16(Bytes &bytes, size_t at, uint16_t value) {
  bytes[at] = value >> 8;
  bytes[at + 1] = value & 0xff;
}

void put32(Bytes &bytes, size_t at, uint32_t value) {
  put16(bytes, at, value >> 16);
  put16(bytes, at + 2, value & 0xffff);
}

} // namespace

Bytes buildPacket(const PacketSpec &spec) {
  size_t ipLength = spec.ihl * 4;
  size_t l4Length = spec.protocol == 6 ? 20 : 8;
  Bytes packet(14 + ipLength + l4Length + spec.payload, 0);
  const uint8_t dst[6] = {0x02, 0, 0, 0, 0, 0x02}, src[6] = {0x02, 0, 0, 0, 0, 0x01};
  std::copy(dst, dst + 6, packet.begin());
  std::copy(src, src + 6, packet.begin() + 6);
  put16(packet, 12, spec.etherType);
  size_t ip = 14;
  packet[ip] = 0x40 | (spec.ihl & 0xf);
  put16(packet, ip + 2, packet.size() - 14);
  put16(packet, ip + 6, spec.fragOff);
  packet[ip + 8] = spec.ttl;
  packet[ip + 9] = spec.protocol;
  put32(packet, ip + 12, spec.saddr);
  put32(packet, ip + 16, spec.daddr);
  uint32_t sum = 0;
  for (size_t i = 0; i < ipLength; i += 2)
    sum += (packet[ip + i] << 8) | packet[ip + i + 1];
  while (sum >> 16)
    sum = (sum & 0xffff) + (sum >> 16);
  put16(packet, ip + 10, ~sum & 0xffff);
  size_t l4 = ip + ipLength;
  if (spec.protocol == 6 || spec.protocol == 17) {
    put16(packet, l4, spec.sport);
    put16(packet, l4 + 2, spec.dport);
  } else if (spec.protocol == 1) {
    packet[l4] = 8; // echo request
  }
  for (size_t i = 0; i < spec.payload; ++i)
    packet[l4 + l4Length + i] = uint8_t(i * 7 + 1);
  return packet;
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
  if (DIR *listing = opendir(dir.c_str())) {
    while (dirent *entry = readdir(listing))
      if (entry->d_name[0] != '.')
        unlink((dir + "/" + entry->d_name).c_str());
    closedir(listing);
  }
  rmdir(dir.c_str());
}

std::string sourcePath(const std::string &relative) {
  return std::string(MORPHEUS_SOURCE_DIR) + "/" + relative;
}

std::string binPath(const std::string &name) {
  return std::string(MORPHEUS_BIN_DIR) + "/" + name;
}

} // namespace morpheus::testing
