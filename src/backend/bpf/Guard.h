// The program-level guard in user space: the mmap-ed page that specialized
// programs check at entry (dataplane/guard.bpf.c), holding
//   version  what a specialized program must still see to trust its copy of
//            the tables (programs embed the version they were built for);
//   writers  control-plane changes in progress (user space only).
//
// Protocol (GuardWord::Update): a writer increments `writers`, bumps
// `version`, waits until every program run that may have checked the old
// version has finished (RunningPrograms), changes any number of table
// entries, bumps `version` again and decrements `writers`. A compilation
// reads `version` before it reads the tables, and installs its code only
// if, afterwards, `version` is unchanged and no writer is in progress.
// Hence code built from a snapshot that misses, or catches half of, a
// change is never installed, installed code stops being trusted by the
// very next packet once a change begins, and no change lands while a
// packet that trusted it still runs: a packet sees either the version's
// folded contents with every live map as it was before the change, or the
// generic code, which reads the maps as the original does
// (docs/equivalence.md, "What a change through Morpheus guarantees").
#pragma once

#include "backend/bpf/dataplane/guard_abi.h"
#include "support/Error.h"

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

namespace morpheus::bpf {

// struct morpheus_guard_state (dataplane/guard_abi.h), seen from user space:
// the same words, accessed atomically.
struct GuardState {
  std::atomic<uint64_t> version;
  std::atomic<uint64_t> writers;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free &&
              sizeof(std::atomic<uint64_t>) == sizeof(__u64));
static_assert(sizeof(GuardState) == sizeof(morpheus_guard_state) &&
              offsetof(GuardState, version) == offsetof(morpheus_guard_state, version) &&
              offsetof(GuardState, writers) == offsetof(morpheus_guard_state, writers));

// Waits for every BPF program run in progress to finish: an RCU grace
// period, which the kernel waits for after a successful update of an array
// or hash of maps from user space (kernel/bpf/syscall.c,
// maybe_wait_bpf_programs; "so that userspace, when we return to it, knows
// that all non-sleepable programs that could be running use the new map
// value"). XDP and TC programs, their tail calls and callbacks run inside
// RCU read-side sections (or with bottom halves or preemption off, which
// the same grace period waits for), so every run that began before the
// wait has returned after it, and every run that begins later sees every
// store made before the wait. The update is of a one-slot array of maps
// of our own, its slot set to the same inner map each time (~8-16 ms here,
// one grace period).
class RunningPrograms {
public:
  static Expected<RunningPrograms> create();
  RunningPrograms(RunningPrograms &&other) noexcept;
  RunningPrograms &operator=(RunningPrograms &&other) noexcept;
  ~RunningPrograms();

  // Returns once every program run that began before the call has ended.
  Error waitForAll() const;

private:
  RunningPrograms(int outer, int inner) : outerFd(outer), innerFd(inner) {}
  void release();
  int outerFd = -1;
  int innerFd = -1;
};

class GuardWord {
public:
  // A fresh guard map (version 1) or the one pinned at `pinPath`.
  static Expected<GuardWord> create();
  static Expected<GuardWord> open(const std::string &pinPath);
  // The guard of the Morpheus that specializes code on the map `mapFd`,
  // for when its pin beside the map is gone (removed; a running Morpheus
  // pins it again within a period): found through what holds the guard
  // together with the map, a loaded program referencing both (specialized
  // code, also one a killed Morpheus left attached) or a process with both
  // open (a running Morpheus, between versions too); `holder` says which.
  // nullopt when nothing holds a guard with the map, so no specialized
  // code depends on it. An error naming `what` when several guards do, or
  // when this process may not look at every program and process (no
  // CAP_SYS_ADMIN, or another user's process hidden from it) and found
  // none: a write then could leave specialized code stale.
  struct Held;
  static Expected<std::optional<Held>> heldWith(int mapFd, const std::string &what);

  GuardWord(GuardWord &&other) noexcept;
  GuardWord &operator=(GuardWord &&other) noexcept;
  ~GuardWord();

  int fd() const { return mapFd; }
  uint64_t version() const;
  // Whether a control-plane change is in progress.
  bool changing() const;
  // Invalidates every program compiled against an earlier version; returns
  // the new version.
  uint64_t bump();

  // Brackets a control-plane change of one or many table entries: begin()
  // bumps the version and returns once no packet that trusted the old one
  // still runs; the end of the bracket bumps it again. A null guard (a map
  // Morpheus does not manage) brackets nothing. An error (the wait could
  // not be had) leaves no bracket open and nothing may be written.
  class Update {
  public:
    static Expected<Update> begin(GuardWord *guard);
    Update(Update &&other) noexcept : guard(std::exchange(other.guard, nullptr)) {}
    Update &operator=(Update &&) = delete;
    Update(const Update &) = delete;
    Update &operator=(const Update &) = delete;
    ~Update();

  private:
    explicit Update(GuardWord *guard) : guard(guard) {}
    GuardWord *guard;
  };

private:
  // Takes the map and its mapping (both released on an error).
  static Expected<GuardWord> adopt(int fd, GuardState *state);
  GuardWord(int fd, GuardState *state, RunningPrograms running)
      : mapFd(fd), state(state), running(std::move(running)) {}
  void release();
  int mapFd = -1;
  GuardState *state = nullptr;
  RunningPrograms running;
};

struct GuardWord::Held {
  GuardWord guard;
  std::string holder; // "process 812 (morpheus)", "program 'xdp_main' (id 42)"
};

} // namespace morpheus::bpf
