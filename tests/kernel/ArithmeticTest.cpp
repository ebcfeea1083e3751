// The original's arithmetic is eBPF's, not LLVM's: once Morpheus folds a
// configuration value into a divisor, a shift count or a signed sum, the
// specialized program must compute what the original computed for that
// value, zero divisors, counts at and past the width and overflowing sums
// included (core/passes/DefinedArithmetic, backend/bpf/VerifierBounds).
// Programs: tests/programs/arith_*.bpf.c, one class each.
#include "Corpus.h"
#include "runtime/Differential.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>

#include <array>
#include <climits>

namespace morpheus::testing {
namespace {

const uint32_t Zero = 0;

template <typename T> Bytes bytesOfValue(const T &value) {
  Bytes bytes(sizeof(T));
  std::memcpy(bytes.data(), &value, sizeof(T));
  return bytes;
}

struct ArithmeticCase {
  std::string name;
  const char *file;
  const char *cpu;
  // The configuration, written through Morpheus before the cycle: map ->
  // (key, value) entries.
  std::vector<std::tuple<std::string, Bytes, Bytes>> configuration;
  std::vector<Bytes> packets;
  // Counter maps compared after the packets (array maps, key 0, u64).
  std::vector<std::string> counters;
};

std::ostream &operator<<(std::ostream &out, const ArithmeticCase &c) { return out << c.name; }

// Packets whose addresses, TTL, TOS and id take values that matter: zero,
// small, the sign bit, all ones.
std::vector<Bytes> variedPackets() {
  const uint32_t addresses[] = {0, 1, 7, 0x0a000001, 0x7fffffff, 0x80000000, 0xfffffff9,
                                0xffffffff};
  const uint8_t bytes[] = {0, 1, 6, 7, 8, 9, 64, 127, 128, 200, 255};
  std::vector<Bytes> packets;
  for (uint32_t saddr : addresses)
    for (uint32_t daddr : {0x0a000001u, 0x80000000u, 0xffffffffu, 0x00000003u}) {
      PacketSpec spec;
      spec.saddr = saddr;
      spec.daddr = daddr;
      spec.ttl = bytes[(saddr + daddr) % std::size(bytes)];
      spec.tos = bytes[(saddr ^ daddr) % std::size(bytes)];
      spec.id = uint16_t(saddr * 31 + daddr);
      packets.push_back(buildPacket(spec));
    }
  for (uint8_t value : bytes) // every TTL and TOS pairing the remainder needs
    for (uint8_t tos = 0; tos < 16; ++tos) {
      PacketSpec spec;
      spec.ttl = value;
      spec.tos = tos;
      packets.push_back(buildPacket(spec));
    }
  return packets;
}

// Runs `c` under Morpheus with `faults`; returns a description of each
// packet or counter that differed between the original and the installed
// version (empty: none).
std::vector<std::string> differences(const ArithmeticCase &c, core::FaultInjection faults) {
  runtime::OptimizerOptions options = CorpusProgram::noShadow();
  options.frontend.cflags = {c.cpu};
  options.faults = faults;
  CorpusProgram program(c.file, options);
  if (!program.ok())
    return {"the program did not load"};
  for (const auto &[map, key, value] : c.configuration) {
    auto updater =
        bpf::MapUpdater::forMap(program.opt().mapFd(map), map, &program.opt().guard());
    if (!updater)
      return {llvm::toString(updater.takeError())};
    if (llvm::Error err = updater->update(key, value))
      return {llvm::toString(std::move(err))};
  }
  core::CycleReport report = program.cycle();
  if (!report.installed())
    return {"no version installed: " + report.describe()};
  std::vector<std::string> found;
  auto countersAfter = [&](int programFd, std::vector<RunResult> &results) {
    for (const std::string &counter : c.counters) {
      uint64_t zero = 0;
      bpf_map_update_elem(program.opt().mapFd(counter), &Zero, &zero, BPF_ANY);
    }
    for (const Bytes &packet : c.packets)
      results.push_back(runOnce(programFd, packet));
    std::vector<uint64_t> counts;
    for (const std::string &counter : c.counters) {
      uint64_t count = 0;
      bpf_map_lookup_elem(program.opt().mapFd(counter), &Zero, &count);
      counts.push_back(count);
    }
    return counts;
  };
  std::vector<RunResult> expected, actual;
  std::vector<uint64_t> expectedCounts = countersAfter(program.opt().originalFd(), expected);
  std::vector<uint64_t> actualCounts = countersAfter(program.opt().activeFd(), actual);
  for (size_t i = 0; i < c.packets.size(); ++i)
    if (!(expected[i] == actual[i]))
      found.push_back("packet " + std::to_string(i) + ": verdict " +
                      std::to_string(actual[i].verdict) + ", original " +
                      std::to_string(expected[i].verdict) +
                      (expected[i].output == actual[i].output ? "" : ", bytes differ"));
  for (size_t i = 0; i < c.counters.size(); ++i)
    if (expectedCounts[i] != actualCounts[i])
      found.push_back(c.counters[i] + ": " + std::to_string(actualCounts[i]) + ", original " +
                      std::to_string(expectedCounts[i]));
  return found;
}

struct ShiftCounts {
  uint32_t left32, right64, arithmetic32;
  uint8_t left8, pad[3] = {};
};

struct Divisors {
  int32_t narrow, pad = 0;
  int64_t wide;
};

struct Vip {
  uint32_t first, count;
};

std::vector<ArithmeticCase> cases() {
  std::vector<ArithmeticCase> all;
  std::vector<Bytes> packets = variedPackets();
  // Flow spreading: every CPU count, 0 (nothing configured yet) first.
  for (uint32_t ncpus : {0u, 1u, 3u, 16u, 17u}) {
    ArithmeticCase c{"spread_ncpus_" + std::to_string(ncpus), "arith_spread.bpf.c", "-mcpu=v2",
                     {}, packets, {"unspread"}};
    c.configuration.emplace_back("spread_config", bytesOfValue(Zero),
                                 bytesOfValue(std::array<uint32_t, 2>{ncpus, 0}));
    for (uint32_t slot = 0; slot < 16; ++slot)
      c.configuration.emplace_back("cpu_slots", bytesOfValue(slot), bytesOfValue(100 + slot));
    all.push_back(std::move(c));
  }
  // A load balancer with VIPs of 0, 4 and 8 backends: a chain of VIPs,
  // so the count is one of three constants (LLVM's range: 0 to 8).
  {
    ArithmeticCase c{"backends_vip_without_backends", "arith_backends.bpf.c", "-mcpu=v2", {}, {},
                     {}};
    const uint32_t vips[] = {0x0a000001, 0x80000000, 0xffffffff};
    const Vip values[] = {{0, 0}, {4, 4}, {8, 8}};
    for (int i = 0; i < 3; ++i)
      c.configuration.emplace_back("vips", bytesOfValue(htonl(vips[i])), bytesOfValue(values[i]));
    for (uint32_t slot = 0; slot < 32; ++slot)
      c.configuration.emplace_back("backends", bytesOfValue(slot),
                                   bytesOfValue(htonl(0xc0a80000 + slot)));
    c.packets = packets;
    all.push_back(std::move(c));
  }
  // A remainder by a packet byte: nothing of it is configuration.
  for (const char *cpu : {"-mcpu=v2", "-mcpu=v3"}) {
    ArithmeticCase c{std::string("packet_remainder_") + (cpu + 6), "arith_packet_remainder.bpf.c",
                     cpu, {}, packets, {}};
    c.configuration.emplace_back("verdict", bytesOfValue(Zero), bytesOfValue(1u));
    all.push_back(std::move(c));
  }
  // Shift counts below, at and past every width, with and without ALU32.
  for (const char *cpu : {"-mcpu=v2", "-mcpu=v3"})
    for (uint32_t count : {0u, 7u, 8u, 31u, 32u, 33u, 40u, 63u, 64u, 65u, 255u, 0xffffffffu}) {
      ArithmeticCase c{std::string("shift_") + (cpu + 6) + "_by_" + std::to_string(count),
                       "arith_shift.bpf.c", cpu, {}, packets, {}};
      c.configuration.emplace_back(
          "shifts", bytesOfValue(Zero),
          bytesOfValue(ShiftCounts{count, count, count, uint8_t(count)}));
      all.push_back(std::move(c));
    }
  // Signed division by 0, -1 and the others, of INT_MIN among the rest.
  const std::pair<int32_t, int64_t> divisors[] = {
      {0, 0}, {-1, -1}, {1, 1}, {7, 3}, {-7, -3}, {INT_MIN, INT64_MIN}};
  for (auto [narrow, wide] : divisors) {
    ArithmeticCase c{"signed_by_" + std::to_string(narrow) + "_" + std::to_string(wide),
                     "arith_signed.bpf.c", "-mcpu=v4", {}, packets, {}};
    for (char &ch : c.name)
      if (ch == '-')
        ch = 'm';
    c.configuration.emplace_back("divisors", bytesOfValue(Zero),
                                 bytesOfValue(Divisors{narrow, 0, wide}));
    all.push_back(std::move(c));
  }
  // A signed sum that overflows for large bases: eBPF wraps.
  for (int32_t base : {0, -1, INT_MAX, INT_MAX - 100, INT_MIN}) {
    ArithmeticCase c{"overflow_base_" + std::to_string(uint32_t(base)), "arith_overflow.bpf.c",
                     "-mcpu=v2", {}, packets, {}};
    c.configuration.emplace_back("base", bytesOfValue(Zero), bytesOfValue(base));
    all.push_back(std::move(c));
  }
  return all;
}

class MachineArithmetic : public ::testing::TestWithParam<ArithmeticCase> {};

TEST_P(MachineArithmetic, SpecializedComputesWhatTheOriginalComputed) {
  std::vector<std::string> found = differences(GetParam(), {});
  EXPECT_TRUE(found.empty()) << found.size() << " differences, first: " << found.front();
}

INSTANTIATE_TEST_SUITE_P(Corpus, MachineArithmetic, ::testing::ValuesIn(cases()),
                         [](const auto &info) { return info.param.name; });

// The cases above can fail: with LLVM's arithmetic (the fault), each class
// has a configuration whose specialized program does something the
// original never did.
TEST(MachineArithmetic, WithLlvmsArithmeticEveryClassChangesWhatTheProgramDoes) {
  core::FaultInjection llvmArithmetic;
  llvmArithmetic.undefinedArithmetic = true;
  std::map<std::string, bool> classDiffered;
  for (const ArithmeticCase &c : cases()) {
    std::string file = c.file;
    bool &differed = classDiffered[file];
    if (!differed)
      differed = !differences(c, llvmArithmetic).empty();
  }
  for (const auto &[file, differed] : classDiffered)
    EXPECT_TRUE(differed) << file << ": no configuration differed with LLVM's arithmetic";
}

// `morpheus fuzz` finds the class itself: its map states hold the
// boundary values (zero divisors, counts at and past the width), so with
// LLVM's arithmetic it reports a difference, and with the machine's none.
TEST(MachineArithmetic, TheFuzzerFindsUndefinedArithmetic) {
  for (const char *file : {"arith_spread.bpf.c", "arith_shift.bpf.c"}) {
    runtime::FuzzOptions options;
    options.frontend.cflags = {"-mcpu=v3"};
    options.seconds = 0; // bounded by map states (load makes it slower, never a failure)
    options.minStates = 5000; // and it stops at the first difference
    options.seed = 5;
    options.faults.undefinedArithmetic = true;
    auto broken = runtime::fuzzProgram(corpusPath(file), options);
    ASSERT_THAT_EXPECTED(broken, llvm::Succeeded());
    EXPECT_GE(broken->differed, 1u) << file;
    options.seconds = 3;
    options.minStates = 20;
    options.faults = {};
    auto mended = runtime::fuzzProgram(corpusPath(file), options);
    ASSERT_THAT_EXPECTED(mended, llvm::Succeeded());
    EXPECT_EQ(mended->differed, 0u) << file << ": " << mended->reproducer;
  }
}

} // namespace
} // namespace morpheus::testing
