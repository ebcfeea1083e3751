// Nothing Morpheus runs for itself writes a live map (issue 30). A filter
// whose loader pins its maps by name (tests/kernel/pinned_filter.bpf.c: a
// hash of rules, an array holding its configuration, per-CPU counters)
// runs under `morpheus run` with the default pin root, /sys/fs/bpf, in a
// bpffs of its own, and holds a loader's state. Each command Morpheus runs
// for its own purposes on the same source then runs beside it, in the same
// mount namespace (so /sys/fs/bpf is the live program's): bench (trace
// driver and live frames, its preset writing eight rules), fuzz with and
// without a preset, specialize, and explain reading the live pins.
// Afterwards every pin at the root must hold the same map as before, with
// every key and value byte for byte, and nothing may have been pinned or
// left there.
#include "ChildProcess.h"
#include "KernelSupport.h"
#include "backend/bpf/MapIO.h"
#include "netns/VethPair.h"

#include <arpa/inet.h>
#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <dirent.h>
#include <gtest/gtest.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Testing/Support/Error.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cctype>
#include <fstream>
#include <iterator>
#include <map>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

const std::string Program = "tests/kernel/pinned_filter.bpf.c";
const std::string Preset = "tests/kernel/pinned_filter.conf";

// What is at one name of the bpffs root: a pinned map (its id, layout and
// every entry, each value as the syscall reads it: every CPU's copy of a
// per-CPU map), a directory, or another file (bpffs's own iterators).
struct Pinned {
  std::string kind;
  uint32_t id = 0, type = 0, keySize = 0, valueSize = 0, maxEntries = 0, flags = 0;
  std::map<Bytes, Bytes> entries;
};

std::string describe(const Pinned &pinned) {
  if (pinned.kind != "map")
    return pinned.kind;
  std::string text =
      llvm::formatv("map id {0} ({1}, key {2}, value {3}, {4} entries max, flags {5:x}):",
                    pinned.id, libbpf_bpf_map_type_str(bpf_map_type(pinned.type)) ?: "?",
                    pinned.keySize, pinned.valueSize, pinned.maxEntries, pinned.flags)
          .str();
  for (const auto &[key, value] : pinned.entries)
    text += "\n  [" + toHex(key) + "] = " + toHex(value);
  return text;
}

Pinned readPinned(const std::string &path, const std::string &name) {
  Pinned pinned;
  struct stat status = {};
  EXPECT_EQ(stat(path.c_str(), &status), 0) << path;
  if (S_ISDIR(status.st_mode)) {
    pinned.kind = "a directory";
    return pinned;
  }
  Fd object(bpf_obj_get(path.c_str()));
  if (object.fd < 0) {
    pinned.kind = "a file";
    return pinned;
  }
  // Only a map's fdinfo has its type.
  std::ifstream fdinfo("/proc/self/fdinfo/" + std::to_string(object.fd));
  std::string text((std::istreambuf_iterator<char>(fdinfo)), std::istreambuf_iterator<char>());
  if (text.find("map_type:") == std::string::npos) {
    pinned.kind = "a BPF object, not a map";
    return pinned;
  }
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  EXPECT_EQ(bpf_obj_get_info_by_fd(object.fd, &info, &length), 0) << path;
  pinned.kind = "map";
  pinned.id = info.id;
  pinned.type = info.type;
  pinned.keySize = info.key_size;
  pinned.valueSize = info.value_size;
  pinned.maxEntries = info.max_entries;
  pinned.flags = info.map_flags;
  llvm::Error walked = bpf::forEachKey(object.fd, info.key_size, name, [&](const Bytes &key) {
    Bytes value(bpf::syscallValueSize(info.type, info.value_size));
    EXPECT_EQ(bpf_map_lookup_elem(object.fd, key.data(), value.data()), 0) << name;
    pinned.entries[key] = value;
    return true;
  });
  EXPECT_THAT_ERROR(std::move(walked), llvm::Succeeded());
  return pinned;
}

// Everything at the root of the bpffs at `root`, by name, as text.
std::map<std::string, std::string> pinnedAt(const std::string &root) {
  std::map<std::string, std::string> found;
  DIR *dir = opendir(root.c_str());
  EXPECT_NE(dir, nullptr) << root;
  if (!dir)
    return found;
  while (dirent *entry = readdir(dir)) {
    std::string name = entry->d_name;
    if (name != "." && name != "..")
      found[name] = describe(readPinned(root + "/" + name, name));
  }
  closedir(dir);
  return found;
}

// The filter under `morpheus run` (default pin root) on one end of a veth
// pair, in a mount namespace with a bpffs of its own; its maps pinned by
// name hold what a loader wrote: one rule and a configuration, both unlike
// the bench preset's, and counters that differ per CPU.
class LiveFilter {
public:
  LiveFilter()
      : veth("livemaps"),
        socketPath("/tmp/morpheus-test-livemaps-" + std::to_string(getpid()) + ".sock"),
        daemon("livemaps-run",
               {binPath("morpheus"), "run", sourcePath(Program), "--iface", veth.ifB(), "--netns",
                veth.nsB(), "--xdp-mode", "native", "--period", "100ms", "--socket", socketPath},
               {ChildMounts::PrivateBpffs}) {}
  ~LiveFilter() { unlink(socketPath.c_str()); }

  bool started() {
    return waitFor([&] { return access(socketPath.c_str(), F_OK) == 0; }, 30s) &&
           waitFor([&] { return access(pin("pinned_verdicts").c_str(), F_OK) == 0; }, 30s);
  }
  // The live bpffs's root, from here.
  std::string root() const { return daemon.seenByChild("/sys/fs/bpf"); }
  std::string pin(const std::string &name) const { return root() + "/" + name; }

  void writeLoaderState() {
    Fd rules(bpf_obj_get(pin("pinned_rules").c_str()));
    Fd config(bpf_obj_get(pin("pinned_config").c_str()));
    Fd verdicts(bpf_obj_get(pin("pinned_verdicts").c_str()));
    ASSERT_GE(rules.fd, 0);
    ASSERT_GE(config.fd, 0);
    ASSERT_GE(verdicts.fd, 0);
    // An allow-list (the preset's is a block-list): 203.0.113.7 passes,
    // every other source is dropped.
    uint32_t allowed = htonl(0xcb007107), pass = 2;
    ASSERT_EQ(bpf_map_update_elem(rules.fd, &allowed, &pass, BPF_NOEXIST), 0);
    uint32_t zero = 0, enabled[2] = {1, 1}; // enabled, default XDP_DROP
    ASSERT_EQ(bpf_map_update_elem(config.fd, &zero, enabled, BPF_ANY), 0);
    int cpus = libbpf_num_possible_cpus();
    ASSERT_GT(cpus, 0);
    for (uint32_t verdict : {1u, 2u}) {
      std::vector<uint64_t> counts(cpus);
      for (int cpu = 0; cpu < cpus; ++cpu)
        counts[cpu] = 1000 * verdict + cpu;
      ASSERT_EQ(bpf_map_update_elem(verdicts.fd, &verdict, counts.data(), BPF_ANY), 0);
    }
  }

  VethPair veth;
  const std::string socketPath;
  ChildProcess daemon;
};

// A file of the test's own, removed with the object.
struct ScratchFile {
  explicit ScratchFile(const std::string &tag)
      : path("/tmp/morpheus-test-livemaps-" + tag + "-" + std::to_string(getpid())) {}
  ~ScratchFile() { unlink(path.c_str()); }
  const std::string path;
};

struct OwnCommand {
  const char *name;
  // The command's arguments after `morpheus`; PROG and PRESET stand for
  // the filter and its bench preset, SNAPSHOT and OUTPUT for scratch files.
  std::vector<std::string> arguments;
  // What its output says when it did its work (loaded, configured and ran
  // what it loads), so that an early exit cannot pass.
  const char *shows;
};

void PrintTo(const OwnCommand &command, std::ostream *out) { *out << command.name; }

class LiveMapsUntouched : public ::testing::TestWithParam<OwnCommand> {};

TEST_P(LiveMapsUntouched, ByOneOfMorpheussOwnCommands) {
  VethPair::sweepStale("livemaps");
  LiveFilter live;
  ASSERT_TRUE(live.started()) << live.daemon.log();
  ASSERT_NO_FATAL_FAILURE(live.writeLoaderState());
  std::map<std::string, std::string> before = pinnedAt(live.root());
  for (const char *name : {"pinned_rules", "pinned_config", "pinned_verdicts"})
    ASSERT_TRUE(before.count(name)) << name << " is not pinned by name";

  ScratchFile snapshot("snapshot.json"), output("out.o");
  std::ofstream(snapshot.path)
      << R"({"maps": {"pinned_rules": [{"key": "cb007107", "value": "02000000"}],)"
      << R"( "pinned_config": [{"key": "00000000", "value": "01000000 01000000"}]}})";
  std::vector<std::string> argv = {binPath("morpheus")};
  for (const std::string &argument : GetParam().arguments) {
    if (argument == "PROG")
      argv.push_back(sourcePath(Program));
    else if (argument == "PRESET")
      argv.push_back(sourcePath(Preset));
    else if (argument == "SNAPSHOT")
      argv.push_back(snapshot.path);
    else if (argument == "OUTPUT")
      argv.push_back(output.path);
    else
      argv.push_back(argument);
  }
  ChildProcess command("livemaps-command", argv, {ChildMounts::SameAs, live.daemon.pid()});
  std::optional<int> status = command.wait(600s);
  EXPECT_EQ(status, std::optional<int>(0)) << command.log();
  EXPECT_NE(command.log().find(GetParam().shows), std::string::npos) << command.log();

  std::map<std::string, std::string> after = pinnedAt(live.root());
  for (const auto &[name, pinned] : before)
    EXPECT_EQ(after.count(name) ? after.at(name) : "nothing", pinned)
        << "/sys/fs/bpf/" << name << " after `morpheus " << GetParam().name << "`";
  for (const auto &[name, pinned] : after)
    EXPECT_TRUE(before.count(name))
        << "`morpheus " << GetParam().name << "` left /sys/fs/bpf/" << name << ": " << pinned;
  EXPECT_TRUE(live.daemon.alive()) << live.daemon.log();
}

// Tiny runs: what matters is what they load and write, not their numbers.
const std::vector<std::string> TinyBench = {
    "bench",    "PRESET", "--locality", "high", "--packets", "4096", "--flows",
    "64",       "--rounds", "1", "--recompiles", "0", "--quiet"};

std::vector<std::string> tinyBench(std::vector<std::string> more) {
  std::vector<std::string> arguments = TinyBench;
  arguments.insert(arguments.end(), more.begin(), more.end());
  return arguments;
}

INSTANTIATE_TEST_SUITE_P(
    LiveMaps, LiveMapsUntouched,
    ::testing::Values(
        // Every variant: the loops following the traffic, with maps of their own.
        OwnCommand{"bench", tinyBench({"--traffic-cycles", "1"}), "adaptive-instrumentation"},
        OwnCommand{"bench --method live",
                   tinyBench({"--method", "live", "--traffic-cycles", "0"}), "(live method)"},
        OwnCommand{"fuzz",
                   {"fuzz", "PROG", "--seconds", "2", "--reproducer", "/dev/null"},
                   "differed"},
        OwnCommand{"fuzz --preset",
                   {"fuzz", "PROG", "--preset", "PRESET", "--seconds", "2", "--reproducer",
                    "/dev/null"},
                   "drawn from the configuration"},
        OwnCommand{"specialize",
                   {"specialize", "PROG", "--snapshot", "SNAPSHOT", "-o", "OUTPUT"},
                   "1 entries inlined"},
        // Reads the live maps where the loader pinned them by name: the
        // one rule the loader wrote is inlined.
        OwnCommand{"explain --pin-dir",
                   {"explain", "PROG", "--pin-dir", "/sys/fs/bpf"},
                   "key from packet+other: specialized by inline-small-table: 1 entries "
                   "inlined as compares"}),
    [](const ::testing::TestParamInfo<OwnCommand> &info) {
      std::string name;
      for (const char *c = info.param.name; *c; ++c)
        if (std::isalnum(static_cast<unsigned char>(*c)))
          name += *c;
      return name;
    });

} // namespace
} // namespace morpheus::testing
