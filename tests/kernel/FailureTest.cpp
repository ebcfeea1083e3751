// When something goes wrong the running program keeps running and the
// error says what and where.
#include "PolicyFwd.h"
#include "backend/bpf/BpfObject.h"
#include "support/VerifierRejection.h"

#include <bpf/bpf.h>
#include <fcntl.h>
#include <linux/bpf.h>
#include <linux/in.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <llvm/Testing/Support/Error.h>

extern "C" const unsigned char verifier_refused_bpf_start[], verifier_refused_bpf_end[];
extern "C" const unsigned char missing_kfunc_bpf_start[], missing_kfunc_bpf_end[];

namespace morpheus::testing {
namespace {

TEST(Failure, RejectedInstallKeepsTheRunningProgram) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  fwd.specialize();
  int running = fwd.opt().activeFd();
  uint64_t version = fwd.opt().installedVersion();

  fwd.opt().install = [](int) { return makeError("attach point refused the program"); };
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  core::CycleReport failed = fwd.opt().runCycle();
  EXPECT_FALSE(failed.installed());
  EXPECT_EQ(failed.outcome, core::CycleOutcome::Failed);
  EXPECT_EQ(failed.detail, "attach point refused the program");
  EXPECT_EQ(fwd.opt().activeFd(), running);
  EXPECT_EQ(fwd.opt().installedVersion(), version);
  // The stale program still answers correctly: its guard defers to the original.
  EXPECT_EQ(runOnce(running, buildPacket(PacketSpec{})).verdict, uint32_t(XDP_PASS));

  fwd.opt().install = nullptr;
  EXPECT_TRUE(fwd.opt().runCycle().installed()) << "the next cycle retries";
}

// FaultInjection::crashAfterTablePasses makes the pipeline crash inside the
// compiler, as a broken pass would (a signal, or an LLVM fatal error that
// would otherwise exit the process): the cycle fails, the running program
// stays, and the next cycle (pristine IR re-read) installs.
TEST(Failure, CrashInAPassCostsOneCycleNotTheProcess) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  fwd.specialize();
  uint32_t action = ACTION_PASS;
  using Crash = core::FaultInjection::Crash;
  for (auto [crash, how, says] :
       {std::tuple{Crash::Segv, "segv", "policy_fwd.bpf.c: specialization crashed"},
        std::tuple{Crash::Abort, "abort", "policy_fwd.bpf.c: specialization crashed"},
        std::tuple{Crash::FatalError, "fatal error",
                   "policy_fwd.bpf.c: specialization failed inside LLVM: test-only"}}) {
    int running = fwd.opt().activeFd();
    fwd.setConfig(CFG_POLICY_ENABLED, action);
    fwd.opt().injectFaults({.crashAfterTablePasses = crash});
    core::CycleReport crashed = fwd.opt().runCycle();
    fwd.opt().injectFaults({});
    EXPECT_FALSE(crashed.installed()) << how;
    EXPECT_EQ(crashed.outcome, core::CycleOutcome::Failed);
    EXPECT_NE(crashed.detail.find(says), std::string::npos) << crashed.describe();
    EXPECT_EQ(fwd.opt().activeFd(), running);
    EXPECT_EQ(runOnce(running, buildPacket(PacketSpec{})).verdict,
              action == ACTION_PASS ? uint32_t(XDP_PASS) : uint32_t(XDP_DROP))
        << "the stale program must defer to the original";
    core::CycleReport next = fwd.opt().runCycle();
    EXPECT_TRUE(next.installed()) << how << ": " << next.describe();
    action = action == ACTION_PASS ? ACTION_DROP : ACTION_PASS;
  }
}

// A map the optimizer can no longer read (its fd replaced behind its back)
// fails the cycle with the map's name; once readable again, cycles install.
TEST(Failure, UnreadableMapFailsTheCycleByName) {
  PolicyFwd fwd;
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_DROP);
  fwd.setPolicy(policyKey(0x0a000001, 80, IPPROTO_UDP), policyValue(ACTION_PASS));
  fwd.specialize();
  int running = fwd.opt().activeFd();
  int policy = fwd.opt().mapFd("policy");
  int saved = dup(policy);
  int notAMap = open("/dev/null", O_RDONLY | O_CLOEXEC);
  ASSERT_GE(saved, 0);
  ASSERT_EQ(dup2(notAMap, policy), policy);
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  core::CycleReport failed = fwd.opt().runCycle();
  ASSERT_EQ(dup2(saved, policy), policy);
  close(saved);
  close(notAMap);
  EXPECT_FALSE(failed.installed());
  EXPECT_EQ(failed.outcome, core::CycleOutcome::Failed);
  EXPECT_TRUE(failed.detail.starts_with("map 'policy'")) << failed.describe();
  EXPECT_EQ(fwd.opt().activeFd(), running);
  EXPECT_TRUE(fwd.opt().runCycle().installed());
}

// Removed pins (the whole pin directory here) are pinned again, guard
// included, so `morpheus map` and client libraries keep reaching the
// program; a pin path taken by another map is reported and left alone.
TEST(Failure, RemovedPinsAreRepaired) {
  PinDir pins("repair");
  PolicyFwd fwd(pins.path());
  ASSERT_TRUE(fwd.ok());
  fwd.setConfig(CFG_POLICY_ENABLED, ACTION_PASS);
  fwd.specialize();
  EXPECT_TRUE(fwd.opt().repairPins().empty());

  std::filesystem::remove_all(pins.path());
  std::vector<std::string> notes = fwd.opt().repairPins();
  for (const char *name : {"map 'policy'", "map 'morpheus_guard'"})
    EXPECT_TRUE(std::any_of(notes.begin(), notes.end(), [&](const std::string &note) {
      return note.starts_with(name) && note.find("pinned again") != std::string::npos;
    })) << name;
  EXPECT_TRUE(fwd.opt().repairPins().empty());

  auto updater = bpf::MapUpdater::open(pins.path() + "/policy");
  ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
  EXPECT_TRUE(updater->guarded()) << "the guard pin came back too";
  policy_key key = policyKey(0x0a000001, 80, IPPROTO_UDP);
  ASSERT_FALSE(bool(updater->update(bytesOf(key), bytesOf(policyValue(ACTION_DROP)))));
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000001, .dport = 80});
  EXPECT_EQ(runOnce(fwd.opt().activeFd(), packet).verdict, uint32_t(XDP_DROP));

  std::string policyPin = pins.path() + "/policy";
  ASSERT_EQ(unlink(policyPin.c_str()), 0);
  int impostor = bpf_map_create(BPF_MAP_TYPE_HASH, "policy", 8, 16, 8, nullptr);
  ASSERT_GE(impostor, 0);
  ASSERT_EQ(bpf_obj_pin(impostor, policyPin.c_str()), 0);
  close(impostor);
  notes = fwd.opt().repairPins();
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_NE(notes[0].find("map 'policy': " + policyPin + " now holds another object"),
            std::string::npos)
      << notes[0];
}

TEST(Failure, PinnedMapWithAnotherLayoutIsRefusedByName) {
  PinDir pins("layout");
  // Someone left a "policy" map with 4-byte keys where Morpheus pins its maps.
  int impostor = bpf_map_create(BPF_MAP_TYPE_HASH, "policy", 4, 16, 8, nullptr);
  ASSERT_GE(impostor, 0);
  ASSERT_EQ(bpf_obj_pin(impostor, (pins.path() + "/policy").c_str()), 0);
  close(impostor);

  runtime::OptimizerOptions options;
  options.pinDir = pins.path();
  auto optimizer =
      runtime::Optimizer::create(sourcePath("examples/policy_fwd.bpf.c"), options);
  ASSERT_FALSE(bool(optimizer));
  // An IncompatibleMap still, through the context the optimizer added.
  std::string message;
  llvm::handleAllErrors(
      optimizer.takeError(),
      [&](const bpf::IncompatibleMap &incompatible) {
        EXPECT_EQ(incompatible.map(), "policy");
        EXPECT_EQ(incompatible.differences(),
                  (std::vector<bpf::MapFieldDifference>{
                      {bpf::MapField::KeySize, false, 8, 4},
                      {bpf::MapField::MaxEntries, false, 1024, 8}}));
        message = incompatible.message();
      },
      [&](const llvm::ErrorInfoBase &other) { ADD_FAILURE() << other.message(); });
  EXPECT_NE(message.find("map 'policy'"), std::string::npos) << message;
  // Every property that differs, field by field.
  EXPECT_NE(message.find("key size: declared 8, the map has 4"), std::string::npos) << message;
  EXPECT_NE(message.find("max_entries: declared 1024, the map has 8"), std::string::npos)
      << message;
  EXPECT_EQ(message.find("value size"), std::string::npos) << message;
}

// tests/kernel/verifier_refused.bpf.c: `accepted`, then `refused`, which
// reads the packet without checking its end.
llvm::ArrayRef<char> refusedObject() {
  return {reinterpret_cast<const char *>(verifier_refused_bpf_start),
          size_t(verifier_refused_bpf_end - verifier_refused_bpf_start)};
}

// The kernel refuses the second program of the object: the load's error is
// a VerifierRejection (through any context added on the way up) naming that
// program, with the kernel's errno and the verifier's log, the end of which
// is the reason. Without that program the object loads.
TEST(Failure, AProgramTheVerifierRefusesIsAVerifierRejectionNamingIt) {
  auto loaded = bpf::LoadedObject::load(refusedObject(), "refusal", {});
  ASSERT_FALSE(bool(loaded));
  bool rejected = false;
  llvm::handleAllErrors(
      withContext(loaded.takeError(), "verifier_refused.bpf.c"),
      [&](const VerifierRejection &refusal) {
        rejected = true;
        EXPECT_EQ(refusal.object(), "refusal");
        EXPECT_EQ(refusal.program(), "refused");
        EXPECT_EQ(refusal.errorNumber(), EACCES) << strerror(refusal.errorNumber());
        EXPECT_NE(refusal.verifierLog().find("invalid access to packet"), std::string::npos)
            << refusal.verifierLog();
        llvm::StringRef lastLine = llvm::StringRef(refusal.verifierLog()).rtrim().rsplit('\n').second;
        EXPECT_TRUE(llvm::StringRef(refusal.reason()).ends_with(" / " + lastLine.str()))
            << refusal.reason();
        EXPECT_EQ(refusal.message().rfind("verifier_refused.bpf.c: object 'refusal': load "
                                          "failed: the kernel refused program 'refused': ",
                                          0),
                  0u)
            << refusal.message();
      },
      [&](const llvm::ErrorInfoBase &other) { ADD_FAILURE() << other.message(); });
  EXPECT_TRUE(rejected);

  bpf::LoadOptions withoutIt;
  withoutIt.programs = std::set<std::string>{"accepted"};
  auto accepted = bpf::LoadedObject::load(refusedObject(), "refusal", withoutIt);
  EXPECT_THAT_EXPECTED(accepted, llvm::Succeeded());
}

// libbpf refuses an object whose kernel function no kernel BTF defines
// before the kernel sees a program: the error says so (libbpf's own words,
// naming the function), not only "Invalid argument".
TEST(Failure, AKernelFunctionNoKernelDefinesIsNamedInTheLoadError) {
  llvm::ArrayRef<char> object(reinterpret_cast<const char *>(missing_kfunc_bpf_start),
                              size_t(missing_kfunc_bpf_end - missing_kfunc_bpf_start));
  auto loaded = bpf::LoadedObject::load(object, "missing_kfunc", {});
  ASSERT_FALSE(bool(loaded));
  std::string message = llvm::toString(loaded.takeError());
  EXPECT_EQ(message.rfind("object 'missing_kfunc': load failed: extern (func ksym) "
                          "'morpheus_no_such_kfunc': not found in kernel or module BTFs",
                          0),
            0u)
      << message;
}

// A map handed to a load with another size and flags than the object
// declares: an IncompatibleMap naming each field, not a verifier rejection
// (the kernel was asked nothing).
TEST(Failure, AMapOfAnotherLayoutIsAnIncompatibleMapNamingEachField) {
  LIBBPF_OPTS(bpf_map_create_opts, unpreallocated, .map_flags = BPF_F_NO_PREALLOC);
  Fd standIn(bpf_map_create(BPF_MAP_TYPE_HASH, "seen", 4, 8, 32, &unpreallocated));
  ASSERT_GE(standIn.fd, 0) << strerror(errno);
  bpf::LoadOptions options;
  options.programs = std::set<std::string>{"accepted"};
  options.maps["seen"] = standIn.fd;
  auto loaded = bpf::LoadedObject::load(refusedObject(), "refusal", options);
  ASSERT_FALSE(bool(loaded));
  Error err = loaded.takeError();
  EXPECT_FALSE(err.isA<VerifierRejection>());
  bool incompatible = false;
  llvm::handleAllErrors(
      std::move(err),
      [&](const bpf::IncompatibleMap &map) {
        incompatible = true;
        EXPECT_EQ(map.object(), "refusal");
        EXPECT_EQ(map.map(), "seen");
        EXPECT_EQ(map.differences(), (std::vector<bpf::MapFieldDifference>{
                                         {bpf::MapField::MaxEntries, false, 16, 32},
                                         {bpf::MapField::Flags, false, 0, BPF_F_NO_PREALLOC}}));
      },
      [&](const llvm::ErrorInfoBase &other) { ADD_FAILURE() << other.message(); });
  EXPECT_TRUE(incompatible);
}

TEST(Failure, PinnedMapsAreReusedAcrossRestarts) {
  PinDir pins("restart");
  policy_key key = policyKey(0x0a000001, 80, 17);
  // An instance removes the pins it made when it stops; an operator who
  // wants state kept pins the map once more, and a restart picks it up.
  {
    PolicyFwd first(pins.path());
    ASSERT_TRUE(first.ok());
    first.setPolicy(key, policyValue(ACTION_DROP));
    ASSERT_EQ(bpf_obj_pin(first.opt().mapFd("policy"), (pins.path() + "/kept").c_str()), 0);
  }
  ASSERT_EQ(rename((pins.path() + "/kept").c_str(), (pins.path() + "/policy").c_str()), 0);
  PolicyFwd second(pins.path());
  ASSERT_TRUE(second.ok());
  policy_value value;
  EXPECT_EQ(bpf_map_lookup_elem(second.opt().mapFd("policy"), &key, &value), 0)
      << "the restarted instance did not reuse the pinned map";
}

} // namespace
} // namespace morpheus::testing

namespace morpheus::testing {
namespace {

// The devmap program cannot join the entry's fallback program array; it
// falls back inside the program instead, so it is specialized and guarded
// (the entry falls back by tail call, through the array).
TEST(ProgramTypes, ProgramsWithoutAFallbackSlotFallBackInsideTheProgram) {
  runtime::OptimizerOptions options;
  auto created =
      runtime::Optimizer::create(sourcePath("tests/kernel/two_programs.bpf.c"), options);
  ASSERT_THAT_EXPECTED(created, llvm::Succeeded());
  runtime::Optimizer &opt = **created;
  uint32_t zero = 0, pass = XDP_PASS;
  ASSERT_EQ(bpf_map_update_elem(opt.mapFd("verdict"), &zero, &pass, BPF_ANY), 0);
  core::CycleReport report = opt.runCycle();
  ASSERT_TRUE(report.installed()) << report.describe();
  bool entrySpecialized = false, egressSpecialized = false;
  for (const core::SiteDecision &decision : report.log.decisions) {
    entrySpecialized |= decision.function == "entry" && decision.applied;
    egressSpecialized |= decision.function == "egress" && decision.applied;
  }
  EXPECT_TRUE(entrySpecialized);
  EXPECT_TRUE(egressSpecialized);
  for (const core::GuardDecision &guard : report.log.guards)
    EXPECT_EQ(guard.fallback, guard.function == "entry" ? core::Fallback::TailCall
                                                        : core::Fallback::InProgram)
        << guard.function << ": " << guard.detail;
  EXPECT_EQ(report.log.guards.size(), 2u);
  EXPECT_EQ(runOnce(opt.activeFd(), buildPacket(PacketSpec{})).verdict, uint32_t(XDP_PASS));
}

} // namespace
} // namespace morpheus::testing
