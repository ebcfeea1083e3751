// Helpers for tests that run programs on the real kernel: running a program
// once on a packet (BPF_PROG_TEST_RUN), reading per-CPU counters, building
// packets, and unique bpffs pin directories that disappear after the test.
#pragma once

#include "core/Tables.h"
#include "support/Bytes.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

namespace morpheus::testing {

using core::Bytes;

struct RunResult {
  uint32_t verdict = 0;
  Bytes output; // the packet after the program, as the kernel returns it

  bool operator==(const RunResult &) const = default;
};

// Runs `programFd` once on `packet`; fails the test on a syscall error.
// With `ingressIfindex`, the XDP context names that receiving interface
// (which must exist in the calling thread's network namespace). Packets
// shorter than an Ethernet header work too.
RunResult runOnce(int programFd, const Bytes &packet, uint32_t ingressIfindex = 0);

// All CPUs' values of every index of a per-CPU array of u64 counters, summed
// per index.
std::vector<uint64_t> perCpuCounters(int mapFd, uint32_t entries);

// The ids of the maps a loaded program references.
std::vector<uint32_t> mapIdsOf(int programFd);
uint32_t mapIdOf(int mapFd);
uint32_t programIdOf(int programFd);
// The id of the map named `name` a loaded program references (0: none).
uint32_t mapIdByName(int programFd, const std::string &name);

// A program a program array holds: its id, and whether it references the
// guard map `guardMapId` (a specialized version checks it; an original
// knows no guard). Tail-called programs have no run counts of their own,
// so this is how a test tells a specialized stage from the original's.
struct HeldProgram {
  uint32_t id = 0;
  bool checksTheGuard = false;
};
// What the first `slots` slots of program array `arrayFd` hold, by the
// kernel's name of each program.
std::map<std::string, HeldProgram> programsHeld(int arrayFd, uint32_t guardMapId,
                                                uint32_t slots = 8);

struct PacketSpec {
  uint16_t etherType = 0x0800;
  uint8_t protocol = 17; // UDP
  uint32_t saddr = 0x0a000064, daddr = 0x0a000001; // host order
  uint16_t sport = 1234, dport = 80;
  uint8_t ttl = 64;
  uint8_t tos = 0;
  uint16_t id = 1;
  uint16_t fragOff = 0;     // host order, flags + offset
  uint8_t ihl = 5;          // > 5 adds zeroed option words
  size_t payload = 18;
};

// Ethernet + IPv4 (valid checksum) + UDP/TCP/ICMP header + payload.
Bytes buildPacket(const PacketSpec &spec);

// A file descriptor closed when the test is done with it.
struct Fd {
  int fd = -1;
  explicit Fd(int fd) : fd(fd) {}
  Fd(Fd &&other) noexcept : fd(std::exchange(other.fd, -1)) {}
  ~Fd() {
    if (fd >= 0)
      close(fd);
  }
};

// The address of a Unix socket at `path` (cut to what sun_path holds).
inline sockaddr_un unixAddress(const std::string &path) {
  sockaddr_un address = {};
  address.sun_family = AF_UNIX;
  path.copy(address.sun_path, sizeof(address.sun_path) - 1);
  return address;
}

// A fresh directory under /sys/fs/bpf (bpffs mounted if needed), removed
// with everything pinned in it when the object goes away.
class PinDir {
public:
  explicit PinDir(const std::string &tag);
  ~PinDir();
  const std::string &path() const { return dir; }

private:
  std::string dir;
};

// Where the tests find sources and built binaries.
std::string sourcePath(const std::string &relative);
std::string binPath(const std::string &name);

} // namespace morpheus::testing
