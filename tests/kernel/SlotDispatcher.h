// The dispatcher-shaped program of the kernel tests
// (slot_dispatcher.bpf.c, slots made of tail calls) as a bpf::SlotBinding,
// so that Morpheus's dispatcher revisions (backend/bpf/XdpDispatcher) run
// on a kernel that refuses extension programs; and what a loader following
// libxdp's protocol does to put a first revision on an interface. Shared
// by the dispatcher tests and tools/bench's dispatcher_cost.
#pragma once

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/XdpDispatcher.h"
#include "support/Netns.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <fcntl.h>
#include <linux/if_link.h>
#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FormatVariadic.h>
#include <net/if.h>
#include <sys/stat.h>

#include <map>
#include <string>
#include <vector>

extern "C" const unsigned char slot_dispatcher_bpf_start[], slot_dispatcher_bpf_end[];

namespace morpheus::testing {

// Revisions of slot_dispatcher.bpf.c; a slot's program is put in the
// revision's own program array, and what keeps it there is a reference to
// that array held in user space (the kernel empties a program array when
// the last one goes), pinned as the slot's link.
class TailCallSlots final : public bpf::SlotBinding {
public:
  explicit TailCallSlots(std::string state) : state(std::move(state)) {}
  std::string stateDirectory() const override { return state; }
  bool slotsAreExtensions() const override { return false; }

  Expected<FileDescriptor> loadDispatcher(const bpf::DispatcherConfig &config) const override {
    LIBBPF_OPTS(bpf_object_open_opts, opts, .object_name = "slot_dispatcher");
    bpf_object *object = bpf_object__open_mem(
        slot_dispatcher_bpf_start, slot_dispatcher_bpf_end - slot_dispatcher_bpf_start, &opts);
    if (!object)
      return makeSystemError(errno, "cannot open slot_dispatcher");
    auto close = llvm::make_scope_exit([&] { bpf_object__close(object); });
    // The revision's program array is made here and held, so that it never
    // loses its last user reference between the load and the slots' pins
    // (the kernel empties an array whose last one goes, in a work item
    // that may run after the slots are filled).
    FileDescriptor slots(
        bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "slots", 4, 4, bpf::DispatcherSlots, nullptr));
    if (!slots.valid() ||
        bpf_map__reuse_fd(bpf_object__find_map_by_name(object, "slots"), slots.get()))
      return makeSystemError(errno, "slot_dispatcher's program array");
    bpf_map *map;
    bpf_object__for_each_map(map, object) {
      if (!llvm::StringRef(bpf_map__name(map)).ends_with(".rodata"))
        continue;
      size_t size = 0;
      bpf_map__initial_value(map, &size);
      std::vector<uint8_t> value = config.encode(size);
      if (value.size() != size || bpf_map__set_initial_value(map, value.data(), size))
        return makeError("slot_dispatcher's .rodata has {0} bytes", size);
    }
    if (int err = bpf_object__load(object))
      return makeSystemError(err, "the kernel refused slot_dispatcher");
    int fd = fcntl(bpf_program__fd(bpf_object__find_program_by_name(object, "xdp_dispatcher")),
                   F_DUPFD_CLOEXEC, 0);
    if (fd < 0)
      return makeSystemError(errno, "cannot keep the revision");
    arrays[bpf::liveProgram(fd)->id] = std::move(slots);
    return FileDescriptor(fd);
  }

  Expected<FileDescriptor> bind(int dispatcher, const bpf::DispatcherConfig &, unsigned slot,
                                int program) const override {
    auto live = bpf::liveProgram(dispatcher);
    if (!live)
      return live.takeError();
    auto slots = arrays.find(live->id);
    if (slots == arrays.end())
      return makeError("revision {0} was not loaded here", live->id);
    if (Error err = bpf::MapAccess(slots->second.get(), "slots").put(slot, program))
      return std::move(err);
    FileDescriptor holder(fcntl(slots->second.get(), F_DUPFD_CLOEXEC, 0));
    if (!holder.valid())
      return makeSystemError(errno, "cannot hold revision {0}'s program array", live->id);
    return holder;
  }

private:
  std::string state;
  // Every revision's program array, by the revision's program id, held as
  // long as this binding (a test's): a revision left behind keeps its slots.
  mutable std::map<uint32_t, FileDescriptor> arrays;
};

// One slot as a loader configures it.
struct SlotSpec {
  int program = -1;
  uint32_t priority = 50;
  uint32_t chainCallActions = 1u << XDP_PASS;
};

// What a loader following the protocol does when an interface runs
// nothing yet: a revision of `slots` (in priority order), bound and pinned
// under the state directory, then attached through netlink (native mode:
// frames a veth peer redirects arrive only there) only if the hook is
// still free. Returns the revision.
inline Expected<FileDescriptor> attachFirstRevision(const TailCallSlots &binding,
                                                    const std::vector<SlotSpec> &slots,
                                                    const std::string &iface,
                                                    const std::string &netns) {
  bpf::DispatcherConfig config;
  config.slotsEnabled = slots.size();
  for (size_t i = 0; i < slots.size(); ++i) {
    config.chainCallActions[i] = slots[i].chainCallActions | (1u << bpf::DispatcherContinue);
    config.runPriorities[i] = slots[i].priority;
  }
  auto revision = binding.loadDispatcher(config);
  if (!revision)
    return revision.takeError();
  auto lock = bpf::DispatcherLock::take(binding.stateDirectory());
  if (!lock)
    return lock.takeError();
  int ifindex = 0;
  if (Error err = netns::runInNetns(netns, [&]() -> Error {
        ifindex = if_nametoindex(iface.c_str());
        return ifindex ? Error::success() : makeSystemError(errno, "no interface {0}", iface);
      }))
    return std::move(err);
  std::string pins = llvm::formatv("{0}/dispatch-{1}-{2}", binding.stateDirectory(), ifindex,
                                   bpf::liveProgram(revision->get())->id)
                         .str();
  if (mkdir(pins.c_str(), S_IRWXU))
    return makeSystemError(errno, "mkdir {0}", pins);
  for (size_t i = 0; i < slots.size(); ++i) {
    auto holder = binding.bind(revision->get(), config, i, slots[i].program);
    if (!holder)
      return holder.takeError();
    std::string prefix = pins + "/prog" + std::to_string(i);
    if (bpf_obj_pin(holder->get(), (prefix + "-link").c_str()) ||
        bpf_obj_pin(slots[i].program, (prefix + "-prog").c_str()))
      return makeSystemError(errno, "pinning slot {0} under {1}", i, pins);
  }
  if (Error err = netns::runInNetns(netns, [&]() -> Error {
        if (int err = bpf_xdp_attach(ifindex, revision->get(),
                                     XDP_FLAGS_DRV_MODE | XDP_FLAGS_UPDATE_IF_NOEXIST, nullptr))
          return makeSystemError(-err, "attaching the dispatcher to {0}", iface);
        return Error::success();
      }))
    return std::move(err);
  return revision;
}

} // namespace morpheus::testing
