#include "backend/bpf/Guard.h"

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/Frontend.h"

#include <bpf/bpf.h>
#include <dirent.h>
#include <linux/bpf.h>
#include <llvm/ADT/StringExtras.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <map>
#include <vector>

namespace morpheus::bpf {

namespace {

Error mapState(int fd, const std::string &what, GuardState **state) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length))
    return makeSystemError(errno, "{0}: cannot query the guard map", what);
  if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != sizeof(GuardState) ||
      !(info.map_flags & BPF_F_MMAPABLE))
    return makeError("{0}: not a Morpheus guard map (mmap-able array of {1}-byte values)",
                     what, sizeof(GuardState));
  void *memory = mmap(nullptr, sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED)
    return makeSystemError(errno, "{0}: cannot mmap the guard map", what);
  *state = static_cast<GuardState *>(memory);
  return Error::success();
}

uint32_t mapIdOf(int fd) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  return bpf_obj_get_info_by_fd(fd, &info, &length) ? 0 : info.id;
}

// What may hold a guard together with one map: the other maps, by id, of
// every program and process that references that map, each with its first
// holder's description. `complete` is false when some program or process
// could not be looked at.
struct Holders {
  std::map<uint32_t, std::string> companions;
  bool complete = true;
};

void addProgramHolders(uint32_t mapId, Holders &holders) {
  uint32_t id = 0;
  while (bpf_prog_get_next_id(id, &id) == 0) {
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0) {
      holders.complete &= errno == ENOENT; // unloaded since it was listed
      continue;
    }
    auto program = liveProgram(fd);
    close(fd);
    if (!program) {
      llvm::consumeError(program.takeError());
      holders.complete = false;
      continue;
    }
    const std::vector<uint32_t> &maps = program->mapIds;
    if (std::find(maps.begin(), maps.end(), mapId) == maps.end())
      continue;
    for (uint32_t other : maps)
      holders.companions.emplace(
          other, "program '" + program->name + "' (id " + std::to_string(id) + ")");
  }
  holders.complete &= errno == ENOENT; // the end of the list, not EPERM
}

// The ids of the maps process `pid` has open (its fdinfo's map_id lines).
std::vector<uint32_t> mapsOpenIn(const std::string &pid, bool &seen) {
  std::vector<uint32_t> ids;
  std::string fds = "/proc/" + pid + "/fd";
  DIR *dir = opendir(fds.c_str());
  seen = dir || errno == ENOENT; // ENOENT: it exited since it was listed
  if (!dir)
    return ids;
  char target[PATH_MAX];
  while (dirent *entry = readdir(dir)) {
    std::string fd = fds + "/" + entry->d_name;
    ssize_t length = readlink(fd.c_str(), target, sizeof(target) - 1);
    if (length < 0 || llvm::StringRef(target, length) != "anon_inode:bpf-map")
      continue;
    std::ifstream info("/proc/" + pid + "/fdinfo/" + entry->d_name);
    for (std::string line; std::getline(info, line);) {
      llvm::StringRef text(line);
      uint32_t id = 0;
      if (text.consume_front("map_id:") && !text.trim().getAsInteger(10, id)) {
        ids.push_back(id);
        break;
      }
    }
  }
  closedir(dir);
  return ids;
}

void addProcessHolders(uint32_t mapId, Holders &holders) {
  DIR *proc = opendir("/proc");
  if (!proc) {
    holders.complete = false;
    return;
  }
  while (dirent *entry = readdir(proc)) {
    std::string pid = entry->d_name;
    if (pid.empty() || !std::all_of(pid.begin(), pid.end(), llvm::isDigit))
      continue;
    bool seen = true;
    std::vector<uint32_t> maps = mapsOpenIn(pid, seen);
    holders.complete &= seen;
    if (std::find(maps.begin(), maps.end(), mapId) == maps.end())
      continue;
    std::string command;
    std::getline(std::ifstream("/proc/" + pid + "/comm"), command);
    for (uint32_t other : maps)
      holders.companions.emplace(other, "process " + pid + " (" + command + ")");
  }
  closedir(proc);
}

} // namespace

Expected<std::optional<GuardWord::Held>> GuardWord::heldWith(int mapFd,
                                                             const std::string &what) {
  uint32_t mapId = mapIdOf(mapFd);
  if (!mapId)
    return makeSystemError(errno, "map '{0}': cannot query", what);
  Holders holders;
  addProgramHolders(mapId, holders);
  addProcessHolders(mapId, holders);
  std::vector<Held> guards;
  std::vector<std::string> named;
  for (const auto &[id, holder] : holders.companions) {
    int fd = bpf_map_get_fd_by_id(id);
    if (fd < 0)
      continue; // gone since: it guards nothing any more
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    GuardState *state = nullptr;
    if (bpf_obj_get_info_by_fd(fd, &info, &length) || std::string(info.name) != GuardMapName) {
      close(fd);
      continue;
    }
    if (Error err = mapState(fd, "guard id " + std::to_string(id), &state)) {
      llvm::consumeError(std::move(err)); // named so, but not of the guard's shape
      close(fd);
      continue;
    }
    auto guard = adopt(fd, state);
    if (!guard)
      return guard.takeError();
    guards.push_back(Held{std::move(*guard), holder});
    named.push_back("guard id " + std::to_string(id) + " held by " + holder);
  }
  if (guards.size() > 1)
    return makeError("map '{0}': no Morpheus guard pinned beside it, and {1} guards are held "
                     "with it ({2}): which to bump is unclear; refused (pin the running "
                     "Morpheus's guard beside the map, or update through its control socket)",
                     what, guards.size(), llvm::join(named, "; "));
  if (guards.empty() && !holders.complete)
    return makeError("map '{0}': no Morpheus guard pinned beside it, and this process may "
                     "not look at every program and process that could hold one (it needs "
                     "CAP_SYS_ADMIN and access to other processes' files): an update could "
                     "leave specialized code stale; refused (run as root)",
                     what);
  if (guards.empty())
    return std::nullopt;
  return std::optional<Held>(std::move(guards.front()));
}

Expected<RunningPrograms> RunningPrograms::create() {
  int inner = bpf_map_create(BPF_MAP_TYPE_ARRAY, "morpheus_rcu_in", sizeof(uint32_t),
                             sizeof(uint32_t), 1, nullptr);
  if (inner < 0)
    return makeSystemError(errno, "cannot create the map whose updates wait for running "
                                  "programs");
  LIBBPF_OPTS(bpf_map_create_opts, options, .inner_map_fd = uint32_t(inner));
  int outer = bpf_map_create(BPF_MAP_TYPE_ARRAY_OF_MAPS, "morpheus_rcu", sizeof(uint32_t),
                             sizeof(uint32_t), 1, &options);
  if (outer < 0) {
    int err = errno;
    close(inner);
    return makeSystemError(err, "cannot create the map whose updates wait for running "
                                "programs");
  }
  return RunningPrograms(outer, inner);
}

RunningPrograms::RunningPrograms(RunningPrograms &&other) noexcept
    : outerFd(std::exchange(other.outerFd, -1)), innerFd(std::exchange(other.innerFd, -1)) {}

RunningPrograms &RunningPrograms::operator=(RunningPrograms &&other) noexcept {
  if (this != &other) {
    release();
    outerFd = std::exchange(other.outerFd, -1);
    innerFd = std::exchange(other.innerFd, -1);
  }
  return *this;
}

RunningPrograms::~RunningPrograms() { release(); }

void RunningPrograms::release() {
  for (int *fd : {&outerFd, &innerFd})
    if (*fd >= 0)
      close(std::exchange(*fd, -1));
}

Error RunningPrograms::waitForAll() const {
  uint32_t slot = 0;
  if (bpf_map_update_elem(outerFd, &slot, &innerFd, BPF_ANY))
    return makeSystemError(errno, "cannot wait for running programs (update of an array "
                                  "of maps)");
  return Error::success();
}

Expected<GuardWord> GuardWord::create() {
  LIBBPF_OPTS(bpf_map_create_opts, options, .map_flags = BPF_F_MMAPABLE);
  int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, GuardMapName, sizeof(uint32_t),
                          sizeof(GuardState), 1, &options);
  if (fd < 0)
    return makeSystemError(errno, "cannot create the guard map");
  GuardState *state = nullptr;
  if (Error err = mapState(fd, "new guard map", &state)) {
    close(fd);
    return err;
  }
  auto guard = adopt(fd, state);
  if (!guard)
    return guard.takeError();
  // Version 0 is never valid, so a zeroed map never admits any program.
  guard->state->version.store(1);
  return guard;
}

Expected<GuardWord> GuardWord::open(const std::string &pinPath) {
  int fd = bpf_obj_get(pinPath.c_str());
  if (fd < 0)
    return makeSystemError(errno, "guard '{0}': cannot open", pinPath);
  GuardState *state = nullptr;
  if (Error err = mapState(fd, "guard '" + pinPath + "'", &state)) {
    close(fd);
    return err;
  }
  return adopt(fd, state);
}

Expected<GuardWord> GuardWord::adopt(int fd, GuardState *state) {
  auto running = RunningPrograms::create();
  if (!running) {
    munmap(state, sysconf(_SC_PAGESIZE));
    close(fd);
    return running.takeError();
  }
  return GuardWord(fd, state, std::move(*running));
}

GuardWord::GuardWord(GuardWord &&other) noexcept
    : mapFd(std::exchange(other.mapFd, -1)), state(std::exchange(other.state, nullptr)),
      running(std::move(other.running)) {}

GuardWord &GuardWord::operator=(GuardWord &&other) noexcept {
  if (this != &other) {
    release();
    mapFd = std::exchange(other.mapFd, -1);
    state = std::exchange(other.state, nullptr);
    running = std::move(other.running);
  }
  return *this;
}

GuardWord::~GuardWord() { release(); }

void GuardWord::release() {
  if (state)
    munmap(state, sysconf(_SC_PAGESIZE));
  if (mapFd >= 0)
    close(mapFd);
  state = nullptr;
  mapFd = -1;
}

uint64_t GuardWord::version() const { return state->version.load(std::memory_order_seq_cst); }

bool GuardWord::changing() const { return state->writers.load(std::memory_order_seq_cst) != 0; }

uint64_t GuardWord::bump() { return state->version.fetch_add(1, std::memory_order_seq_cst) + 1; }

// seq_cst throughout: the first bump must be visible to every CPU before
// the table changes are, and the last bump before `writers` drops, so a
// compilation that sees no writer also sees the final version. The wait
// after the first bump: a packet that checked the guard before it may
// still run code built for the old version; the writes wait for it to end
// (a packet that starts after the wait sees the bump, RunningPrograms).
Expected<GuardWord::Update> GuardWord::Update::begin(GuardWord *guard) {
  Update update(guard);
  if (!guard)
    return update;
  guard->state->writers.fetch_add(1, std::memory_order_seq_cst);
  guard->bump();
  if (Error err = guard->running.waitForAll())
    return err; // `update` ends the bracket: bumped again, writer gone
  return update;
}

GuardWord::Update::~Update() {
  if (!guard)
    return;
  guard->bump();
  guard->state->writers.fetch_sub(1, std::memory_order_seq_cst);
}

} // namespace morpheus::bpf
