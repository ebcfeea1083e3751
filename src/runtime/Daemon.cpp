#include "runtime/Daemon.h"

#include "core/PhaseClock.h"
#include "core/SiteEligibility.h"
#include "support/Files.h"

#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/xxhash.h>
#include <nlohmann/json.hpp>

#include <algorithm>

namespace morpheus::runtime {

namespace {

// The hot keys the traffic decided per profiled site (none where it
// decided no fast path).
std::map<unsigned, std::vector<core::Bytes>>
hotKeysOf(const std::map<unsigned, core::SiteTraffic> &traffic) {
  std::map<unsigned, std::vector<core::Bytes>> keys;
  for (const auto &[site, decided] : traffic)
    keys[site] = decided.hotKeys;
  return keys;
}

// Cycles that failed or were refused in a row wait 2^n periods, up to 64.
constexpr unsigned MaxBackOffShift = 6;

// Why an adopted program's chain of tail calls would lose a stage.
std::string oneStageFewer(const bpf::TailCallReach &reach) {
  return llvm::formatv(
             "program '{0}' can make as many tail calls in a row as the kernel allows ({1}): "
             "{2}; the trampoline's own tail call is one of them, so such a chain runs one "
             "stage fewer",
             reach.chain.front(), bpf::KernelTailCallLimit, reach.describe())
      .str();
}

bool backsOff(core::CycleOutcome outcome) {
  return outcome == core::CycleOutcome::Failed || outcome == core::CycleOutcome::Refused;
}

} // namespace

Expected<std::unique_ptr<Daemon>> Daemon::start(const std::string &path,
                                                DaemonOptions options,
                                                llvm::raw_ostream &out,
                                                llvm::raw_ostream &errors) {
  // A directory that would expose map contents is refused before anything
  // is attached, not at the first refusal.
  if (Error err = PrivateDirectory::checkIfPresent(options.reproducerDir))
    return withContext(std::move(err), "the reproducer directory");
  if (!options.adopt.empty()) {
    if (options.optimizer.pinDir.empty())
      return makeError("{0}: adopting needs a pin directory for the owner array", path);
    std::unique_ptr<Daemon> daemon(new Daemon(std::move(options), out, errors));
    if (Error err = daemon->startAdoption(path))
      return err;
    return daemon;
  }
  if (options.ifaces.empty())
    return makeError("{0}: no interface to attach to", path);
  if (options.onExit == OnExit::KeepServing && options.optimizer.pinDir.empty())
    return makeError("{0}: keeping the program attached after exit needs a pin directory "
                     "for its links",
                     path);
  // The socket first: a run refused its socket (another instance serves
  // it) has loaded, pinned and attached nothing.
  std::optional<ControlSocketClaim> socket;
  if (!options.socketPath.empty()) {
    auto claimed = ControlSocketClaim::claim(options.socketPath);
    if (!claimed)
      return claimed.takeError();
    socket.emplace(std::move(*claimed));
  }
  std::unique_ptr<Daemon> daemon(new Daemon(std::move(options), out, errors));
  if (daemon->options.onExit == OnExit::KeepServing) {
    auto earlier = bpf::PinDirectory(daemon->options.optimizer.pinDir)
                       .openMap(bpf::FallbackMapName);
    if (!earlier)
      llvm::consumeError(earlier.takeError()); // nothing to keep: links get our original
    else if (*earlier)
      daemon->earlierFallback.reset(**earlier);
  }
  auto optimizer = Optimizer::create(path, daemon->options.optimizer);
  if (!optimizer)
    return optimizer.takeError();
  daemon->opt = std::move(*optimizer);
  Optimizer &opt = *daemon->opt;
  daemon->programType = opt.spec().programType(opt.entryName()); // XDP or TC (runnableEntry)
  // One program, one set of maps, every port: a multi-port function (a
  // router, a switch) runs as one instance behind one guard.
  // A daemon that did not start leaves nothing attached and no pin.
  auto abandon = [&daemon](Error err) -> Error {
    for (Port &port : daemon->ports)
      port.link->unpin();
    for (auto &[program, link] : daemon->sectionLinks)
      link.unpin();
    daemon->options.onExit = OnExit::Detach;
    return err;
  };
  for (const std::string &iface : daemon->options.ifaces) {
    auto link = daemon->attachPort(iface, opt.originalFd());
    if (!link)
      return abandon(link.takeError());
    daemon->ports.push_back(Port{iface, std::move(*link), ""});
  }
  if (Error err = daemon->attachBySection())
    return abandon(std::move(err));
  opt.install = [raw = daemon.get()](int fd) { return raw->installOnPorts(fd); };
  if (socket) {
    if (socket->replacesStale())
      daemon->log.record("socket_stale_replaced", {{"socket", socket->path()}},
                         "control socket '" + socket->path() +
                             "': replaced the socket a process that is gone left there\n");
    auto server = ControlServer::start(
        std::move(*socket), opt, [raw = daemon.get()] { raw->notifyChange(); },
        [&opt] {
          return nlohmann::json({{"program", opt.entryName()},
                                 {"guard_version", opt.guard().version()},
                                 {"specialized_version", opt.installedVersion()}})
              .dump();
        });
    if (!server)
      return abandon(server.takeError());
    daemon->server = std::move(*server);
  }
  // The pins stay for the program that keeps serving.
  if (daemon->options.onExit == OnExit::KeepServing)
    opt.keepPins();
  daemon->nextPeriod = daemon->nextCycle = Clock::now();
  daemon->statsBase = bpf::programRunStats(daemon->chargedFd());
  return daemon;
}

Error Daemon::attachBySection() {
  const bpf::ProgramSpec &spec = opt->spec();
  std::set<std::string> slotted; // held by a program array: a tail call's target
  for (const auto &[array, slots] : spec.staticProgramSlots())
    for (const auto &[index, program] : slots)
      slotted.insert(program);
  for (const std::string &program : spec.programs()) {
    if (program == opt->entryName())
      continue;
    std::string type = bpf::kernelTypeOfSection(spec.section(program));
    auto taken = takeOverSectionLink(program, type);
    if (!taken)
      return taken.takeError();
    if (*taken)
      continue;
    auto link = bpf::SectionLink::attach(opt->originalObject(), program);
    if (!link)
      return withContext(link.takeError(),
                         "the object's loader would attach it; Morpheus does not run the "
                         "object without it");
    if (*link) {
      // Pinned like the entry's links: it runs for as long as the entry
      // does, after this process too.
      std::string pin = sectionLinkPin(program);
      if (options.onExit != OnExit::Detach)
        if (Error err = (*link)->pin(pin))
          return withContext(std::move(err), "program '" + program + "'");
      sectionLinks.emplace_back(program, std::move(**link));
      log.record("attached_by_section", {{"program", program}, {"type", type}, {"pin", pin}},
                 llvm::formatv("program '{0}' ({1}) attached where its section says, running "
                               "its original code on the shared maps {2}\n",
                               program, type,
                               options.onExit == OnExit::Detach
                                   ? "until this run ends"
                                   : "while the program is attached (its link pinned at " +
                                         pin + ")")
                     .str());
    } else if (!slotted.count(program)) {
      log.record("not_attached", {{"program", program}, {"type", type}},
                 llvm::formatv("program '{0}' ({1}) is not attached: its section does not say "
                               "where; unless a tail call or a map entry reaches it, attach it "
                               "yourself ('morpheus run --prog {0}' runs it specialized)\n",
                               program, type)
                     .str());
    }
  }
  return Error::success();
}

std::string Daemon::sectionLinkPin(const std::string &program) const {
  if (options.optimizer.pinDir.empty())
    return "";
  // Program names are C identifiers: bpffs takes them.
  return llvm::sys::path::convert_to_slash(options.optimizer.pinDir + "/link_by_section_" +
                                           program);
}

Expected<bool> Daemon::takeOverSectionLink(const std::string &program, const std::string &type) {
  std::string pin = sectionLinkPin(program);
  if (pin.empty())
    return false;
  auto pinned = bpf::SectionLink::openPinned(pin);
  if (!pinned)
    return withContext(pinned.takeError(), "program '" + program + "'");
  if (!*pinned)
    return false;
  if (!(*pinned)->runs(opt->originalObject(), program)) {
    // Other code, or other maps (the maps were not reused): ours replaces
    // it. Detached first, so that no event runs both; one that fires
    // between the two is counted by neither.
    (*pinned)->unpin();
    pinned->reset();
    log.record("section_link_replaced", {{"program", program}, {"pin", pin}},
               llvm::formatv("program '{0}' ({1}): the link an earlier run left at {2} ran "
                             "other code or other maps: detached, this run's attached\n",
                             program, type, pin)
                   .str());
    return false;
  }
  // The same code on the same maps: it goes on counting each event once;
  // attaching ours beside it would count each twice.
  if (options.onExit == OnExit::Detach)
    (*pinned)->unpin();
  sectionLinks.emplace_back(program, std::move(**pinned));
  log.record("section_link_taken_over", {{"program", program}, {"type", type}, {"pin", pin}},
             llvm::formatv("program '{0}' ({1}): took over the link an earlier run left at "
                           "{2} (the same code on the same maps)\n",
                           program, type, pin)
                 .str());
  return true;
}

Error Daemon::startAdoption(const std::string &path) {
  auto adopted = bpf::Adoption::adopt(options.adopt, options.netns, options.optimizer.pinDir,
                                      options.dispatcherSlots);
  if (!adopted)
    return adopted.takeError();
  adoption = std::move(*adopted);
  // The trampoline's tail call counts against the owner's chains: one
  // that can make the kernel's limit of tail calls would lose its last
  // stage. Not silently: declined, or adopted because told so, and said.
  const bpf::TailCallReach &reach = adoption->tailCalls();
  if (reach.reachesLimit()) {
    std::string why = oneStageFewer(reach);
    if (!options.acceptOneTailCallFewer)
      return makeError("not adopted: {0} (--accept-one-tail-call-fewer adopts it anyway; "
                       "--iface runs the program with no trampoline)",
                       why);
    log.record("tail_call_limit", {{"chain", reach.chain}, {"cycle", reach.cycle}},
               "adopted although " + why + ": the last stage of such a chain does not run "
               "(--accept-one-tail-call-fewer)\n");
  } else if (reach.longest > 0) {
    log.record("tail_calls", {{"chain", reach.chain}, {"longest", reach.longest}},
               llvm::formatv("tail calls: at most {0} in a row ({1}), {2} with the "
                             "trampoline's, of the kernel's {3} (as the program arrays hold "
                             "now{4})\n",
                             reach.longest, reach.describe(), reach.longest + 1,
                             bpf::KernelTailCallLimit,
                             options.acceptOneTailCallFewer ? "" : "; checked every period")
                   .str());
  }
  options.optimizer.adoption = adoption.get();
  auto optimizer = Optimizer::create(path, options.optimizer);
  if (!optimizer)
    return optimizer.takeError(); // the hook was not touched
  opt = std::move(*optimizer);
  programType = opt->spec().programType(opt->entryName());
  if (programType != adoption->programType())
    return makeError("{0}: program '{1}' is {2}, the adopted program is {3}: the source must "
                     "be the program that runs",
                     path, opt->entryName(), bpf::programTypeName(programType),
                     bpf::programTypeName(adoption->programType()));
  // An extension in a dispatcher slot cannot be tail-called: the original,
  // built on the owner's maps with its constants, stands in for it.
  if (Error err = adoption->takeHook(opt->originalFd()))
    return err;
  if (adoption->readopted())
    log.record("readopted", {{"pin", adoption->ownerArrayPin()}},
               "took over the trampoline an earlier run left (" + adoption->describe() + ")\n");
  // The version the earlier run kept serving (it depends on nothing
  // polled) serves on until our first cycle ends, if it still can.
  if (FileDescriptor fallback = adoption->takeEarlierFallback(); fallback.valid()) {
    uint32_t version = adoption->servedProgramId();
    if (opt->canServeOn(version, fallback.get())) {
      earlierFallback = std::move(fallback);
      earlierVersionServes = true;
      log.record("version_kept_serving", {{"program_id", version}},
                 llvm::formatv("the version an earlier run left (program {0}) serves on until "
                               "this run's first cycle\n",
                               version)
                     .str());
    } else {
      adoption->releaseServed();
      if (Error err = adoption->serve(-1))
        return err;
    }
  }
  // Whatever is served next may depend on what Morpheus polls: the array
  // goes with this process again until syncServedPin says otherwise.
  opt->install = [raw = adoption.get()](int fd) {
    raw->releaseServed();
    return raw->serve(fd);
  };
  nextPeriod = nextCycle = Clock::now();
  statsBase = bpf::programRunStats(chargedFd());
  return Error::success();
}

Daemon::~Daemon() {
  // The socket first: no update may arrive for an optimizer going away.
  server.reset();
  if (adoption) {
    // Handing over, the trampoline stays on the hook for the next Morpheus
    // to take over (as after kill -9). Otherwise the owner's program serves
    // again: the hook gets it back, unless the owner moved on (then the
    // hook is the owner's business).
    if (options.onExit == OnExit::HandOver)
      return;
    if (Error err = adoption->restore())
      log.error(llvm::toString(std::move(err)) + "; the owner's program serves through the "
                                                 "trampoline");
    return;
  }
  // Detach: the links detach as they go. HandOver: the pinned links keep
  // what runs now, and the next Morpheus takes them over; unless that is
  // still the version an earlier run left, whose fallback array goes with
  // this process (endEarlierVersion never ran): then the original.
  bool earlierStays = options.onExit == OnExit::HandOver && earlierVersionServes;
  if ((options.onExit != OnExit::KeepServing && !earlierStays) || !opt)
    return;
  // The original stays: it is correct whatever the maps come to hold, and
  // nobody is left to bump the guard when they change. The pinned links
  // keep it attached.
  for (Port &port : ports)
    if (port.link)
      if (Error err = port.link->replace(opt->originalFd()))
        log.error("interface '" + port.iface + "': " + llvm::toString(std::move(err)) +
                  "; the specialized program stays");
}

std::string Daemon::attachedTo() const {
  if (adoption)
    return "adopted " + adoption->describe();
  std::string where;
  for (const Port &port : ports)
    where += (where.empty() ? "" : ", ") + attachPoint(port.iface).describe();
  return where;
}

void Daemon::handOver() {
  if (options.onExit == OnExit::KeepServing || adoption)
    options.onExit = OnExit::HandOver;
}

Daemon::ExitNote Daemon::exitNote() const {
  bool handingOver = options.onExit == OnExit::HandOver;
  if (adoption) {
    if (!handingOver)
      return {{{"detach", false}},
              "stopping: the owner's program goes back on its hook (unless the owner moved "
              "on)\n"};
    bool kept = adoption->servedKept();
    return {{{"detach", false}, {"hand_over", true}, {"version_serves_on", kept}},
            std::string("stopping: handing over: the trampoline stays on the hook for the next "
                        "Morpheus to take over; ") +
                (kept ? "the version it runs serves on (it depends on nothing polled)\n"
                      : "the owner's program serves until the next Morpheus installs a "
                        "version (this one depends on maps the owner writes, which nobody "
                        "polls meanwhile)\n")};
  }
  if (options.onExit == OnExit::Detach)
    return {{{"detach", true}}, "stopping: detaching and removing pins\n"};
  const std::string &dir = options.optimizer.pinDir;
  std::vector<std::string> held, lost;
  for (const Port &port : ports)
    if (port.link)
      (port.link->stillPinned() ? held : lost).push_back(port.iface);
  std::vector<std::string> unpinned = opt->unpinnedObjects();
  std::string text = "stopping: ";
  std::string staying = handingOver ? "the running version stays attached for the next Morpheus"
                                    : "the original program stays attached";
  if (lost.empty())
    text += staying;
  else
    text += llvm::formatv("{0}the program detaches from {1} as this process exits: {2} link "
                          "{3} in {4} {5} gone (removed, or the bpffs under it unmounted)",
                          held.empty() ? "" : staying + " on " + llvm::join(held, ", ") + "; ",
                          llvm::join(lost, ", "), lost.size() == 1 ? "its" : "their",
                          lost.size() == 1 ? "pin" : "pins", dir,
                          lost.size() == 1 ? "is" : "are")
                .str();
  std::vector<std::string> bySection, bySectionHeld;
  for (const auto &[program, link] : sectionLinks)
    (link.stillPinned() ? bySectionHeld : bySection).push_back(program);
  if (lost.empty() && unpinned.empty())
    text += " (links, maps and guard pinned in " + dir + ")";
  else if (unpinned.empty())
    text += "; maps and guard pinned in " + dir;
  else {
    std::vector<std::string> named;
    for (const std::string &name : unpinned)
      named.push_back(name == bpf::GuardMapName ? "the guard" : "map '" + name + "'");
    text += "; no longer pinned in " + dir + " (no control plane reaches them there): " +
            llvm::join(named, ", ");
  }
  if (!bySectionHeld.empty())
    text += "; " + llvm::join(bySectionHeld, ", ") + ", attached where " +
            (bySectionHeld.size() == 1 ? "its section says, stays" : "their sections say, stay") +
            " attached beside it (pinned in " + dir + ")";
  if (!bySection.empty())
    text += "; " + llvm::join(bySection, ", ") + ", attached where " +
            (bySection.size() == 1 ? "its section says, detaches" : "their sections say, detach") +
            " with this process (" + (bySection.size() == 1 ? "its pin" : "their pins") + " in " +
            dir + " gone)";
  nlohmann::json fields = {{"detach", false},
                           {"pin_dir", dir},
                           {"links_pinned", held},
                           {"links_unpinned", lost},
                           {"section_links_pinned", bySectionHeld},
                           {"detached_with_process", bySection},
                           {"unpinned", unpinned}};
  if (handingOver)
    fields["hand_over"] = true;
  return {std::move(fields), text + "\n"};
}

std::vector<std::string> Daemon::updateGuarantees() const {
  return runtime::updateGuarantees(opt->spec(), options.period, adoption != nullptr);
}

std::vector<std::string> updateGuarantees(const bpf::ProgramSpec &spec,
                                          std::chrono::nanoseconds period, bool adopted) {
  std::vector<std::string> lines;
  double periodMs = std::chrono::duration<double, std::milli>(period).count();
  const core::TableAccessInfo &analysis = spec.analysis();
  for (const auto &[name, usage] : analysis.tables) {
    auto table = spec.catalog().find(name);
    if (table != spec.catalog().end() && table->second.keptGeneric) {
      lines.push_back(llvm::formatv("map '{0}': {1}: never specialized, every update (its "
                                    "other writer's too, which bypass the guard) holds from "
                                    "the next packet on",
                                    name, core::KeptGenericReason)
                          .str());
      continue;
    }
    bool inPart = table != spec.catalog().end() &&
                  analysis.writtenOnlyInPart(name, table->second.valueSize);
    // Values written everywhere, but keys only the control plane adds or
    // removes: which keys it holds is specialized (key-set-filter).
    bool keySetOnly = !inPart && !core::whyNoKeySetFilter(name, analysis, spec.catalog());
    if (usage.written && !inPart && !keySetOnly) {
      lines.push_back(llvm::formatv("map '{0}': written by the program, never specialized: "
                                    "every update is live at once",
                                    name)
                          .str());
      continue;
    }
    // A map written only in part (some fields, some keys): what the program
    // writes is never specialized, the rest may be.
    std::string written = inPart ? "written by the program in part: the keys and bytes it "
                                   "writes are never specialized (their updates are live at "
                                   "once); the others: "
                          : keySetOnly ? "its values written by the program, never specialized "
                                         "(their updates are live at once); which keys it "
                                         "holds: "
                                       : "";
    if (adopted) {
      lines.push_back(llvm::formatv("map '{0}': {1}the owner's, polled: its updates do not go "
                                    "through Morpheus; each cycle compares what the "
                                    "specialization read, and a change bumps the guard (the "
                                    "owner's program serves) before the code is rebuilt: a "
                                    "packet may see the old entry for up to {2:f0} ms (a "
                                    "period); a map changing in most cycles is not inlined",
                                    name, written, periodMs)
                          .str());
      continue;
    }
    lines.push_back(llvm::formatv("map '{0}': {1}may be specialized: updates through Morpheus "
                                  "(morpheus map, the client library, the socket) reach the "
                                  "next packet; other writers' (bpftool) are polled: a packet "
                                  "may see the old entry for up to {2:f0} ms (a period) plus "
                                  "one cycle, longer while failed cycles back off",
                                  name, written, periodMs)
                        .str());
  }
  std::map<std::string, std::vector<std::string>> globalsBySection;
  for (const core::GlobalSlice &slice : spec.globals())
    globalsBySection[slice.sectionTable].push_back(slice.global);
  for (const auto &[section, globals] : globalsBySection)
    lines.push_back(
        llvm::formatv("map '{0}' (globals {1}): polled and checked, not guarded: bytes the "
                      "program never writes may be folded; a write by anyone (mmap, bpftool) "
                      "is compared at every guarded entry, so every packet that starts after "
                      "it runs the generic code on the new bytes, and the code is rebuilt for "
                      "them within {2:f0} ms (a period) plus one cycle",
                      section, llvm::join(globals, ", "), periodMs)
            .str());
  return lines;
}

bpf::AttachPoint Daemon::attachPoint(const std::string &iface) const {
  return bpf::AttachPoint{programType, iface, options.netns, options.mode, options.tcDirection};
}

std::string Daemon::linkPin(const std::string &iface) const {
  if (options.optimizer.pinDir.empty())
    return "";
  // bpffs refuses names with '.' (eth0.100).
  std::string name = std::string("link_") + bpf::programTypeName(programType) + "_" + iface;
  std::replace(name.begin(), name.end(), '.', '_');
  return llvm::sys::path::convert_to_slash(options.optimizer.pinDir + "/" + name);
}

Expected<bpf::ProgramLink> Daemon::attachPort(const std::string &iface, int programFd) {
  bpf::AttachPoint point = attachPoint(iface);
  std::string pin = linkPin(iface);
  if (!pin.empty()) {
    auto pinned = bpf::ProgramLink::openPinned(pin, point);
    if (!pinned)
      return pinned.takeError();
    if (*pinned) {
      // An earlier run left its program serving here: take the hook over
      // rather than attach a second program beside it; with an atomic swap
      // unless the version it left may serve on until our first cycle ends.
      bool keep = earlierFallback.valid() &&
                  opt->canServeOn((*pinned)->programId(), earlierFallback.get());
      if (!keep)
        if (Error err = (*pinned)->replace(programFd))
          return withContext(std::move(err), "the link pinned at " + pin);
      earlierVersionServes |= keep;
      log.record("link_taken_over", {{"iface", iface}, {"pin", pin}, {"kept_serving", keep}},
                 "interface '" + iface + "': took over the link an earlier run left at " + pin +
                     (keep ? " (the version it left serves on until this run's first cycle)"
                           : "") +
                     "\n");
      if (options.onExit == OnExit::Detach)
        (*pinned)->unpin();
      return std::move(**pinned);
    }
  }
  auto link = bpf::ProgramLink::attach(programFd, point);
  if (!link)
    return link.takeError();
  if (options.onExit != OnExit::Detach)
    if (Error err = link->pin(pin))
      return err;
  return std::move(*link);
}

Error Daemon::installOnPorts(int programFd) {
  for (Port &port : ports) {
    if (!port.link)
      continue;
    if (Error err = port.link->replace(programFd)) {
      if (port.link->attached())
        return withContext(std::move(err), "interface '" + port.iface + "'");
      llvm::consumeError(std::move(err));
      reportLost(port);
    }
  }
  return Error::success();
}

void Daemon::reportLost(Port &lost) {
  lost.link->unpin(); // the kernel detached it: its pin would hold a dead link
  lost.link.reset();
  std::string serving;
  for (const Port &port : ports)
    if (port.link)
      serving += (serving.empty() ? "" : ", ") + port.iface;
  log.record("interface_lost", {{"iface", lost.iface}, {"serving", serving}},
             llvm::formatv("interface '{0}' disappeared: the kernel detached the program "
                           "from it; still serving {1}; re-attaching if it comes back\n",
                           lost.iface, serving.empty() ? "no interface" : serving)
                 .str());
}

void Daemon::tendPorts() {
  for (Port &port : ports) {
    if (port.link) {
      if (!port.link->attached())
        reportLost(port);
      continue;
    }
    auto link = attachPort(port.iface, opt->activeFd());
    if (!link) {
      ErrorDetails failure = takeErrorDetails(link.takeError());
      // No such interface is the expected state until it comes back.
      if (failure.code != std::errc::no_such_device && failure.message != port.attachError)
        log.error("interface '" + port.iface + "': " + failure.message);
      port.attachError = std::move(failure.message);
      continue;
    }
    port.link.emplace(std::move(*link));
    port.attachError.clear();
    log.record("interface_back", {{"iface", port.iface}},
               "interface '" + port.iface + "' is back: program attached\n");
  }
}

void Daemon::repairPins() {
  // A note that persists (a pin path taken by another object) is printed
  // once, not every period.
  std::vector<std::string> notes = opt->repairPins();
  if (notes != pinNotes)
    for (const std::string &note : notes)
      log.error(note);
  pinNotes = std::move(notes);
}

void Daemon::notifyChange() {
  {
    std::lock_guard lock(mutex);
    changed = true;
  }
  wake.notify_all();
}

void Daemon::waitForWork(std::chrono::milliseconds limit) {
  std::unique_lock lock(mutex);
  auto now = Clock::now();
  auto until = std::min(now + limit, nextPeriod);
  if (now < nextCycle) {
    // Backing off: a pending change waits for the back-off too.
    wake.wait_until(lock, std::min(until, nextCycle));
    return;
  }
  wake.wait_until(lock, until, [&] { return changed; });
}

bool Daemon::chainReachesTheLimit() {
  auto reach = adoption->tailCallsNow();
  if (!reach) {
    log.error("cannot tell how far the adopted program's tail calls go now: " +
              llvm::toString(reach.takeError()));
    return false;
  }
  if (!reach->reachesLimit())
    return false;
  ownerGone = true;
  Error back = adoption->restore();
  log.record("tail_call_limit", {{"chain", reach->chain}, {"cycle", reach->cycle}},
             "the owner's program arrays changed: " + oneStageFewer(*reach) +
                 ": stopping, the hook given back to the owner's program\n");
  if (back)
    log.error(llvm::toString(std::move(back)));
  return true;
}

Daemon::Work Daemon::pending(Clock::time_point now) {
  if (ownerGone)
    return Work::None;
  Work periodic = now >= nextPeriod ? Work::Periodic : Work::None;
  if (now < nextCycle)
    return periodic; // backing off: a change waits too
  // A change says so even when the period is due as well: a caller that
  // schedules several daemons serves changes first.
  if (changeArrived())
    return Work::Change;
  if (exploration && now >= exploration->due())
    return Work::Periodic;
  return periodic;
}

bool Daemon::changeArrived() {
  {
    std::lock_guard lock(mutex);
    if (changed)
      return true;
  }
  // A bump of the guard (by 'morpheus map' from another process, or the
  // socket) means packets are on the generic path: re-specialize now.
  return opt->installedVersion() != 0 && opt->guard().version() != opt->installedVersion();
}

Daemon::Clock::time_point Daemon::wakeAt() {
  std::lock_guard lock(mutex);
  // A change waits out a back-off; the period's work never waits.
  Clock::time_point at = changed ? std::min(nextPeriod, nextCycle) : nextPeriod;
  return exploration ? std::min(at, exploration->due()) : at;
}

std::optional<core::CycleReport> Daemon::step(Clock::time_point now) {
  if (pending(now) == Work::None)
    return std::nullopt;
  // The period's work is due with a change too.
  bool periodic = now >= nextPeriod;
  if (periodic && adoption && adoption->ownerMovedOn()) {
    ownerGone = true;
    log.record("owner_moved_on", {{"adopted", adoption->describe()}},
               "the owner replaced or detached its program (" + adoption->describe() +
                   "): stopping, the hook left as the owner set it\n");
    return std::nullopt;
  }
  if (periodic && adoption && !options.acceptOneTailCallFewer && chainReachesTheLimit())
    return std::nullopt;
  if (periodic) {
    nextPeriod = now + options.period;
    tendPorts();
    repairPins();
    // The period that ends now, measured on the program that served it,
    // before a cycle may swap another in (whose counters would not say
    // what ran in the period).
    printStatus();
  }
  if (exploration) {
    if (!changeArrived()) {
      stepExploration(now);
      return std::nullopt;
    }
    exploration->abandon("a change arrived");
    exploration.reset();
  }
  if (explored && options.explore.every.count() > 0 && reexploreWhy.empty() &&
      now - lastExploration >= options.explore.every)
    reexploreWhy = llvm::formatv("--explore-every {0} ms since the last exploration began",
                                 options.explore.every.count());
  if (genericChosen && reexploreWhy.empty()) {
    if (!changeArrived())
      return std::nullopt;
    // The choice was measured on other tables: measure again.
    genericChosen = false;
    explored = false;
  }
  if (now < nextCycle)
    return std::nullopt;
  {
    std::lock_guard lock(mutex);
    changed = false;
  }
  bool reexplore = !reexploreWhy.empty();
  if (reexplore) {
    // The model decides again (its settings, whatever the last exploration
    // chose), its version built and installed through the ordinary
    // cycle, and measured again.
    log.record("explore_again", {{"why", reexploreWhy}},
               "explore: again: " + reexploreWhy + "\n");
    reexploreWhy.clear();
    opt->setVersionSettings({options.optimizer.tablePasses, options.optimizer.inlineLimit});
    genericChosen = false;
    explored = false;
  }
  core::CycleReport cycle = opt->runCycle(/*force=*/reexplore);
  if (earlierFallback.valid())
    endEarlierVersion(cycle);
  if (adoption)
    syncServedPin();
  lastCycle = cycle.cycle;
  failures = backsOff(cycle.outcome) ? failures + 1 : 0;
  nextCycle = now;
  if (failures)
    nextCycle += options.period * (int64_t(1) << std::min(failures, MaxBackOffShift));
  report(cycle);
  // The next figure is the new version's alone: the trampoline's counters
  // run on across a swap, and a version's own count its validation runs.
  if (cycle.installed())
    statsBase = bpf::programRunStats(chargedFd());
  bool built = cycle.installed() || (reexplore && cycle.outcome == core::CycleOutcome::Unchanged);
  if (built && options.explore.trials && !explored)
    startExploration(cycle, now);
  else if (explored && !cycle.traffic.empty() &&
           core::hotKeysMoved(exploredHotKeys, hotKeysOf(cycle.traffic)))
    reexploreWhy = "the traffic's hot keys moved";
  return cycle;
}

void Daemon::startExploration(const core::CycleReport &cycle, Clock::time_point now) {
  explored = true;
  lastExploration = now;
  exploredHotKeys = hotKeysOf(cycle.traffic);
  std::vector<core::ExplorationCandidate> candidates =
      core::explorationCandidates(cycle.log, options.explore.trials, options.explore.margin);
  std::vector<core::ExplorationCandidate> widened;
  if (options.explore.shortfall.fraction > 0)
    widened = core::widenedCandidates(cycle.log, options.explore.trials, candidates);
  if (candidates.size() < 2 && widened.empty()) {
    log.record("explore_none", {},
               llvm::formatv("explore: the model was not close (within {0:f0} ns or {1:f0} %) "
                             "at any site it gave a representation: its version stays\n",
                             options.explore.margin.ns, options.explore.margin.fraction * 100)
                   .str());
    return;
  }
  exploration.emplace(*opt, [this] { return chargedFd(); }, log, options.explore,
                      std::move(candidates), std::move(widened),
                      core::predictedSavingNs(cycle.log), opt->versionSettings(), now);
  stepExploration(now);
}

void Daemon::stepExploration(Clock::time_point now) {
  exploration->step(now);
  if (!exploration->finished())
    return;
  genericChosen = exploration->choseGeneric();
  exploration.reset();
  // The status line measures what serves from now on.
  statsBase = bpf::programRunStats(chargedFd());
}

void Daemon::endEarlierVersion(const core::CycleReport &cycle) {
  if (earlierVersionServes && !cycle.installed() && adoption) {
    adoption->releaseServed();
    if (Error err = adoption->serve(-1))
      log.error("the version an earlier run left keeps serving: " + llvm::toString(std::move(err)));
    else
      log.record("earlier_version_replaced", {{"by", "owner"}},
                 "the version an earlier run left gave way to the owner's program (this cycle "
                 "installed none)\n");
  } else if (earlierVersionServes && !cycle.installed()) {
    if (Error err = installOnPorts(opt->originalFd()))
      log.error("the version an earlier run left keeps serving: " +
                llvm::toString(std::move(err)));
    else
      log.record("earlier_version_replaced", {{"by", "original"}},
                 "the version an earlier run left gave way to the original (this cycle "
                 "installed none)\n");
  }
  // A packet may still be inside the earlier version, falling back
  // through its array.
  if (earlierVersionServes)
    bpf::waitForPacketsInFlight();
  earlierFallback.reset();
  earlierVersionServes = false;
}

std::string Daemon::keepReproducer(const core::CycleReport &cycle) {
  uint64_t key = llvm::xxh3_64bits(llvm::StringRef(cycle.differenceKey));
  std::string name =
      llvm::formatv("morpheus-shadow-{0}-{1:x16}.json", opt->spec().objectName(), key).str();
  std::string path = options.reproducerDir + "/" + name;
  if (!reproducers.insert(path).second)
    return path;
  auto dir = PrivateDirectory::open(options.reproducerDir);
  Error written = dir ? dir->write(name, cycle.reproducer + "\n") : dir.takeError();
  if (written) {
    log.error("cannot write the reproducer: " + llvm::toString(std::move(written)));
    reproducers.erase(path);
  }
  return path;
}

nlohmann::json phasesJson(const std::vector<core::BuildPhase> &phases) {
  nlohmann::json list = nlohmann::json::array();
  for (const core::BuildPhase &phase : phases)
    list.push_back({{"phase", phase.phase}, {"ms", phase.ms}});
  return list;
}

void Daemon::syncServedPin() {
  bool unattended = opt->installedServesUnattended();
  if (unattended == adoption->servedKept())
    return;
  if (!unattended) {
    adoption->releaseServed();
    return;
  }
  if (Error err = adoption->keepServed(opt->mapFd(bpf::FallbackMapName)))
    log.error(llvm::toString(std::move(err)) +
              "; the owner's program serves once this process ends");
}

void Daemon::report(const core::CycleReport &cycle) {
  // Unchanged cycles, and those deferred while a control-plane change is
  // in progress (every 10 ms during a long one), only show in the status.
  bool interesting = cycle.installed() || backsOff(cycle.outcome) ||
                     (!options.quiet && cycle.outcome == core::CycleOutcome::Superseded);
  if (!interesting)
    return;
  std::string line = cycle.describe();
  nlohmann::json fields = {{"cycle", cycle.cycle},
                           {"outcome", core::outcomeName(cycle.outcome)},
                           {"detail", cycle.detail},
                           {"version", cycle.version},
                           {"t1_ms", cycle.times.analysisMs},
                           {"t2_ms", cycle.times.codegenMs},
                           {"validation_ms", cycle.times.validationMs},
                           {"injection_ms", cycle.times.injectionMs}};
  if (cycle.outcome == core::CycleOutcome::Refused) {
    std::string reproducer = keepReproducer(cycle);
    line += "; the running program stays (reproducer " + reproducer + ")";
    fields["reproducer"] = reproducer;
  }
  std::string text = llvm::formatv("cycle {0}: {1} (version {2}; t1 {3:f2} ms, t2 {4:f1} ms, "
                                   "validation {5:f1} ms, injection {6:f2} ms",
                                   cycle.cycle, line, cycle.version, cycle.times.analysisMs,
                                   cycle.times.codegenMs, cycle.times.validationMs,
                                   cycle.times.injectionMs)
                         .str();
  if (cycle.installed()) {
    text += ", " + std::to_string(cycle.instructions) + " instructions";
    fields["instructions"] = cycle.instructions;
  }
  text += ")\n";
  if (failures > 1) {
    unsigned periods = 1u << std::min(failures, MaxBackOffShift);
    text += llvm::formatv("  {0} cycles in a row did not install; next attempt in {1} periods\n",
                          failures, periods)
                .str();
    fields["failures_in_a_row"] = failures;
    fields["next_attempt_periods"] = periods;
  }
  if (cycle.installed() && !options.quiet) {
    text += "  t2 by phase (ms): " + core::phasesText(cycle.log.phases) + "\n";
    fields["t2_phases"] = phasesJson(cycle.log.phases);
    if (!cycle.times.validationPhases.empty())
      text += "  validation by phase (ms): " + core::phasesText(cycle.times.validationPhases) +
              "\n";
    text += "  injection by phase (ms): " + core::phasesText(cycle.times.injectionPhases) + "\n";
    if (!cycle.reused.empty())
      text += "  reused as loaded (tables unchanged, stamped for this version): " +
              llvm::join(cycle.reused, ", ") + "\n";
    fields["reused_programs"] = cycle.reused;
    fields["validation_phases"] = phasesJson(cycle.times.validationPhases);
    const core::ValidationScope &scope = cycle.validation;
    if (!scope.skipped.empty())
      text += "  validation left out " + llvm::join(scope.skipped, ", ") +
              " (code as the installed version's, tables unchanged); loaded " +
              llvm::join(scope.validated, ", ") + "\n";
    else if (!scope.whyWhole.empty())
      text += "  validation loaded the whole object: " + scope.whyWhole + "\n";
    fields["validation_skipped"] = scope.skipped;
    if (scope.nondeterministic)
      text += llvm::formatv("  validation: on {0} sample packets the original answered "
                            "differently twice (nondeterminism the copies could not remove); "
                            "compared where the two agreed\n",
                            scope.nondeterministic)
                  .str();
    fields["validation_nondeterministic"] = scope.nondeterministic;
    fields["injection_phases"] = phasesJson(cycle.times.injectionPhases);
    text += cycle.log.toText();
    fields["decisions"] = cycle.log.toText();
    // Maps the owner of an adopted program keeps changing are not inlined.
    for (const std::string &name : opt->unstableTables())
      text += llvm::formatv("  unstable    map '{0}': the owner changed it in most of the last "
                            "{1} cycles: not inlined, the generic code reads it\n",
                            name, Optimizer::UnstableWindow)
                  .str();
  }
  // What the traffic decided, when it changes the code or drops a fast
  // path for churn: the operator sees why a fast path came or went.
  std::string traffic;
  for (const auto &[site, decision] : cycle.traffic)
    if (cycle.installed() || decision.churning)
      traffic += llvm::formatv("  traffic     site #{0}: sampling 1 in {1}; {2}\n", site,
                               decision.period, decision.why)
                     .str();
  if (!traffic.empty() && !options.quiet) {
    text += traffic;
    fields["traffic"] = traffic;
  }
  log.record("cycle", std::move(fields), text);
}

int Daemon::chargedFd() const {
  return adoption ? adoption->trampolineFd() : opt->activeFd();
}

void Daemon::printStatus() {
  // Counters only subtract within one program: after a swap the new
  // program's totals start from zero (and its fd number may be an old one's).
  bpf::ProgramRunStats current = bpf::programRunStats(chargedFd());
  ++lastRunTime.period;
  lastRunTime.packets = 0;
  lastRunTime.specialized = opt->installedVersion() == opt->guard().version();
  if (current.programId == statsBase.programId && current.runCount > statsBase.runCount) {
    uint64_t packets = current.runCount - statsBase.runCount;
    double nsPerPacket = double(current.runTimeNs - statsBase.runTimeNs) / packets;
    lastRunTime.packets = packets;
    (lastRunTime.specialized ? lastRunTime.specializedNsPerPacket
                             : lastRunTime.genericNsPerPacket) = nsPerPacket;
  }
  if (!options.quiet && lastRunTime.packets) {
    const char *program = lastRunTime.specialized ? "specialized" : "generic";
    uint64_t packets = lastRunTime.packets;
    double nsPerPacket = lastRunTime.specialized ? *lastRunTime.specializedNsPerPacket
                                                 : *lastRunTime.genericNsPerPacket;
    log.record("status",
               {{"cycle", lastCycle},
                {"program", program},
                {"packets", packets},
                {"ns_per_packet", nsPerPacket}},
               llvm::formatv("status: cycle {0}, {1} program, {2} packets, {3:f1} ns/packet\n",
                             lastCycle, program, packets, nsPerPacket)
                   .str());
  }
  statsBase = current;
}

} // namespace morpheus::runtime
