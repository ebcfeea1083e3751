#include "backend/bpf/Guard.h"

#include "backend/bpf/Frontend.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

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

} // namespace

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
  GuardWord guard(fd, state);
  // Version 0 is never valid, so a zeroed map never admits any program.
  guard.state->version.store(1);
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
  return GuardWord(fd, state);
}

GuardWord::GuardWord(GuardWord &&other) noexcept
    : mapFd(std::exchange(other.mapFd, -1)),
      state(std::exchange(other.state, nullptr)) {}

GuardWord &GuardWord::operator=(GuardWord &&other) noexcept {
  if (this != &other) {
    this->~GuardWord();
    mapFd = std::exchange(other.mapFd, -1);
    state = std::exchange(other.state, nullptr);
  }
  return *this;
}

GuardWord::~GuardWord() {
  if (state)
    munmap(state, sysconf(_SC_PAGESIZE));
  if (mapFd >= 0)
    close(mapFd);
}

uint64_t GuardWord::version() const { return state->version.load(std::memory_order_seq_cst); }

bool GuardWord::changing() const { return state->writers.load(std::memory_order_seq_cst) != 0; }

uint64_t GuardWord::bump() { return state->version.fetch_add(1, std::memory_order_seq_cst) + 1; }

// seq_cst throughout: the first bump must be visible to every CPU before
// the table changes are, and the last bump before `writers` drops, so a
// compilation that sees no writer also sees the final version.
GuardWord::Update::Update(GuardWord *guard) : guard(guard) {
  if (!guard)
    return;
  guard->state->writers.fetch_add(1, std::memory_order_seq_cst);
  guard->bump();
}

GuardWord::Update::~Update() {
  if (!guard)
    return;
  guard->bump();
  guard->state->writers.fetch_sub(1, std::memory_order_seq_cst);
}

} // namespace morpheus::bpf
