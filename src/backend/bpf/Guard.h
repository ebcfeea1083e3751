// The program-level guard word in user space: the mmap-ed version counter
// that specialized programs check at entry (runtime/guard.bpf.c).
#pragma once

#include "support/Error.h"

#include <atomic>
#include <cstdint>
#include <string>

namespace morpheus::bpf {

class GuardWord {
public:
  // A fresh guard map (version 1) or the one pinned at `pinPath`.
  static Expected<GuardWord> create();
  static Expected<GuardWord> open(const std::string &pinPath);

  GuardWord(GuardWord &&other) noexcept;
  GuardWord &operator=(GuardWord &&other) noexcept;
  ~GuardWord();

  int fd() const { return mapFd; }
  uint64_t version() const;
  // Invalidates every program compiled against an earlier version; returns
  // the new version. Call before changing any table a program may inline.
  uint64_t bump();

private:
  GuardWord(int fd, std::atomic<uint64_t> *word) : mapFd(fd), word(word) {}
  int mapFd = -1;
  std::atomic<uint64_t> *word = nullptr;
};

} // namespace morpheus::bpf
