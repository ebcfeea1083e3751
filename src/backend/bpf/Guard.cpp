#include "backend/bpf/Guard.h"

#include "backend/bpf/Frontend.h"

#include <bpf/bpf.h>
#include <linux/bpf.h>
#include <sys/mman.h>
#include <unistd.h>

namespace morpheus::bpf {

namespace {

Error mapWord(int fd, const std::string &what, std::atomic<uint64_t> **word) {
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  if (bpf_obj_get_info_by_fd(fd, &info, &length))
    return makeSystemError(errno, "{0}: cannot query the guard map", what);
  if (info.type != BPF_MAP_TYPE_ARRAY || info.value_size != sizeof(uint64_t) ||
      !(info.map_flags & BPF_F_MMAPABLE))
    return makeError("{0}: not a Morpheus guard map (mmap-able u64 array)", what);
  void *memory = mmap(nullptr, sysconf(_SC_PAGESIZE), PROT_READ | PROT_WRITE,
                      MAP_SHARED, fd, 0);
  if (memory == MAP_FAILED)
    return makeSystemError(errno, "{0}: cannot mmap the guard map", what);
  static_assert(sizeof(std::atomic<uint64_t>) == sizeof(uint64_t));
  *word = static_cast<std::atomic<uint64_t> *>(memory);
  return Error::success();
}

} // namespace

Expected<GuardWord> GuardWord::create() {
  LIBBPF_OPTS(bpf_map_create_opts, options, .map_flags = BPF_F_MMAPABLE);
  int fd = bpf_map_create(BPF_MAP_TYPE_ARRAY, GuardMapName, sizeof(uint32_t),
                          sizeof(uint64_t), 1, &options);
  if (fd < 0)
    return makeSystemError(errno, "cannot create the guard map");
  std::atomic<uint64_t> *word = nullptr;
  if (Error err = mapWord(fd, "new guard map", &word)) {
    close(fd);
    return err;
  }
  GuardWord guard(fd, word);
  // Version 0 is never valid, so a zeroed map never admits any program.
  guard.word->store(1);
  return guard;
}

Expected<GuardWord> GuardWord::open(const std::string &pinPath) {
  int fd = bpf_obj_get(pinPath.c_str());
  if (fd < 0)
    return makeSystemError(errno, "guard '{0}': cannot open", pinPath);
  std::atomic<uint64_t> *word = nullptr;
  if (Error err = mapWord(fd, "guard '" + pinPath + "'", &word)) {
    close(fd);
    return err;
  }
  return GuardWord(fd, word);
}

GuardWord::GuardWord(GuardWord &&other) noexcept
    : mapFd(std::exchange(other.mapFd, -1)),
      word(std::exchange(other.word, nullptr)) {}

GuardWord &GuardWord::operator=(GuardWord &&other) noexcept {
  if (this != &other) {
    this->~GuardWord();
    mapFd = std::exchange(other.mapFd, -1);
    word = std::exchange(other.word, nullptr);
  }
  return *this;
}

GuardWord::~GuardWord() {
  if (word)
    munmap(word, sysconf(_SC_PAGESIZE));
  if (mapFd >= 0)
    close(mapFd);
}

uint64_t GuardWord::version() const { return word->load(std::memory_order_acquire); }

uint64_t GuardWord::bump() {
  // seq_cst: the bump must be visible to every CPU before the table update
  // that follows it is.
  return word->fetch_add(1, std::memory_order_seq_cst) + 1;
}

} // namespace morpheus::bpf
