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
  // the new version.
  uint64_t bump();

  // Brackets a control-plane change of a table: bumps before it (so the
  // running specialized program stops trusting its copy from the next
  // packet on) and again after it (so a compilation that read the version
  // while the change was in flight, and so may have read the table before
  // the change landed, finds the version moved and discards its code).
  // Compilations read the version before the tables and install only if it
  // is unchanged afterwards; with both bumps no code built from a snapshot
  // missing a completed change can ever be valid.
  class Update {
  public:
    explicit Update(GuardWord *guard) : guard(guard) {
      if (guard)
        guard->bump();
    }
    ~Update() {
      if (guard)
        guard->bump();
    }
    Update(const Update &) = delete;
    Update &operator=(const Update &) = delete;

  private:
    GuardWord *guard;
  };

private:
  GuardWord(int fd, std::atomic<uint64_t> *word) : mapFd(fd), word(word) {}
  int mapFd = -1;
  std::atomic<uint64_t> *word = nullptr;
};

} // namespace morpheus::bpf
