// Copies share nothing writable with the live program (issue 9). A program
// of tests/programs runs under `morpheus run` (its own process, its own
// bpffs, so maps pinned by name are private to the test) with live state a
// loader set up; then, with no traffic, cycles that each validate a new
// candidate on copies, and `morpheus fuzz` on the same program beside it,
// must leave every live map byte-identical: entries of every data map,
// program-array slots (the live programs, by id), inner maps, ring buffer
// positions, queue and stack contents, no perf event record, no task
// storage for Morpheus's own thread, maps pinned by name still at their
// pins. Then live traffic must still count through the static tail-call
// slot in the live maps, also while a guarded update is in progress.
#include "ChildProcess.h"
#include "KernelSupport.h"
#include "backend/bpf/Frontend.h"
#include "backend/bpf/Guard.h"
#include "backend/bpf/MapIO.h"
#include "backend/bpf/MapUpdater.h"
#include "netns/VethPair.h"
#include "trafficgen/LiveFrames.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <linux/bpf.h>
#include <linux/if_link.h>
#include <net/if.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <deque>
#include <functional>
#include <set>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

Bytes u32Key(uint32_t value) {
  Bytes key(4);
  std::memcpy(key.data(), &value, 4);
  return key;
}

// What a test can see of one live map without changing it.
struct MapState {
  std::string name;
  uint32_t type = 0;
  std::map<Bytes, Bytes> entries; // data maps; program arrays, maps of maps: ids
  uint64_t consumer = 0, producer = 0; // ring buffers
  std::optional<Bytes> front;          // queues and stacks: the next element

  bool operator==(const MapState &) const = default;
};

std::string describe(const MapState &state) {
  std::string text = "'" + state.name + "' (" +
                     (libbpf_bpf_map_type_str(bpf_map_type(state.type)) ?: "?") + "):";
  for (const auto &[key, value] : state.entries)
    text += " [" + toHex(key) + "]=" + toHex(value);
  if (state.type == BPF_MAP_TYPE_RINGBUF)
    text += " consumer " + std::to_string(state.consumer) + " producer " +
            std::to_string(state.producer);
  if (state.front)
    text += " front " + toHex(*state.front);
  return text;
}

bool isArray(uint32_t type) {
  return type == BPF_MAP_TYPE_ARRAY || type == BPF_MAP_TYPE_PERCPU_ARRAY ||
         type == BPF_MAP_TYPE_PROG_ARRAY || type == BPF_MAP_TYPE_ARRAY_OF_MAPS ||
         type == BPF_MAP_TYPE_DEVMAP || type == BPF_MAP_TYPE_CPUMAP;
}

MapState readMap(int fd, const bpf_map_info &info) {
  MapState state;
  state.name = info.name;
  state.type = info.type;
  auto take = [&](const Bytes &key) {
    Bytes value(bpf::syscallValueSize(info.type, info.value_size));
    if (bpf_map_lookup_elem(fd, key.data(), value.data()) == 0)
      state.entries[key] = value;
  };
  switch (info.type) {
  case BPF_MAP_TYPE_RINGBUF: {
    long page = sysconf(_SC_PAGESIZE);
    void *consumer = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, 0);
    void *producer = mmap(nullptr, page, PROT_READ, MAP_SHARED, fd, page);
    EXPECT_NE(consumer, MAP_FAILED);
    EXPECT_NE(producer, MAP_FAILED);
    if (consumer != MAP_FAILED) {
      state.consumer = *static_cast<volatile uint64_t *>(consumer);
      munmap(consumer, page);
    }
    if (producer != MAP_FAILED) {
      state.producer = *static_cast<volatile uint64_t *>(producer);
      munmap(producer, page);
    }
    return state;
  }
  case BPF_MAP_TYPE_QUEUE:
  case BPF_MAP_TYPE_STACK: {
    Bytes value(info.value_size);
    if (bpf_map_lookup_elem(fd, nullptr, value.data()) == 0)
      state.front = value;
    return state;
  }
  case BPF_MAP_TYPE_PERF_EVENT_ARRAY: // records: counted by a reader
  case BPF_MAP_TYPE_TASK_STORAGE:     // looked up by task
  case BPF_MAP_TYPE_SK_STORAGE:
  case BPF_MAP_TYPE_INODE_STORAGE:
    return state;
  default:
    break;
  }
  if (isArray(info.type)) {
    for (uint32_t index = 0; index < info.max_entries; ++index)
      take(u32Key(index));
    return state;
  }
  llvm::Error err = bpf::forEachKey(fd, info.key_size, info.name, [&](const Bytes &key) {
    take(key);
    return true;
  });
  EXPECT_THAT_ERROR(std::move(err), llvm::Succeeded());
  return state;
}

bool isMorpheusOwn(const bpf_map_info &info) {
  // The guard and fallback array are Morpheus's; frozen sections (.rodata,
  // .kconfig and specialized versions' constants) cannot change.
  std::string name = info.name;
  return name.rfind("morpheus_", 0) == 0 ||
         (info.type == BPF_MAP_TYPE_ARRAY && (info.map_flags & BPF_F_RDONLY_PROG));
}

// Every map reachable from the program `programId`: the maps it uses, the
// programs its program arrays hold and theirs, the inner maps of its maps
// of maps; by map id, Morpheus's own left out. A specialized version's own
// stage array (Optimizer::stageArrays: a program array that is not the live
// one of its name, `liveArray`) stands for the live array, which is walked
// and compared instead.
std::map<uint32_t, MapState>
reachableMaps(uint32_t programId, const std::function<int(const std::string &)> &liveArray) {
  std::map<uint32_t, MapState> maps;
  std::set<uint32_t> programsSeen, mapsSeen;
  std::deque<uint32_t> programs = {programId}, pending;
  while (!programs.empty() || !pending.empty()) {
    if (!programs.empty()) {
      uint32_t id = programs.front();
      programs.pop_front();
      if (!programsSeen.insert(id).second)
        continue;
      Fd program(bpf_prog_get_fd_by_id(id));
      EXPECT_GE(program.fd, 0) << "program " << id;
      if (program.fd < 0)
        continue;
      bpf_prog_info info = {};
      uint32_t length = sizeof(info);
      EXPECT_EQ(bpf_obj_get_info_by_fd(program.fd, &info, &length), 0);
      std::vector<uint32_t> ids(info.nr_map_ids);
      info = {};
      info.nr_map_ids = ids.size();
      info.map_ids = uint64_t(uintptr_t(ids.data()));
      length = sizeof(info);
      EXPECT_EQ(bpf_obj_get_info_by_fd(program.fd, &info, &length), 0);
      pending.insert(pending.end(), ids.begin(), ids.end());
      continue;
    }
    uint32_t id = pending.front();
    pending.pop_front();
    if (!mapsSeen.insert(id).second)
      continue;
    Fd map(bpf_map_get_fd_by_id(id));
    EXPECT_GE(map.fd, 0) << "map " << id;
    if (map.fd < 0)
      continue;
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    EXPECT_EQ(bpf_obj_get_info_by_fd(map.fd, &info, &length), 0);
    MapState state = readMap(map.fd, info);
    if (info.type == BPF_MAP_TYPE_PROG_ARRAY || info.type == BPF_MAP_TYPE_ARRAY_OF_MAPS ||
        info.type == BPF_MAP_TYPE_HASH_OF_MAPS)
      for (const auto &[key, value] : state.entries) {
        uint32_t held = 0;
        std::memcpy(&held, value.data(), 4);
        (info.type == BPF_MAP_TYPE_PROG_ARRAY ? programs : pending).push_back(held);
      }
    bool versionOwn = false;
    if (info.type == BPF_MAP_TYPE_PROG_ARRAY) {
      int live = liveArray(info.name);
      versionOwn = live >= 0 && mapIdOf(live) != id;
      if (versionOwn)
        pending.push_back(mapIdOf(live));
    }
    if (!isMorpheusOwn(info) && !versionOwn)
      maps[id] = std::move(state);
  }
  return maps;
}

const std::string BpffsRoot = "/sys/fs/bpf";

// A program of tests/programs under `morpheus run`, attached (natively, so
// frames sent across the veth reach it) to one end of a veth pair, in a
// mount namespace with its own bpffs.
class LiveProgram {
public:
  explicit LiveProgram(const std::string &program)
      : object(program), veth("copies"),
        socketPath("/tmp/morpheus-test-copies-" + std::to_string(getpid()) + ".sock"),
        daemon("copies-run",
               {binPath("morpheus"), "run", sourcePath("tests/programs/" + program + ".bpf.c"),
                "--iface", veth.ifB(), "--netns", veth.nsB(), "--xdp-mode", "native", "--prog",
                "entry", "--period", "100ms", "--socket", socketPath},
               {ChildMounts::PrivateBpffs}) {}
  // What a run killed before its exit leaves.
  ~LiveProgram() {
    unlink(socketPath.c_str());
    unlink((socketPath + ".lock").c_str());
  }

  bool started() {
    return waitFor([&] { return access(socketPath.c_str(), F_OK) == 0; }, 30s) &&
           waitFor([&] { return specializedVersion() > 0; }, 30s);
  }
  uint64_t specializedVersion() {
    nlohmann::json status = askControlSocket(socketPath, {{"op", "status"}});
    return status.value("ok", false) ? status["status"]["specialized_version"].get<uint64_t>()
                                     : 0;
  }
  bool specializedFor(uint64_t version) {
    return waitFor([&] { return specializedVersion() == version; }, 10s);
  }
  // A path in the daemon's bpffs, from here.
  std::string pinned(const std::string &path) const {
    return daemon.seenByChild(BpffsRoot + "/" + path);
  }
  std::string morpheusPin(const std::string &map) const {
    return pinned("morpheus/" + object + "/" + map);
  }
  // The live map `name` (pinned by Morpheus), or -1 if the program has none.
  int map(const std::string &name) {
    auto found = fds.find(name);
    if (found != fds.end())
      return found->second.fd;
    int fd = bpf_obj_get(morpheusPin(name).c_str());
    fds.emplace(name, Fd(fd));
    return fd;
  }
  bpf::GuardWord &guard() {
    if (!guardWord) {
      auto opened = bpf::GuardWord::open(morpheusPin(bpf::GuardMapName));
      EXPECT_THAT_EXPECTED(opened, llvm::Succeeded());
      guardWord.emplace(std::move(*opened));
    }
    return *guardWord;
  }
  uint32_t attachedProgram() {
    uint32_t id = 0;
    runInNetns(veth.nsB(), [&] {
      int ifindex = if_nametoindex(veth.ifB().c_str());
      LIBBPF_OPTS(bpf_xdp_query_opts, query);
      EXPECT_EQ(bpf_xdp_query(ifindex, 0, &query), 0);
      id = query.prog_id;
    });
    return id;
  }

  const std::string object;
  VethPair veth;
  const std::string socketPath;
  ChildProcess daemon;

private:
  std::map<std::string, Fd> fds;
  std::optional<bpf::GuardWord> guardWord;
};

// What a loader sets up in the live maps before Morpheus cycles: entries,
// inner maps, devices, queued elements and a perf event reader.
class LiveState {
public:
  explicit LiveState(LiveProgram &live) : live(live) {}
  ~LiveState() {
    if (reader)
      perf_buffer__free(reader);
  }

  void setUp() {
    // Through Morpheus's client path, as a control plane would.
    update("config", u32Key(0), Bytes{1, 0, 0, 0, 5, 0, 0, 0});
    for (uint32_t destination : {0x0100000au, 0x0200000au})
      for (const char *map : {"per_destination", "pinned_flows", "cpu_per_destination",
                              "recent", "cpu_recent"})
        update(map, u32Key(destination), Bytes(8, 0x11));
    for (const char *map : {"by_quarter", "pinned_totals", "stage_counts", "cpu_totals"})
      update(map, u32Key(1), Bytes(8, 0x22));
    if (live.map("prefixes") >= 0) {
      Bytes key = u32Key(24);
      Bytes address = u32Key(0x0001000a);
      key.insert(key.end(), address.begin(), address.end());
      update("prefixes", key, Bytes(8, 0x33));
    }
    if (int outer = live.map("by_slot"); outer >= 0) {
      // Inner maps as a loader creates them: one per slot, one per key.
      for (uint32_t slot : {0u, 1u}) {
        int inner = innerMap(0x40 + slot);
        ASSERT_EQ(bpf_map_update_elem(outer, &slot, &inner, BPF_ANY), 0) << strerror(errno);
      }
      uint32_t destination = 0x0100000a;
      int inner = innerMap(0x50);
      ASSERT_EQ(bpf_map_update_elem(live.map("by_destination"), &destination, &inner, BPF_ANY), 0);
    }
    if (int ports = live.map("ports"); ports >= 0) {
      bpf_devmap_val port = {};
      port.ifindex = 1; // lo, in Morpheus's namespace too
      uint32_t slot = 0;
      ASSERT_EQ(bpf_map_update_elem(ports, &slot, &port, BPF_ANY), 0) << strerror(errno);
      uint32_t destination = 0x01ffff0a;
      ASSERT_EQ(bpf_map_update_elem(live.map("ports_by_destination"), &destination, &port,
                                    BPF_ANY),
                0);
      bpf_cpumap_val cpu = {};
      cpu.qsize = 64;
      ASSERT_EQ(bpf_map_update_elem(live.map("cpus"), &slot, &cpu, BPF_ANY), 0)
          << strerror(errno);
    }
    for (const char *map : {"pending", "history"})
      if (int fd = live.map(map); fd >= 0)
        for (uint32_t value : {11u, 22u, 33u})
          ASSERT_EQ(bpf_map_update_elem(fd, nullptr, &value, BPF_ANY), 0);
    if (int samples = live.map("samples"); samples >= 0) {
      reader = perf_buffer__new(
          samples, 1,
          [](void *context, int, void *, uint32_t) { ++*static_cast<uint64_t *>(context); },
          nullptr, &records, nullptr);
      ASSERT_NE(reader, nullptr) << strerror(errno);
    }
  }

  // Checks what reading alone cannot: no record reached the perf reader,
  // no task storage for Morpheus's thread, queue and stack contents.
  void expectUntouched() {
    if (reader) {
      perf_buffer__consume(reader);
      EXPECT_EQ(records, 0u) << "perf event records reached the live reader";
    }
    if (int storage = live.map("per_task"); storage >= 0) {
      int task = int(syscall(SYS_pidfd_open, live.daemon.pid(), 0));
      ASSERT_GE(task, 0) << strerror(errno);
      uint64_t value = 0;
      EXPECT_NE(bpf_map_lookup_elem(storage, &task, &value), 0)
          << "Morpheus's own thread got live task storage (" << value << ")";
      close(task);
    }
    for (const char *map : {"pending", "history"}) {
      int fd = live.map(map);
      if (fd < 0)
        continue;
      std::vector<uint32_t> held;
      uint32_t value = 0;
      while (bpf_map_lookup_and_delete_elem(fd, nullptr, &value) == 0)
        held.push_back(value);
      std::vector<uint32_t> pushed = {11, 22, 33};
      if (std::string(map) == "history")
        pushed = {33, 22, 11};
      EXPECT_EQ(held, pushed) << "map '" << map << "'";
    }
  }

private:
  void update(const std::string &map, const Bytes &key, const Bytes &value) {
    int fd = live.map(map);
    if (fd < 0)
      return;
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    ASSERT_EQ(bpf_obj_get_info_by_fd(fd, &info, &length), 0);
    auto updater = bpf::MapUpdater::forMap(fd, map, &live.guard());
    ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
    // For per-CPU maps the value goes to every CPU.
    llvm::Error err = updater->update(key, value);
    ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded()) << map;
  }
  int innerMap(uint8_t fill) {
    int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, "inner_counts", 4, 8, 4, nullptr);
    EXPECT_GE(fd, 0) << strerror(errno);
    Bytes value(8, fill);
    for (uint32_t index = 0; index < 4; ++index)
      EXPECT_EQ(bpf_map_update_elem(fd, &index, value.data(), BPF_ANY), 0);
    inner.emplace_back(fd);
    return fd;
  }

  LiveProgram &live;
  std::vector<Fd> inner;
  perf_buffer *reader = nullptr;
  uint64_t records = 0;
};

// A map-by-map comparison that names what changed.
void expectSameMaps(const std::map<uint32_t, MapState> &before,
                    const std::map<uint32_t, MapState> &after) {
  for (const auto &[id, state] : before) {
    auto found = after.find(id);
    if (found == after.end()) {
      ADD_FAILURE() << "live map " << describe(state) << " is no longer reachable";
      continue;
    }
    EXPECT_EQ(found->second, state) << "live map changed:\n  before " << describe(state)
                                    << "\n  after  " << describe(found->second);
  }
  for (const auto &[id, state] : after)
    if (!before.count(id))
      ADD_FAILURE() << "the live program now reaches another map: " << describe(state);
}

uint64_t counter(int fd, uint32_t index) {
  uint64_t value = 0;
  EXPECT_EQ(bpf_map_lookup_elem(fd, &index, &value), 0);
  return value;
}

// `cycles` guard bumps, each followed by a cycle that builds, validates and
// installs a new candidate. A candidate that is not installed is a failure,
// and the copies made for it have run: the test goes on to what they left.
void cycleThroughVersions(LiveProgram &live, int cycles) {
  for (int cycle = 0; cycle < cycles; ++cycle) {
    uint64_t version = live.guard().bump();
    if (!live.specializedFor(version)) {
      ADD_FAILURE() << "cycle " << cycle << " did not install a validated candidate\n"
                    << live.daemon.log();
      return;
    }
  }
}

// The test: with no traffic, `cycles` cycles of `morpheus run` (each
// validating a new candidate: the guard is bumped before each) and
// `fuzzSeconds` of `morpheus fuzz` leave every live map byte-identical.
void expectLiveMapsUntouched(const std::string &program, int cycles, int fuzzSeconds) {
  VethPair::sweepStale("copies");
  LiveProgram live(program);
  ASSERT_TRUE(live.started()) << live.daemon.log();
  LiveState state(live);
  ASSERT_NO_FATAL_FAILURE(state.setUp());
  EXPECT_TRUE(live.specializedFor(live.guard().version()))
      << "the configured program was not specialized\n"
      << live.daemon.log();

  auto liveArray = [&](const std::string &name) { return live.map(name); };
  std::map<uint32_t, MapState> before = reachableMaps(live.attachedProgram(), liveArray);
  ASSERT_FALSE(before.empty());
  cycleThroughVersions(live, cycles);
  ChildProcess fuzz("copies-fuzz",
                    {binPath("morpheus"), "fuzz",
                     sourcePath("tests/programs/" + program + ".bpf.c"), "--prog", "entry",
                     "--seconds", std::to_string(fuzzSeconds), "--reproducer", "/dev/null"},
                    {ChildMounts::SameAs, live.daemon.pid()});
  std::optional<int> fuzzed = fuzz.wait(std::chrono::seconds(fuzzSeconds + 120));
  EXPECT_EQ(fuzzed, std::optional<int>(0)) << fuzz.log();

  std::map<uint32_t, MapState> after = reachableMaps(live.attachedProgram(), liveArray);
  expectSameMaps(before, after);
  state.expectUntouched();
  // Maps pinned by name are still the live maps, at their pins.
  for (const char *name : {"pinned_flows", "pinned_totals"}) {
    int fd = live.map(name);
    if (fd < 0)
      continue;
    Fd atPin(bpf_obj_get(live.pinned(name).c_str()));
    ASSERT_GE(atPin.fd, 0) << name << " is no longer pinned by name";
    EXPECT_EQ(mapIdOf(atPin.fd), mapIdOf(fd)) << name;
    EXPECT_TRUE(before.count(mapIdOf(fd))) << name << " is not the live program's map";
  }
  EXPECT_TRUE(live.daemon.alive()) << live.daemon.log();
}

TEST(Copies, LiveMapsOfEveryKindUntouchedByCyclesAndFuzzing) {
  expectLiveMapsUntouched("maps_all", 20, 30);
}

// Each kind alone, shorter.
class CopiesOfOneKind : public ::testing::TestWithParam<const char *> {};
TEST_P(CopiesOfOneKind, LiveMapsUntouched) { expectLiveMapsUntouched(GetParam(), 5, 3); }
INSTANTIATE_TEST_SUITE_P(Copies, CopiesOfOneKind,
                         ::testing::Values("maps_hash", "maps_array", "maps_percpu", "maps_lru",
                                           "maps_lpm", "maps_ringbuf", "maps_perf",
                                           "maps_queue_stack", "maps_in_map", "maps_devmap",
                                           "maps_storage", "maps_globals", "maps_pinned",
                                           "maps_prog_array"),
                         [](const auto &info) { return std::string(info.param); });

// After validation cycles, live traffic runs the live stage2 through the
// static slot and counts in the live map; also while a guarded update is in
// progress, when the specialized program hands packets to the original.
TEST(Copies, TrafficCountsThroughTheStaticSlotAfterCycles) {
  VethPair::sweepStale("copies");
  LiveProgram live("maps_prog_array");
  ASSERT_TRUE(live.started()) << live.daemon.log();
  LiveState state(live);
  ASSERT_NO_FATAL_FAILURE(state.setUp());
  cycleThroughVersions(live, 20);
  int counts = live.map("stage_counts");
  ASSERT_GE(counts, 0);
  std::vector<trafficgen::Flow> flows = {{0x0a0000c8, 0x0a000001, 1000, 80, IPPROTO_UDP}};
  trafficgen::LiveFramesGenerator traffic =
      trafficgen::LiveFramesGenerator::create(trafficgen::acrossVeth(live.veth, flows));
  const uint64_t packets = 1000;
  auto expectCounted = [&](const char *when) {
    uint64_t entry = counter(counts, 0), stage2 = counter(counts, 1);
    ASSERT_EQ(traffic.send(packets).packetsSent, packets);
    EXPECT_TRUE(waitFor([&] { return counter(counts, 0) == entry + packets; }, 2000ms))
        << when << ": entry counted " << counter(counts, 0) - entry;
    EXPECT_TRUE(waitFor([&] { return counter(counts, 1) == stage2 + packets; }, 2000ms))
        << when << ": the live stage2 counted " << counter(counts, 1) - stage2 << " of "
        << packets << " (the live slot points elsewhere)";
  };
  expectCounted("specialized program running");
  {
    // A change in progress: packets go to the original, which tail-calls
    // through the live slot; Morpheus defers its cycles meanwhile.
    auto change = bpf::GuardWord::Update::begin(&live.guard());
    ASSERT_THAT_EXPECTED(change, llvm::Succeeded());
    expectCounted("during a guarded update");
  }
  if (live.specializedFor(live.guard().version()))
    expectCounted("specialized again");
}

} // namespace
} // namespace morpheus::testing
