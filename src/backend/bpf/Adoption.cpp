#include "backend/bpf/Adoption.h"

#include "backend/bpf/Extension.h"
#include "backend/bpf/PinDirectory.h"
#include "backend/bpf/ProgramLink.h"
#include "backend/bpf/ProgramType.h"
#include "support/Netns.h"

#include <bpf/bpf.h>
#include <bpf/libbpf.h>
#include <linux/if_link.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <net/if.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <deque>
#include <filesystem>
#include <set>

namespace morpheus::bpf {

namespace {

constexpr size_t KernelNameLength = BPF_OBJ_NAME_LEN - 1;

void closeFd(int &fd) {
  if (fd >= 0)
    close(fd);
  fd = -1;
}

// The program type a link of `facts` runs.
ProgramType linkProgramType(const LinkFacts &facts) {
  return facts.type == linkTypeOf(ProgramType::Tc) ? ProgramType::Tc : ProgramType::Xdp;
}

// The program a PROG_ARRAY slot holds, by id (0: empty). From user space
// a program array's lookup answers the program's id.
uint32_t slotProgramId(int arrayFd, uint32_t slot) {
  uint32_t id = 0;
  return bpf_map_lookup_elem(arrayFd, &slot, &id) ? 0 : id;
}

// The section part of an internal map's name (".rodata" of
// "policy_f.rodata"), or "" for a map declared in .maps.
llvm::StringRef sectionPart(llvm::StringRef name) {
  size_t dot = name.find('.');
  return dot == llvm::StringRef::npos ? llvm::StringRef() : name.substr(dot);
}

// Morpheus's own maps, linked into every version: never the owner's.
bool isMorpheusMap(llvm::StringRef name) {
  return name.starts_with("morpheus_") || name.contains(".morpheus");
}

// The longest chain of tail calls from `from` through `targets` (program
// id -> the programs its program arrays hold), or the first cycle found on
// the way; `onPath` holds the chain that led to `from`, `done` the chains
// from programs no cycle is reachable from (a cycle through one would have
// been found from it).
TailCallReach longestChain(uint32_t from, const std::map<uint32_t, std::set<uint32_t>> &targets,
                           const std::map<uint32_t, std::string> &names,
                           std::vector<uint32_t> &onPath,
                           std::map<uint32_t, TailCallReach> &done) {
  auto nameOf = [&](uint32_t id) {
    auto found = names.find(id);
    return found != names.end() ? found->second : "program " + std::to_string(id);
  };
  if (auto known = done.find(from); known != done.end())
    return known->second;
  onPath.push_back(from);
  TailCallReach best;
  if (auto next = targets.find(from); next != targets.end())
    for (uint32_t target : next->second) {
      if (llvm::is_contained(onPath, target)) {
        best = TailCallReach{true, 0, {}};
        for (uint32_t id : onPath)
          best.chain.push_back(nameOf(id));
        best.chain.push_back(nameOf(target));
        break;
      }
      TailCallReach further = longestChain(target, targets, names, onPath, done);
      if (further.cycle) {
        best = std::move(further);
        break;
      }
      if (further.longest + 1 > best.longest)
        best = TailCallReach{false, further.longest + 1, std::move(further.chain)};
    }
  onPath.pop_back();
  if (best.cycle)
    return best; // the chain holds the whole path
  best.chain.insert(best.chain.begin(), nameOf(from));
  done[from] = best;
  return best;
}

// Where a run pins the owner array of the hook it takes.
std::string ownerArrayPinIn(const std::string &pinDir) { return pinDir + "/owner_program"; }

// Where a version kept serving after its run (Adoption::keepServed) is
// pinned: the Morpheus array holding it, and the array it falls back
// through.
std::string servedArrayPinIn(const std::string &pinDir) { return pinDir + "/served_version"; }
std::string servedFallbackPinIn(const std::string &pinDir) { return pinDir + "/served_fallback"; }

// The map id of the owner array a killed run left pinned at `ownerPin`
// when it holds program `ownerId` (0: none there, or another program's).
uint32_t ownerArrayHolding(const std::string &ownerPin, uint32_t ownerId) {
  int array = bpf_obj_get(ownerPin.c_str());
  if (array < 0)
    return 0;
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  bool holds = slotProgramId(array, 0) == ownerId &&
               bpf_obj_get_info_by_fd(array, &info, &length) == 0;
  close(array);
  return holds ? info.id : 0;
}

// Whether program `id` is a Morpheus trampoline on the owner array of map
// id `ownerArrayId`.
bool isTrampolineOn(uint32_t id, uint32_t ownerArrayId) {
  int program = bpf_prog_get_fd_by_id(id);
  if (program < 0)
    return false;
  auto live = liveProgram(program);
  close(program);
  if (!live) {
    llvm::consumeError(live.takeError());
    return false;
  }
  return live->name == TrampolineName && llvm::is_contained(live->mapIds, ownerArrayId);
}

// Where a run adopting an extension in a dispatcher slot pins the owner's
// program while its slot holds the trampoline.
std::string ownerSlotPinIn(const std::string &pinDir) { return pinDir + "/owner_slot_program"; }

// The id of the owner array a killed run left for program `programId`:
// its owner array holds the program, or (a dispatcher slot's extension)
// its owner pin does. 0: none.
uint32_t ownerArrayLeftFor(const std::string &pinDir, uint32_t programId) {
  if (uint32_t array = ownerArrayHolding(ownerArrayPinIn(pinDir), programId))
    return array;
  FileDescriptor owner(bpf_obj_get(ownerSlotPinIn(pinDir).c_str()));
  auto program = owner.valid() ? liveProgram(owner.get()) : Expected<LiveProgram>(LiveProgram{});
  if (!program) {
    llvm::consumeError(program.takeError());
    return 0;
  }
  if (program->id != programId)
    return 0;
  FileDescriptor array(bpf_obj_get(ownerArrayPinIn(pinDir).c_str()));
  bpf_map_info info = {};
  uint32_t length = sizeof(info);
  return array.valid() && bpf_obj_get_info_by_fd(array.get(), &info, &length) == 0 ? info.id : 0;
}

// The slot of `dispatcher` holding program `programId`, or the trampoline
// a killed run left in its place.
const DispatcherSlot *slotOfProgram(const Dispatcher &dispatcher, uint32_t programId,
                                    const std::string &pinDir) {
  if (const DispatcherSlot *slot = dispatcher.slotHolding(programId))
    return slot;
  if (uint32_t array = ownerArrayLeftFor(pinDir, programId))
    for (const DispatcherSlot &slot : dispatcher.slots)
      if (isTrampolineOn(slot.programId, array))
        return &slot;
  return nullptr;
}

Expected<const DispatcherSlot *> noSuchSlot(const Dispatcher &dispatcher, const std::string &iface,
                                            const std::string &what) {
  return makeError("no slot of the XDP dispatcher on '{0}' (id {1}) holds {2}; its slots:\n  {3}",
                   iface, dispatcher.id, what, llvm::join(dispatcher.describeSlots(), "\n  "));
}

} // namespace

Expected<std::unique_ptr<Adoption>> Adoption::adopt(const std::string &target,
                                                    const std::string &netns,
                                                    const std::string &pinDir,
                                                    std::shared_ptr<const SlotBinding> slots) {
  std::unique_ptr<Adoption> adoption(new Adoption());
  adoption->netns = netns;
  adoption->dispatcherSlots = std::move(slots);
  if (Error err = adoption->findHook(target, pinDir))
    return withContext(std::move(err), "adopting '" + target + "'");
  if (Error err = adoption->prepare(pinDir))
    return withContext(std::move(err), "adopting '" + target + "'");
  return adoption;
}

Expected<std::unique_ptr<Adoption>> Adoption::adoptSlot(std::unique_ptr<DispatcherHook> hook,
                                                        uint32_t programId,
                                                        const std::string &pinDir) {
  std::unique_ptr<Adoption> adoption(new Adoption());
  adoption->netns = hook->namespaceName();
  std::string what = "adopting program " + std::to_string(programId);
  if (Error err = adoption->findSlot(
          std::move(hook), pinDir,
          [&](const Dispatcher &dispatcher) -> Expected<const DispatcherSlot *> {
            if (auto *slot = slotOfProgram(dispatcher, programId, pinDir))
              return slot;
            return noSuchSlot(dispatcher, adoption->iface, "program " + std::to_string(programId));
          }))
    return withContext(std::move(err), what);
  if (Error err = adoption->prepare(pinDir))
    return withContext(std::move(err), what);
  return adoption;
}

Error Adoption::prepare(const std::string &pinDir) {
  if (Error err = recogniseOwner(pinDir))
    return err;
  if (Error err = collectMaps())
    return err;
  return prepareTrampoline();
}

Adoption::~Adoption() {
  for (auto &[name, fd] : ownerMaps)
    close(fd);
  closeFd(trampoline);
  closeFd(morpheusArray); // the last user reference: the kernel empties it
  closeFd(ownerArray);
  closeFd(ownerProgram);
  closeFd(hookProgram);
  closeFd(link);
}

Error Adoption::findHook(const std::string &target, const std::string &pinDir) {
  uint32_t programId = 0;
  // Which program type the link found runs, and where.
  auto takeLink = [&](int fd) {
    link = fd;
    std::optional<LinkFacts> facts = linkFacts(link);
    type = linkProgramType(*facts);
    tcxAttach = facts->attachType;
    ifindex = facts->ifindex;
    iface = "ifindex " + std::to_string(ifindex);
    programId = facts->programId;
  };
  size_t colon = target.rfind(':');
  if (llvm::StringRef(target).starts_with("/")) {
    int fd = bpf_obj_get(target.c_str());
    if (fd < 0)
      return makeSystemError(errno, "no pinned link at {0}", target);
    std::optional<LinkFacts> facts = linkFacts(fd);
    if (facts && facts->type == BPF_LINK_TYPE_TRACING) {
      // A dispatcher slot's link (libxdp's progN-link): its program's slot.
      close(fd);
      return findSlotById(facts->programId, pinDir);
    }
    if (!facts || (facts->type != linkTypeOf(ProgramType::Xdp) &&
                   facts->type != linkTypeOf(ProgramType::Tc))) {
      close(fd);
      return makeError("{0} is not an XDP, tcx or dispatcher slot's link (only those can be "
                       "adopted)",
                       target);
    }
    if (!facts->programId || !facts->ifindex) {
      close(fd);
      return makeError("the link pinned at {0} is detached", target);
    }
    takeLink(fd);
  } else if (!target.empty() && llvm::all_of(target, llvm::isDigit)) {
    if (!llvm::to_integer(target, programId))
      return makeError("'{0}' is not a program id", target);
    int fd =
        findLink([&](const LinkFacts &facts) { return facts.programId == programId; }).release();
    // A run that was killed (kill -9) left its trampoline where the
    // program was, the program in the owner array it pinned here: that
    // hook is the program's, taken over as an interface's would be.
    if (fd < 0)
      if (uint32_t ownerArrayId = ownerArrayHolding(ownerArrayPinIn(pinDir), programId))
        fd = findLink([&](const LinkFacts &facts) {
               return isTrampolineOn(facts.programId, ownerArrayId);
             }).release();
    if (fd < 0)
      return findSlotById(programId, pinDir);
    takeLink(fd);
  } else if (size_t slash = target.find('/'); slash != std::string::npos) {
    // IFACE/NAME or IFACE/PRIORITY: a slot of the interface's dispatcher
    // (an interface's name never holds '/').
    std::string chosen = target.substr(slash + 1);
    uint32_t priority = 0;
    bool byPriority = llvm::to_integer(chosen, priority);
    return findSlot(dispatcherHookOn(target.substr(0, slash)), pinDir,
                    [&](const Dispatcher &dispatcher) -> Expected<const DispatcherSlot *> {
                      const DispatcherSlot *found = nullptr;
                      for (const DispatcherSlot &slot : dispatcher.slots)
                        if (byPriority ? slot.runPriority == priority
                                       : slot.name == chosen.substr(0, KernelNameLength)) {
                          if (found)
                            return makeError("two slots of the dispatcher on '{0}' have {1} "
                                             "'{2}'; name the program by id",
                                             iface, byPriority ? "priority" : "a program named",
                                             chosen);
                          found = &slot;
                        }
                      if (!found)
                        return noSuchSlot(dispatcher, iface,
                                          (byPriority ? "priority " : "a program named ") + chosen);
                      return found;
                    });
  } else if (colon != std::string::npos) {
    if (Error err = findTcxHook(target.substr(0, colon), target.substr(colon + 1)))
      return err;
    programId = linkFacts(link)->programId;
  } else {
    iface = target;
    Error found = netns::runInNetns(netns, [&]() -> Error {
      ifindex = if_nametoindex(target.c_str());
      if (!ifindex)
        return makeSystemError(errno, "no interface '{0}'{1}", target,
                               netns.empty() ? "" : " in network namespace '" + netns + "'");
      return Error::success();
    });
    if (found)
      return found;
    auto attached = attachedXdpProgram(ifindex, netns);
    if (!attached)
      return withContext(attached.takeError(), "interface '" + target + "'");
    programId = attached->programId;
    uint8_t attachMode = attached->mode;
    if (!programId)
      return makeError("interface '{0}': no XDP program is attached; nothing to adopt (a TC "
                       "program: --adopt {0}:ingress or {0}:egress)",
                       target);
    auto dispatcher = dispatcherConfigOf(programId);
    if (!dispatcher)
      return dispatcher.takeError();
    if (*dispatcher)
      return findSlot(dispatcherHookOn(target), pinDir,
                      [&](const Dispatcher &running) -> Expected<const DispatcherSlot *> {
                        if (running.slots.size() == 1)
                          return &running.slots.front();
                        return makeError("interface '{0}' runs an XDP dispatcher of {1} slots; "
                                         "name one (--adopt {0}/NAME, {0}/PRIORITY or the "
                                         "program's id):\n  {2}",
                                         target, running.slots.size(),
                                         llvm::join(running.describeSlots(), "\n  "));
                      });
    link = findLink([&](const LinkFacts &facts) {
             return facts.type == linkTypeOf(ProgramType::Xdp) && facts.programId == programId &&
                    facts.ifindex == uint32_t(ifindex);
           }).release();
    if (link < 0) {
      // Attached through netlink (ip link, bpftool net attach, xdp-loader).
      if (attachMode == XDP_ATTACHED_DRV)
        xdpFlags = XDP_FLAGS_DRV_MODE;
      else if (attachMode == XDP_ATTACHED_SKB)
        xdpFlags = XDP_FLAGS_SKB_MODE;
      else
        return makeError("interface '{0}': its XDP program is attached in a mode that "
                         "cannot be adopted (offloaded, or several programs)",
                         target);
    }
  }
  hookProgram = bpf_prog_get_fd_by_id(programId);
  if (hookProgram < 0)
    return makeSystemError(errno, "program {0}: cannot open it", programId);
  return Error::success();
}

Error Adoption::findSlot(
    std::unique_ptr<DispatcherHook> hook, const std::string &pinDir,
    llvm::function_ref<Expected<const DispatcherSlot *>(const Dispatcher &)> choose) {
  if (hook->slots().slotsAreExtensions())
    if (Error err = requireExtensions("adopting a program in a libxdp dispatcher slot"))
      return err;
  type = ProgramType::Xdp;
  iface = hook->interface();
  auto read = hook->read();
  if (!read)
    return read.takeError();
  if (!*read)
    return makeError("interface '{0}' runs no XDP dispatcher", iface);
  const Dispatcher &dispatcher = **read;
  auto chosen = choose(dispatcher);
  if (!chosen)
    return chosen.takeError();
  ifindex = dispatcher.ifindex;
  slotIndex = (*chosen)->index;
  slotPriority = (*chosen)->runPriority;
  hookProgram = bpf_prog_get_fd_by_id((*chosen)->programId);
  if (hookProgram < 0)
    return makeSystemError(errno, "program {0}: cannot open it", (*chosen)->programId);
  slotHook = std::move(hook);
  ownerSlotPin = ownerSlotPinIn(pinDir);
  return Error::success();
}

std::unique_ptr<DispatcherHook> Adoption::dispatcherHookOn(const std::string &name) const {
  return std::make_unique<DispatcherHook>(dispatcherSlots, name, netns);
}

// A program in a slot of one of the dispatchers: their pins name the
// interface (dispatch-IFINDEX-ID, an index in `netns`).
Error Adoption::findSlotById(uint32_t programId, const std::string &pinDir) {
  std::string state = dispatcherSlots->stateDirectory();
  std::error_code ec;
  for (const auto &entry : std::filesystem::directory_iterator(state, ec)) {
    int index = 0;
    uint32_t dispatcherId = 0;
    std::string fileName = entry.path().filename().native(); // outlives `name`
    llvm::StringRef name(fileName);
    if (!name.consume_front("dispatch-"))
      continue;
    auto [indexText, idText] = name.split('-');
    if (!llvm::to_integer(indexText, index) || !llvm::to_integer(idText, dispatcherId))
      continue;
    std::string found;
    llvm::consumeError(netns::runInNetns(netns, [&]() -> Error {
      char buffer[IF_NAMESIZE] = {};
      if (if_indextoname(index, buffer))
        found = buffer;
      return Error::success();
    }));
    if (found.empty())
      continue;
    std::unique_ptr<DispatcherHook> hook = dispatcherHookOn(found);
    auto read = hook->read();
    if (!read) {
      llvm::consumeError(read.takeError());
      continue;
    }
    if (*read && (*read)->id == dispatcherId && slotOfProgram(**read, programId, pinDir))
      return findSlot(std::move(hook), pinDir,
                      [&](const Dispatcher &dispatcher) -> Expected<const DispatcherSlot *> {
                        if (auto *slot = slotOfProgram(dispatcher, programId, pinDir))
                          return slot;
                        return noSuchSlot(dispatcher, found,
                                          "program " + std::to_string(programId));
                      });
  }
  return makeError("no XDP or tcx link runs program {0}, nor does a slot of a libxdp dispatcher "
                   "(pinned under {1}{2}); name its hook instead (--adopt IFACE, IFACE/NAME or "
                   "IFACE:ingress|egress, with --netns for another namespace). A classifier "
                   "attached with 'tc filter' cannot be adopted: attach it through tcx",
                   programId, state, netns.empty() ? "" : ", interfaces of namespace " + netns);
}

// "IFACE:ingress": the one tcx link of that direction on the interface.
Error Adoption::findTcxHook(const std::string &name, const std::string &direction) {
  if (direction != "ingress" && direction != "egress")
    return makeError("'{0}:{1}': a tcx hook is IFACE:ingress or IFACE:egress", name,
                     direction);
  iface = name;
  uint32_t attach =
      tcxAttachType(direction == "ingress" ? TcDirection::Ingress : TcDirection::Egress);
  // A link's facts name the interface by index, and every network namespace
  // numbers its interfaces anew: the programs the hook of this interface
  // runs, asked of the kernel inside its namespace, tell its links from
  // those of an interface of the same index elsewhere.
  std::set<uint32_t> onThisInterface;
  Error found = netns::runInNetns(netns, [&]() -> Error {
    ifindex = if_nametoindex(name.c_str());
    if (!ifindex)
      return makeSystemError(errno, "no interface '{0}'{1}", name,
                             netns.empty() ? "" : " in network namespace '" + netns + "'");
    std::array<uint32_t, 64> ids{};
    LIBBPF_OPTS(bpf_prog_query_opts, query, .prog_ids = ids.data(), .prog_cnt = ids.size());
    if (bpf_prog_query_opts(ifindex, bpf_attach_type(attach), &query) != 0)
      return makeSystemError(errno, "interface '{0}': cannot list the programs of its tcx {1} "
                                    "hook", name, direction);
    onThisInterface.insert(ids.begin(), ids.begin() + std::min<size_t>(query.prog_cnt, ids.size()));
    return Error::success();
  });
  if (found)
    return found;
  auto onHook = [&](const LinkFacts &facts) {
    return facts.type == linkTypeOf(ProgramType::Tc) && facts.ifindex == uint32_t(ifindex) &&
           facts.attachType == attach && onThisInterface.count(facts.programId);
  };
  std::vector<uint32_t> programs;
  uint32_t id = 0;
  while (bpf_link_get_next_id(id, &id) == 0) {
    int fd = bpf_link_get_fd_by_id(id);
    if (fd < 0)
      continue;
    if (std::optional<LinkFacts> facts = linkFacts(fd); facts && onHook(*facts))
      programs.push_back(facts->programId);
    close(fd);
  }
  if (programs.empty())
    return makeError("interface '{0}': no tcx {1} link; nothing to adopt (a classifier "
                     "attached with 'tc filter' cannot be adopted: netlink replaces a filter "
                     "whatever program it runs, so giving the hook back could undo the "
                     "owner's own change; attach it through tcx)",
                     name, direction);
  if (programs.size() > 1) {
    std::vector<std::string> ids;
    for (uint32_t program : programs)
      ids.push_back(std::to_string(program));
    return makeError("interface '{0}': {1} tcx {2} links (programs {3}); say which with "
                     "--adopt PROG_ID or its pinned link",
                     name, programs.size(), direction, llvm::join(ids, ", "));
  }
  link = findLink(onHook).release();
  if (link < 0)
    return makeError("interface '{0}': its tcx {1} link went away", name, direction);
  type = ProgramType::Tc;
  tcxAttach = attach;
  return Error::success();
}

Error Adoption::recogniseOwner(const std::string &pinDir) {
  if (std::error_code ec = llvm::sys::fs::create_directories(pinDir))
    return makeSystemError(ec.value(), "pin directory '{0}'", pinDir);
  ownerPin = ownerArrayPinIn(pinDir);
  servedPin = servedArrayPinIn(pinDir);
  servedFallbackPin = servedFallbackPinIn(pinDir);
  auto hook = liveProgram(hookProgram);
  if (!hook)
    return hook.takeError();
  if (hook->name == TrampolineName) {
    // An earlier run's trampoline: its owner array is pinned here, and its
    // other array (emptied when that run ended) is taken back by id.
    ownerArray = bpf_obj_get(ownerPin.c_str());
    if (ownerArray < 0)
      return makeSystemError(errno,
                             "{0} runs a Morpheus trampoline (program {1}) but no owner array "
                             "is pinned at {2} (was another --pin-dir used?)",
                             iface, hook->id, ownerPin);
    bpf_map_info info = {};
    uint32_t length = sizeof(info);
    if (bpf_obj_get_info_by_fd(ownerArray, &info, &length))
      return makeSystemError(errno, "{0}: cannot read the owner array", ownerPin);
    uint32_t ownerArrayId = info.id;
    if (std::find(hook->mapIds.begin(), hook->mapIds.end(), ownerArrayId) == hook->mapIds.end())
      return makeError("{0}: the trampoline on {1} (program {2}) does not use the owner array "
                       "pinned there",
                       ownerPin, iface, hook->id);
    for (uint32_t id : hook->mapIds)
      if (id != ownerArrayId)
        morpheusArray = bpf_map_get_fd_by_id(id);
    // An extension's owner array holds Morpheus's stand-in; the owner's
    // program is pinned beside it.
    if (ownerIsExtension()) {
      ownerProgram = bpf_obj_get(ownerSlotPin.c_str());
      auto owner =
          ownerProgram >= 0 ? liveProgram(ownerProgram) : Expected<LiveProgram>(LiveProgram{});
      if (!owner)
        return owner.takeError();
      ownerId = owner->id;
    } else {
      ownerId = slotProgramId(ownerArray, 0);
      ownerProgram = ownerId ? bpf_prog_get_fd_by_id(ownerId) : -1;
    }
    if (morpheusArray < 0 || ownerProgram < 0)
      return makeError("{0}: the trampoline left on {1} has lost its arrays or the owner's "
                       "program",
                       ownerPin, iface);
    auto owner = liveProgram(ownerProgram);
    if (!owner)
      return owner.takeError();
    ownerName = owner->name;
    trampoline = std::exchange(hookProgram, -1);
    restarted = true;
    // A version the earlier run kept serving serves on (the daemon decides
    // how long); nothing else may run in it that this run did not build.
    if (earlierVersionKept())
      return Error::success();
    unpinServed();
    return serve(-1);
  }

  ownerProgram = std::exchange(hookProgram, -1);
  ownerId = hook->id;
  ownerName = hook->name;
  return Error::success();
}

Error Adoption::prepareTrampoline() {
  if (restarted && ownerIsExtension()) {
    // The extension left took its target's kind; its emptied array says it.
    auto attach = arrayAttachType();
    if (!attach)
      return attach.takeError();
    ownerAttach = *attach;
    return Error::success();
  }
  if (restarted) {
    // The hook runs our trampoline already; loading its like again on the
    // same arrays says which attach type the owner's program has.
    auto probe = loadTrampoline();
    if (!probe)
      return probe.takeError();
    close(*probe);
    return Error::success();
  }
  ownerArray = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "morpheus_owner", 4, 4, 1, nullptr);
  if (ownerArray < 0)
    return makeSystemError(errno, "cannot create the trampoline's owner array");
  uint32_t slot = 0;
  // An extension sits in no program array: takeHook() puts the stand-in.
  if (!ownerIsExtension() && bpf_map_update_elem(ownerArray, &slot, &ownerProgram, BPF_ANY))
    return makeSystemError(errno, "the owner's program '{0}' (id {1}) cannot join a program "
                                  "array (an XDP program with fragments?)",
                           ownerName, ownerId);
  auto loaded = loadTrampoline();
  if (!loaded)
    return loaded.takeError();
  trampoline = *loaded;
  return Error::success();
}

Expected<int> Adoption::loadTrampoline() {
  auto insn = [](uint8_t code, uint8_t dst, uint8_t src, int32_t imm) {
    bpf_insn one = {};
    one.code = code;
    one.dst_reg = dst;
    one.src_reg = src;
    one.imm = imm;
    return one;
  };
  // r2 = the map (a 16-byte load: the second half is zero).
  auto loadMap = [&](int fd) { return insn(BPF_LD | BPF_DW | BPF_IMM, BPF_REG_2, BPF_PSEUDO_MAP_FD, fd); };
  auto code = [&]() -> std::vector<bpf_insn> { return {
      insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_6, BPF_REG_1, 0),
      loadMap(morpheusArray), bpf_insn{},
      insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0),
      insn(BPF_JMP | BPF_CALL, 0, 0, BPF_FUNC_tail_call),
      insn(BPF_ALU64 | BPF_MOV | BPF_X, BPF_REG_1, BPF_REG_6, 0),
      loadMap(ownerArray), bpf_insn{},
      insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_3, 0, 0),
      insn(BPF_JMP | BPF_CALL, 0, 0, BPF_FUNC_tail_call),
      insn(BPF_ALU64 | BPF_MOV | BPF_K, BPF_REG_0, 0, int32_t(dropVerdict(type))),
      insn(BPF_JMP | BPF_EXIT, 0, 0, 0),
  }; };
  if (ownerIsExtension()) {
    // In the owner's slot it is an extension of the slot's function, on
    // fresh arrays, which take its target's kind.
    closeFd(morpheusArray);
    morpheusArray = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "morpheus_spec", 4, 4, 1, nullptr);
    if (morpheusArray < 0)
      return makeSystemError(errno, "cannot create the trampoline's Morpheus array");
    auto read = slotHook->read();
    if (!read)
      return read.takeError();
    const DispatcherSlot *slot = *read ? (*read)->slotHolding(ownerId) : nullptr;
    if (!slot)
      return makeError("{0}: the dispatcher no longer holds program {1}", iface, ownerId);
    auto extension = loadXdpExtension(code(), TrampolineName, (*read)->program.get(),
                                      slotFunction(slot->index, (*read)->config.slotsEnabled));
    if (!extension)
      return withContext(extension.takeError(), "the trampoline");
    auto attach = arrayAttachType();
    if (!attach)
      return attach.takeError();
    ownerAttach = *attach;
    return extension->release();
  }
  // A program array takes only programs of its owner's kind, expected
  // attach type included: libbpf loads SEC("xdp") with BPF_XDP, a raw
  // loader with none; SEC("tc") with none, SEC("tcx/ingress") (libbpf 1.3)
  // with BPF_TCX_INGRESS. The kind that fits the owner array (the owner's
  // program is in it) is the one that loads: the owner's.
  std::vector<bpf_attach_type> candidates;
  if (type == ProgramType::Tc)
    candidates = {bpf_attach_type(0), bpf_attach_type(tcxAttachType(TcDirection::Ingress)),
                  bpf_attach_type(tcxAttachType(TcDirection::Egress))};
  else
    candidates = {BPF_XDP, bpf_attach_type(0)};
  std::vector<char> log(16384);
  int loaded = -1;
  for (bpf_attach_type attach : candidates) {
    // A refused load may have made the fresh Morpheus array of the refused
    // kind (the kernel fixes an array's kind at the first program checked
    // against it): each attempt gets a fresh one. A re-adoption's has the
    // owner's kind already.
    if (!restarted) {
      closeFd(morpheusArray);
      morpheusArray = bpf_map_create(BPF_MAP_TYPE_PROG_ARRAY, "morpheus_spec", 4, 4, 1, nullptr);
      if (morpheusArray < 0)
        return makeSystemError(errno, "cannot create the trampoline's Morpheus array");
    }
    LIBBPF_OPTS(bpf_prog_load_opts, load, .expected_attach_type = attach, .log_level = 1,
                .log_size = uint32_t(log.size()), .log_buf = log.data());
    std::vector<bpf_insn> instructions = code();
    loaded = bpf_prog_load(bpf_prog_type(kernelProgramType()), TrampolineName, "GPL",
                           instructions.data(), instructions.size(), &load);
    ownerAttach = attach;
    if (loaded >= 0 || errno != EINVAL)
      break;
  }
  if (loaded < 0)
    return makeSystemError(errno, "the trampoline was refused (no expected attach type of a "
                                  "{0} program fits the owner's program '{1}'); verifier "
                                  "log:\n{2}",
                           programTypeName(type), ownerName, log.data());
  return loaded;
}

Expected<uint32_t> Adoption::arrayAttachType() const {
  std::vector<bpf_insn> code = returnPass();
  uint32_t slot = 0;
  for (bpf_attach_type attach : {BPF_XDP, bpf_attach_type(0)}) {
    LIBBPF_OPTS(bpf_prog_load_opts, load, .expected_attach_type = attach);
    FileDescriptor probe(bpf_prog_load(BPF_PROG_TYPE_XDP, "morpheus_probe", "GPL", code.data(),
                                           code.size(), &load));
    int fd = probe.get();
    if (probe.valid() && bpf_map_update_elem(morpheusArray, &slot, &fd, BPF_ANY) == 0) {
      bpf_map_delete_elem(morpheusArray, &slot);
      return uint32_t(attach);
    }
  }
  return makeError("{0}: no XDP program fits the trampoline's program arrays", iface);
}

bool Adoption::ownerIsExtension() const {
  return slotHook && slotHook->slots().slotsAreExtensions();
}

uint32_t Adoption::kernelProgramType() const {
  return type == ProgramType::Tc ? BPF_PROG_TYPE_SCHED_CLS : BPF_PROG_TYPE_XDP;
}

Error Adoption::takeHook(int standIn) {
  if (restarted || hookTaken)
    return Error::success(); // the hook runs our trampoline already
  // Pins left by a run whose owner has since moved on hold nothing of use.
  unlink(ownerPin.c_str());
  unpinServed();
  if (ownerIsExtension()) {
    uint32_t slot = 0;
    if (standIn < 0 || bpf_map_update_elem(ownerArray, &slot, &standIn, BPF_ANY))
      return makeSystemError(standIn < 0 ? EINVAL : errno,
                             "{0}: the owner's program is an extension, and no stand-in for it "
                             "joined the owner array",
                             describe());
    unlink(ownerSlotPin.c_str());
    if (bpf_obj_pin(ownerProgram, ownerSlotPin.c_str()))
      return makeSystemError(errno, "cannot pin the owner's program at {0}", ownerSlotPin);
  }
  auto unpin = [&] {
    unlink(ownerPin.c_str());
    if (ownerIsExtension())
      unlink(ownerSlotPin.c_str());
  };
  if (bpf_obj_pin(ownerArray, ownerPin.c_str())) {
    unpin();
    return makeSystemError(errno, "cannot pin the owner array at {0}", ownerPin);
  }
  if (Error err = switchHook(ownerProgram, trampoline)) {
    unpin();
    return err;
  }
  hookTaken = true;
  return Error::success();
}

Error Adoption::collectMaps() {
  // Tail-called stages use maps the entry does not.
  auto walked = walkPrograms([&](int map, const bpf_map_info &info) {
    // Two maps of one name (cut to 15 characters): the first counts.
    return ownerMaps.emplace(info.name, map).second;
  });
  if (!walked)
    return walked.takeError();
  reach = std::move(*walked);
  return Error::success();
}

Expected<TailCallReach> Adoption::tailCallsNow() const {
  return walkPrograms([](int, const bpf_map_info &) { return false; });
}

Expected<TailCallReach>
Adoption::walkPrograms(llvm::function_ref<bool(int mapFd, const bpf_map_info &info)> keepMap) const {
  std::deque<uint32_t> programs{ownerId};
  std::set<uint32_t> seenPrograms{ownerId}, seenMaps;
  std::map<uint32_t, std::set<uint32_t>> arraysOf, tailCallTargets;
  std::map<uint32_t, std::set<uint32_t>> heldBy; // program array id -> programs
  std::map<uint32_t, std::string> names;
  while (!programs.empty()) {
    uint32_t id = programs.front();
    programs.pop_front();
    int fd = bpf_prog_get_fd_by_id(id);
    if (fd < 0)
      continue; // unloaded meanwhile: a stage the owner replaced
    auto facts = liveProgram(fd);
    close(fd);
    if (!facts)
      return facts.takeError();
    names[id] = facts->name;
    arraysOf[id].insert(facts->mapIds.begin(), facts->mapIds.end());
    for (uint32_t mapId : facts->mapIds) {
      if (!seenMaps.insert(mapId).second)
        continue;
      int map = bpf_map_get_fd_by_id(mapId);
      if (map < 0)
        return makeSystemError(errno, "map {0} of program '{1}': cannot open it", mapId,
                               facts->name);
      bpf_map_info info = {};
      uint32_t length = sizeof(info);
      if (bpf_obj_get_info_by_fd(map, &info, &length)) {
        close(map);
        return makeSystemError(errno, "map {0}: cannot read its info", mapId);
      }
      if (info.type == BPF_MAP_TYPE_PROG_ARRAY)
        for (uint32_t slot = 0; slot < info.max_entries; ++slot)
          if (uint32_t held = slotProgramId(map, slot)) {
            heldBy[mapId].insert(held);
            if (seenPrograms.insert(held).second)
              programs.push_back(held);
          }
      if (!keepMap(map, info))
        close(map);
    }
  }
  for (const auto &[program, arrays] : arraysOf)
    for (uint32_t array : arrays)
      if (auto held = heldBy.find(array); held != heldBy.end())
        tailCallTargets[program].insert(held->second.begin(), held->second.end());
  std::vector<uint32_t> onPath;
  std::map<uint32_t, TailCallReach> done;
  return longestChain(ownerId, tailCallTargets, names, onPath, done);
}

std::string TailCallReach::describe() const {
  return llvm::join(chain, " -> ") + (cycle ? " (a cycle)" : "");
}

Expected<std::map<std::string, int>>
Adoption::mapsFor(const std::map<std::string, MapLayout> &declared) const {
  std::map<std::string, int> maps;
  for (const auto &[name, layout] : declared) {
    if (isMorpheusMap(name))
      continue;
    auto found = ownerMaps.find(name.substr(0, KernelNameLength));
    if (found == ownerMaps.end() && !sectionPart(name).empty())
      found = llvm::find_if(ownerMaps, [&](const auto &owned) {
        llvm::StringRef ours = sectionPart(name), theirs = sectionPart(owned.first);
        // The owner's object name may be longer than ours: its name is cut.
        return !theirs.empty() && (ours == theirs || (owned.first.size() == KernelNameLength &&
                                                      ours.starts_with(theirs)));
      });
    if (found == ownerMaps.end()) {
      std::vector<std::string> names;
      for (const auto &[owned, fd] : ownerMaps)
        names.push_back(owned);
      return makeError("map '{0}': the adopted program '{1}' (id {2}) has no map of that name "
                       "(its maps: {3}); the source must be the program that runs",
                       name, ownerName, ownerId, llvm::join(names, ", "));
    }
    maps[name] = found->second;
  }
  return maps;
}

Error Adoption::switchHook(int from, int to) {
  if (slotHook) {
    auto replaced = liveProgram(from);
    if (!replaced)
      return replaced.takeError();
    return slotHook->replace(replaced->id, to);
  }
  if (link >= 0) {
    bpf_link_update_opts opts = {};
    opts.sz = sizeof(opts);
    opts.flags = BPF_F_REPLACE;
    opts.old_prog_fd = from;
    if (bpf_link_update(link, to, &opts))
      return makeSystemError(errno, "{0}: the link no longer runs the program expected", iface);
    return Error::success();
  }
  return netns::runInNetns(netns, [&]() -> Error {
    bpf_xdp_attach_opts opts = {};
    opts.sz = sizeof(opts);
    opts.old_prog_fd = from;
    if (int err = bpf_xdp_attach(ifindex, to, xdpFlags | XDP_FLAGS_REPLACE, &opts))
      return makeSystemError(-err, "{0}: the interface no longer runs the program expected",
                             iface);
    return Error::success();
  });
}

uint32_t Adoption::hookProgramId() const {
  if (link >= 0) {
    std::optional<LinkFacts> facts = linkFacts(link);
    return facts ? facts->programId : 0;
  }
  auto attached = attachedXdpProgram(ifindex, netns);
  if (!attached) {
    llvm::consumeError(attached.takeError());
    return 0;
  }
  return attached->programId;
}

uint32_t Adoption::trampolineId() const {
  bpf_prog_info info = {};
  uint32_t length = sizeof(info);
  return trampoline >= 0 && bpf_obj_get_info_by_fd(trampoline, &info, &length) == 0 ? info.id
                                                                                    : 0;
}

Error Adoption::serve(int programFd) {
  uint32_t slot = 0;
  if (programFd < 0) {
    if (bpf_map_delete_elem(morpheusArray, &slot) && errno != ENOENT)
      return makeSystemError(errno, "{0}: cannot empty the trampoline's slot", iface);
    return Error::success();
  }
  if (bpf_map_update_elem(morpheusArray, &slot, &programFd, BPF_ANY))
    return makeSystemError(errno, "{0}: cannot install the program in the trampoline", iface);
  return Error::success();
}

uint32_t Adoption::servedProgramId() const { return slotProgramId(morpheusArray, 0); }

bool Adoption::earlierVersionKept() {
  int pinned = bpf_obj_get(servedPin.c_str());
  if (pinned < 0)
    return false;
  bool ours = objectId(pinned) == objectId(morpheusArray);
  close(pinned);
  if (!ours || !servedProgramId())
    return false;
  earlierFallback.reset(bpf_obj_get(servedFallbackPin.c_str()));
  keptServing = earlierFallback.valid();
  return keptServing;
}

Error Adoption::keepServed(int fallbackFd) {
  // The fallback array first: the version pinned must never be without it.
  unlink(servedFallbackPin.c_str());
  if (bpf_obj_pin(fallbackFd, servedFallbackPin.c_str()))
    return makeSystemError(errno, "cannot pin the served version's fallback array at {0}",
                           servedFallbackPin);
  unlink(servedPin.c_str());
  if (bpf_obj_pin(morpheusArray, servedPin.c_str()))
    return makeSystemError(errno, "cannot pin the trampoline's Morpheus array at {0}", servedPin);
  keptServing = true;
  return Error::success();
}

void Adoption::releaseServed() {
  if (!keptServing)
    return;
  unlink(servedPin.c_str());
  keptServing = false;
}

void Adoption::unpinServed() {
  unlink(servedPin.c_str());
  unlink(servedFallbackPin.c_str());
  keptServing = false;
}

bool Adoption::ownerMovedOn() const {
  return slotHook ? !slotHook->runs(trampolineId()) : hookProgramId() != trampolineId();
}

Error Adoption::restore() {
  if (restored || !(restarted || hookTaken))
    return Error::success(); // the hook was never taken
  restored = true;
  Error err = ownerMovedOn() ? Error::success() : switchHook(trampoline, ownerProgram);
  unlink(ownerPin.c_str());
  unpinServed();
  if (ownerIsExtension())
    unlink(ownerSlotPin.c_str());
  return err;
}

std::string Adoption::describe() const {
  if (slotHook)
    return llvm::formatv("slot {0} (priority {1}) of the XDP dispatcher on {2}{3}, program '{4}' "
                         "(id {5})",
                         slotIndex, slotPriority, iface,
                         netns.empty() ? "" : " in namespace " + netns, ownerName, ownerId)
        .str();
  std::string how = type == ProgramType::Tc
                        ? std::string("tcx ") +
                              (tcxAttach == tcxAttachType(TcDirection::Egress) ? "egress" : "ingress") +
                              " link"
                    : link >= 0 ? "XDP link"
                                : "XDP netlink attachment";
  return llvm::formatv("{0} on {1}{2}, program '{3}' (id {4})", how, iface,
                       netns.empty() ? "" : " in namespace " + netns, ownerName, ownerId)
      .str();
}

} // namespace morpheus::bpf
