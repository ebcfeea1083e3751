// The program-level guard of the user-space backend: the same protocol as
// the eBPF backend's (backend/bpf/Guard.h, docs/design.md "Guards and
// consistency"), on two words of this process instead of an mmap-ed map:
//   version  what specialized code must still see to trust its copy of the
//            tables (each version embeds the one it was built for and reads
//            this word at the start of every packet);
//   writers  control-plane changes in progress.
// A change: writers++, bump version, change the tables, bump version,
// writers--. A compilation reads version before the tables and installs
// only if afterwards version is unchanged and no change is in progress.
#pragma once

#include <atomic>
#include <cstdint>

namespace morpheus::user {

class Guard {
public:
  // The symbol JIT-compiled code reads the version word by.
  static constexpr const char *VersionSymbol = "morpheus_user_guard_version";

  uint64_t version() const { return versionWord.load(std::memory_order_acquire); }
  bool changing() const { return writers.load(std::memory_order_acquire) != 0; }
  // The version word's address, bound to VersionSymbol in the JIT.
  const std::atomic<uint64_t> *versionAddress() const { return &versionWord; }

  // A shadow copy's guard (ShadowCopies): holds `version`, so code built
  // for it runs specialized on the copy's tables. Never a live guard's.
  void holdForCopy(uint64_t version) { versionWord.store(version, std::memory_order_release); }

  // Brackets a control-plane change of one or many table entries.
  class Update {
  public:
    explicit Update(Guard &guard) : guard(guard) {
      guard.writers.fetch_add(1, std::memory_order_acq_rel);
      guard.versionWord.fetch_add(1, std::memory_order_acq_rel);
    }
    ~Update() {
      guard.versionWord.fetch_add(1, std::memory_order_acq_rel);
      guard.writers.fetch_sub(1, std::memory_order_acq_rel);
    }
    Update(const Update &) = delete;
    Update &operator=(const Update &) = delete;

  private:
    Guard &guard;
  };

private:
  static_assert(std::atomic<uint64_t>::is_always_lock_free);
  std::atomic<uint64_t> versionWord{1}; // 0 is never valid; only grows
  std::atomic<uint64_t> writers{0};
};

} // namespace morpheus::user
