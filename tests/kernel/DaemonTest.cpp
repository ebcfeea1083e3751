// `morpheus run` as an operator runs it: a separate process attached to a
// veth (generic mode here; the swap and demo tests cover native), configured
// through its control socket, stopped with SIGTERM; with --detach-on-exit
// leaving nothing behind (the default keeps the original attached:
// ProgramKindsTest).
#include "ChildProcess.h"
#include "KernelSupport.h"
#include "PolicyFwd.h"
#include "netns/VethPair.h"
#include "runtime/Daemon.h"

#include <bpf/bpf.h>

#include <gtest/gtest.h>
#include <llvm/Testing/Support/Error.h>
#include <nlohmann/json.hpp>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <optional>

namespace morpheus::testing {
namespace {

// `morpheus run PROG ARGS... --socket S` as a child process (ChildProcess),
// killed if the test ends before it is stopped.
class Daemon {
public:
  Daemon(const std::string &tag, std::vector<std::string> arguments)
      : socketPath(socketFor(tag)), process(tag, withCommand(std::move(arguments), socketPath)) {}
  // What a run killed before its exit leaves.
  ~Daemon() { removeSocket(socketPath); }

  static std::string socketFor(const std::string &tag) {
    return "/tmp/morpheus-test-" + tag + "-" + std::to_string(getpid()) + ".sock";
  }
  static void removeSocket(const std::string &path) {
    unlink(path.c_str());
    unlink((path + ".lock").c_str());
  }

  // The socket is there once the daemon serves it.
  bool started() {
    return waitFor([&] { return access(socketPath.c_str(), F_OK) == 0; },
                   std::chrono::seconds(20));
  }
  bool alive() const { return process.alive(); }
  pid_t pid() const { return process.pid(); }
  // SIGTERM; true when it exits with status 0.
  bool stop() { return process.stop(); }
  std::string log() const { return process.log(); }
  nlohmann::json ask(const nlohmann::json &request) const {
    return askControlSocket(socketPath, request);
  }
  // Waits until the daemon runs code specialized for `version`.
  bool specializedFor(uint64_t version) const {
    return waitFor(
        [&] {
          nlohmann::json status = ask({{"op", "status"}});
          return status.value("ok", false) &&
                 status["status"]["specialized_version"].get<uint64_t>() == version;
        },
        std::chrono::seconds(10));
  }

  const std::string socketPath;

private:
  static std::vector<std::string> withCommand(std::vector<std::string> arguments,
                                              const std::string &socketPath) {
    arguments.insert(arguments.begin(),
                     {binPath("morpheus"), "run", sourcePath("examples/policy_fwd.bpf.c")});
    arguments.insert(arguments.end(), {"--socket", socketPath});
    return arguments;
  }
  ChildProcess process;
};

TEST(Daemon, ControlSocketUpdatesAndCleanShutdown) {
  VethPair::sweepStale("daemon");
  VethPair veth("daemon");
  PinDir pins("daemon");
  std::string pinDir = pins.path() + "/policy_fwd";
  Daemon daemon("daemon", {"--iface", veth.ifB(), "--netns", veth.nsB(), "--pin-dir", pinDir,
                           "--period", "200ms", "--xdp-mode", "generic", "--detach-on-exit"});
  const std::string &socketPath = daemon.socketPath;
  ASSERT_TRUE(daemon.started()) << daemon.log();
  struct stat info = {};
  ASSERT_EQ(stat(socketPath.c_str(), &info), 0);
  EXPECT_EQ(info.st_mode & 0777, 0600u) << "only root may talk to the daemon";
  EXPECT_EQ(access((pinDir + "/policy").c_str(), F_OK), 0);
  EXPECT_EQ(access((pinDir + "/morpheus_guard").c_str(), F_OK), 0);

  nlohmann::json before = askControlSocket(socketPath, {{"op", "status"}});
  ASSERT_TRUE(before.value("ok", false)) << before.dump();
  uint64_t version = before["status"]["guard_version"];

  nlohmann::json updated = askControlSocket(socketPath, {{"op", "update"},
                                            {"map", "config"},
                                            {"key", "00000000"},
                                            {"value", "02000000 01000000"}});
  ASSERT_TRUE(updated.value("ok", false)) << updated.dump();
  EXPECT_GT(updated["version"].get<uint64_t>(), version);

  for (const nlohmann::json &bad :
       {nlohmann::json{{"op", "update"}, {"map", "nosuch"}, {"key", "00"}, {"value", "00"}},
        nlohmann::json{{"op", "update"}, {"map", "config"}, {"key", "00"}, {"value", "00"}},
        nlohmann::json{{"op", "explode"}}}) {
    nlohmann::json reply = askControlSocket(socketPath, bad);
    EXPECT_FALSE(reply.value("ok", true)) << bad.dump();
    EXPECT_TRUE(reply.contains("error")) << reply.dump();
  }
  for (const std::string &bad : {std::string("{\"op\": \"update\", \"map\":"),
                                 std::string("[1, 2, 3]"), std::string(3 << 20, 'x')}) {
    nlohmann::json reply =
        nlohmann::json::parse(askControlSocketRaw(socketPath, bad), nullptr, false);
    EXPECT_FALSE(reply.value("ok", true)) << reply.dump();
    EXPECT_TRUE(reply.contains("error")) << reply.dump();
  }
  nlohmann::json after = askControlSocket(socketPath, {{"op", "status"}});
  EXPECT_TRUE(after.value("ok", false)) << "the daemon survives bad requests";
  EXPECT_EQ(after["status"]["guard_version"], updated["version"])
      << "bad requests changed nothing";

  // The daemon re-specializes for the new version on its own.
  EXPECT_TRUE(daemon.specializedFor(updated["version"])) << daemon.log();

  std::string log = daemon.log();
  EXPECT_TRUE(daemon.stop()) << log;
  EXPECT_NE(log.find("installed"), std::string::npos) << log;
  EXPECT_NE(access(socketPath.c_str(), F_OK), 0) << "socket left behind";
  EXPECT_NE(access(pinDir.c_str(), F_OK), 0) << "pins left behind";
  std::string link = "ip -n " + veth.nsB() + " link show " + veth.ifB() + " | grep -q xdp";
  EXPECT_NE(std::system(link.c_str()), 0) << "program still attached";
}

// An interface that goes down keeps its program; one that is deleted loses
// it (the kernel detaches the link): the daemon says so, keeps serving the
// other port and re-specializing, and re-attaches when the interface is back.
TEST(Daemon, KeepsServingWhenAnInterfaceGoesDownOrAway) {
  VethPair::sweepStale("daemonif");
  VethPair veth("daemonif");
  PinDir pins("daemonif");
  // A second port beside ifB in the same namespace.
  std::string extra = "mpx" + std::to_string(getpid() % 1000000);
  std::string add = "ip -n " + veth.nsB() + " link add " + extra + " type veth peer name " +
                    extra + "p && ip -n " + veth.nsB() + " link set " + extra + " up";
  ASSERT_EQ(std::system(add.c_str()), 0);
  Daemon daemon("daemonif", {"--iface", veth.ifB(), "--iface", extra, "--netns", veth.nsB(),
                             "--pin-dir", pins.path(), "--period", "200ms",
                             "--xdp-mode", "generic"});
  ASSERT_TRUE(daemon.started()) << daemon.log();
  auto update = [&](const std::string &value) {
    nlohmann::json reply = daemon.ask(
        {{"op", "update"}, {"map", "config"}, {"key", "00000000"}, {"value", value}});
    EXPECT_TRUE(reply.value("ok", false)) << reply.dump();
    return reply.value("version", uint64_t(0));
  };
  auto attached = [&](const std::string &iface) {
    std::string show = "ip -n " + veth.nsB() + " link show " + iface + " | grep -q xdp";
    return std::system(show.c_str()) == 0;
  };

  ASSERT_EQ(std::system(("ip -n " + veth.nsB() + " link set " + veth.ifB() + " down").c_str()), 0);
  EXPECT_TRUE(daemon.specializedFor(update("02000000 01000000"))) << daemon.log();
  EXPECT_TRUE(attached(veth.ifB())) << "a port that is down keeps its program";

  ASSERT_EQ(std::system(("ip -n " + veth.nsB() + " link del " + extra).c_str()), 0);
  EXPECT_TRUE(daemon.specializedFor(update("02000000 00000000"))) << daemon.log();
  EXPECT_TRUE(waitFor(
      [&] { return daemon.log().find("interface '" + extra + "' disappeared") != std::string::npos; },
      std::chrono::seconds(5)))
      << daemon.log();
  EXPECT_NE(daemon.log().find("still serving " + veth.ifB()), std::string::npos) << daemon.log();
  EXPECT_TRUE(daemon.alive());
  EXPECT_TRUE(attached(veth.ifB()));

  ASSERT_EQ(std::system(add.c_str()), 0);
  EXPECT_TRUE(waitFor(
      [&] { return daemon.log().find("interface '" + extra + "' is back") != std::string::npos; },
      std::chrono::seconds(5)))
      << daemon.log();
  EXPECT_TRUE(attached(extra));
  EXPECT_TRUE(daemon.specializedFor(update("02000000 01000000"))) << daemon.log();
  EXPECT_TRUE(daemon.stop()) << daemon.log();
}

unsigned modeOf(const std::filesystem::path &path) {
  struct stat status = {};
  EXPECT_EQ(lstat(path.c_str(), &status), 0) << path;
  return status.st_mode & 07777;
}

// The daemon's policy, stepped in process with a clock of the test's
// choosing: a refused candidate is printed and backs off like a failure,
// its reproducer is written once per distinct difference (in a directory
// the daemon creates for itself alone, each file its owner's alone: they
// hold map contents), and the status line never subtracts one program's
// counters from another's.
TEST(Daemon, RefusedCandidatesArePrintedBackOffAndKeepOneReproducerPerDifference) {
  VethPair::sweepStale("daemonstep");
  VethPair veth("daemonstep");
  PinDir pins("daemonstep");
  std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                  ("morpheus-test-daemonstep-" + std::to_string(getpid()));
  std::filesystem::path reproducers = scratch / "reproducers";
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() { std::filesystem::remove_all(path); }
  } cleanup{scratch};
  int statsFd = bpf_enable_stats(BPF_STATS_RUN_TIME);
  ASSERT_GE(statsFd, 0) << strerror(errno);
  struct CloseFd {
    int fd;
    ~CloseFd() { close(fd); }
  } closeStats{statsFd};

  runtime::DaemonOptions options;
  options.optimizer.pinDir = pins.path();
  options.ifaces = {veth.ifB()};
  options.netns = veth.nsB();
  options.mode = bpf::XdpMode::Generic;
  options.reproducerDir = reproducers.string();
  std::string printed, problems;
  llvm::raw_string_ostream out(printed), errors(problems);
  auto started = runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options,
                                        out, errors);
  ASSERT_THAT_EXPECTED(started, llvm::Succeeded());
  runtime::Daemon &daemon = **started;
  runtime::Optimizer &opt = daemon.optimizer();
  auto update = [&](const std::string &map, const Bytes &key, const Bytes &value) {
    auto updater = bpf::MapUpdater::forMap(opt.mapFd(map), map, &opt.guard());
    ASSERT_THAT_EXPECTED(updater, llvm::Succeeded());
    llvm::Error err = updater->update(key, value);
    ASSERT_THAT_ERROR(std::move(err), llvm::Succeeded());
  };
  uint32_t zero = 0;
  update("config", bytesOf(zero), bytesOf(config{CFG_POLICY_ENABLED, ACTION_PASS}));
  for (uint32_t i = 0; i < 12; ++i)
    update("policy", bytesOf(policyKey(0x0a000100 + i, 80, IPPROTO_UDP)),
           bytesOf(policyValue(i % 2 ? ACTION_DROP : ACTION_PASS)));

  const auto period = options.period;
  auto t = runtime::Daemon::Clock::now();
  std::optional<core::CycleReport> cycle = daemon.step(t);
  ASSERT_TRUE(cycle && cycle->installed()) << printed;

  // Packets through the installed program, counted by bpf_stats.
  Bytes packet = buildPacket(PacketSpec{.daddr = 0x0a000101, .dport = 80});
  for (int i = 0; i < 3; ++i)
    runOnce(opt.activeFd(), packet);
  t += period;
  ASSERT_TRUE(daemon.step(t)) << "a periodic cycle";
  // The period is measured before its cycle runs: on the version cycle 1
  // installed, which served it.
  EXPECT_NE(printed.find("status: cycle 1, specialized program, 3 packets"), std::string::npos)
      << printed;

  // A wrong pass: every candidate is refused.
  opt.injectFaults({.breakKeyCompare = true});
  std::map<std::string, unsigned> refusals; // by difference
  unsigned refused = 0;
  for (uint32_t round = 0; round < 5; ++round) {
    update("policy", bytesOf(policyKey(0x0a000200 + round, 80, IPPROTO_UDP)),
           bytesOf(policyValue(ACTION_DROP)));
    // The guard moved: the daemon tries at once unless it is backing off.
    t = std::max(t + std::chrono::milliseconds(1), daemon.nextCycleAt());
    cycle = daemon.step(t);
    ASSERT_TRUE(cycle) << "round " << round;
    ASSERT_EQ(cycle->outcome, core::CycleOutcome::Refused) << cycle->describe();
    ++refused;
    ++refusals[cycle->differenceKey];
    EXPECT_EQ(daemon.consecutiveFailures(), refused);
    // Backing off 2^n periods: nothing runs before that, even on a change.
    auto wait = period * (1 << refused);
    EXPECT_EQ(daemon.nextCycleAt(), t + wait);
    EXPECT_FALSE(daemon.step(t + wait - std::chrono::milliseconds(1)))
        << "round " << round << ": a cycle during the back-off";
  }
  opt.injectFaults({});
  EXPECT_LT(refusals.size(), refused) << "the same difference should recur";
  size_t files = std::distance(std::filesystem::directory_iterator(reproducers),
                               std::filesystem::directory_iterator());
  EXPECT_EQ(files, refusals.size()) << "one reproducer per distinct difference";
  EXPECT_EQ(modeOf(reproducers), 0700u) << "the reproducers' directory is the daemon's alone";
  for (const auto &file : std::filesystem::directory_iterator(reproducers))
    EXPECT_EQ(modeOf(file.path()), 0600u) << file.path() << " holds map contents";
  size_t lines = 0;
  for (size_t at = printed.find("refused: shadow validation"); at != std::string::npos;
       at = printed.find("refused: shadow validation", at + 1))
    ++lines;
  EXPECT_EQ(lines, refused) << "every refusal is printed\n" << printed;
  EXPECT_NE(printed.find("the running program stays (reproducer " + reproducers.string()),
            std::string::npos)
      << printed;

  // The mended pass installs at the end of the back-off, which then ends.
  t = daemon.nextCycleAt();
  cycle = daemon.step(t);
  ASSERT_TRUE(cycle && cycle->installed()) << (cycle ? cycle->describe() : "no cycle");
  EXPECT_EQ(daemon.consecutiveFailures(), 0u);
  EXPECT_EQ(daemon.nextCycleAt(), t);

  // After swaps, counters of another program are never subtracted: the
  // first status after the swap only takes the new program's totals, the
  // next one counts its packets.
  printed.clear();
  t += period;
  daemon.step(t);
  for (int i = 0; i < 2; ++i)
    runOnce(opt.activeFd(), packet);
  t += period;
  daemon.step(t);
  EXPECT_NE(printed.find(", 2 packets,"), std::string::npos) << printed;
  EXPECT_EQ(problems, "");
}

// Whether SIGSTOP has taken effect in every thread of `pid` (it does so
// asynchronously).
bool everyThreadStopped(pid_t pid) {
  std::filesystem::path tasks = "/proc/" + std::to_string(pid) + "/task";
  std::error_code error;
  for (const auto &task : std::filesystem::directory_iterator(tasks, error)) {
    std::ifstream status(task.path() / "status");
    std::string line;
    while (std::getline(status, line))
      if (line.rfind("State:", 0) == 0 && line.find("(stopped)") == std::string::npos)
        return false;
  }
  return !error;
}

// Asks for the status and gives up after `patience`: whether a reply came.
bool askAndGiveUp(const std::string &socketPath, std::chrono::milliseconds patience) {
  Fd client(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  sockaddr_un address = unixAddress(socketPath);
  if (connect(client.fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)))
    return false;
  timeval timeout = {0, suseconds_t(patience.count() * 1000)};
  setsockopt(client.fd, SOL_SOCKET, SO_RCVTIMEO, &timeout, sizeof(timeout));
  const std::string request = "{\"op\":\"status\"}\n";
  if (send(client.fd, request.data(), request.size(), MSG_NOSIGNAL) != ssize_t(request.size()))
    return false;
  char first;
  return recv(client.fd, &first, 1, 0) == 1;
}

// A second `morpheus run` on a socket a live one serves is refused before
// it loads, pins or attaches anything, naming the socket and the first
// run's pid; the first keeps serving, its maps as they were.
TEST(Daemon, ASecondRunOnALiveSocketIsRefusedAndTouchesNothing) {
  VethPair::sweepStale("daemontwo");
  VethPair veth("daemontwo");
  PinDir pins("daemontwo");
  std::string firstPins = pins.path() + "/first", secondPins = pins.path() + "/second";
  Daemon first("daemontwo", {"--iface", veth.ifB(), "--netns", veth.nsB(), "--pin-dir",
                             firstPins, "--period", "200ms", "--xdp-mode", "generic",
                             "--detach-on-exit"});
  ASSERT_TRUE(first.started()) << first.log();
  nlohmann::json updated = first.ask(
      {{"op", "update"}, {"map", "config"}, {"key", "00000000"}, {"value", "02000000 01000000"}});
  ASSERT_TRUE(updated.value("ok", false)) << updated.dump();

  ChildProcess second("daemontwo-second",
                      {binPath("morpheus"), "run", sourcePath("examples/policy_fwd.bpf.c"),
                       "--iface", veth.ifA(), "--netns", veth.nsA(), "--pin-dir", secondPins,
                       "--xdp-mode", "generic", "--detach-on-exit", "--socket",
                       first.socketPath});
  std::optional<int> status = second.wait(std::chrono::seconds(60));
  ASSERT_TRUE(status) << "the second run is still running\n" << second.log();
  EXPECT_NE(*status, 0) << second.log();
  EXPECT_NE(second.log().find("control socket '" + first.socketPath + "' is taken: process " +
                              std::to_string(first.pid()) + " (morpheus) holds " +
                              first.socketPath + ".lock; stop it or choose another socket path\n"),
            std::string::npos)
      << second.log();
  EXPECT_NE(access(secondPins.c_str(), F_OK), 0) << "the refused run pinned maps";
  std::string xdp = "ip -n " + veth.nsA() + " link show " + veth.ifA() + " | grep -q xdp";
  EXPECT_NE(std::system(xdp.c_str()), 0) << "the refused run attached a program";

  nlohmann::json after = first.ask({{"op", "status"}});
  ASSERT_TRUE(after.value("ok", false)) << after.dump() << first.log();
  EXPECT_EQ(after["status"]["guard_version"], updated["version"]);
  Fd config(bpf_obj_get((firstPins + "/config").c_str()));
  ASSERT_GE(config.fd, 0);
  uint32_t zero = 0;
  uint8_t value[8] = {};
  ASSERT_EQ(bpf_map_lookup_elem(config.fd, &zero, value), 0);
  EXPECT_EQ(Bytes(value, value + 8), (Bytes{2, 0, 0, 0, 1, 0, 0, 0}));
  EXPECT_TRUE(first.stop()) << first.log();
}

// A socket whose process died (kill -9 leaves it) is replaced by the next
// run, which says so.
TEST(Daemon, ASocketLeftByADeadProcessIsReplaced) {
  VethPair::sweepStale("daemonstale");
  VethPair veth("daemonstale");
  PinDir pins("daemonstale");
  std::string socketPath = Daemon::socketFor("daemonstale");
  {
    Fd dead(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
    sockaddr_un address = unixAddress(socketPath);
    ASSERT_EQ(bind(dead.fd, reinterpret_cast<sockaddr *>(&address), sizeof(address)), 0);
    ASSERT_EQ(listen(dead.fd, 1), 0);
  }
  ASSERT_EQ(access(socketPath.c_str(), F_OK), 0);
  Daemon daemon("daemonstale", {"--iface", veth.ifB(), "--netns", veth.nsB(), "--pin-dir",
                                pins.path() + "/policy_fwd", "--period", "200ms",
                                "--xdp-mode", "generic", "--detach-on-exit"});
  EXPECT_TRUE(waitFor([&] { return daemon.ask({{"op", "status"}}).value("ok", false); },
                      std::chrono::seconds(30)))
      << daemon.log();
  EXPECT_NE(daemon.log().find("control socket '" + socketPath +
                              "': replaced the socket a process that is gone left there"),
            std::string::npos)
      << daemon.log();
  EXPECT_TRUE(daemon.stop()) << daemon.log();
  EXPECT_NE(access(socketPath.c_str(), F_OK), 0) << "socket left behind";
  EXPECT_NE(access((socketPath + ".lock").c_str(), F_OK), 0) << "lock file left behind";
}

// Stopped (SIGSTOP) while clients ask, time out and hang up, then continued:
// the daemon answers those requests into closed connections (EPIPE, not a
// SIGPIPE that ended it with status 141) and serves on.
TEST(Daemon, ServesOnAfterAStopDuringWhichClientsGaveUp) {
  VethPair::sweepStale("daemonstop");
  VethPair veth("daemonstop");
  PinDir pins("daemonstop");
  Daemon daemon("daemonstop", {"--iface", veth.ifB(), "--netns", veth.nsB(), "--pin-dir",
                               pins.path() + "/policy_fwd", "--period", "200ms",
                               "--xdp-mode", "generic", "--detach-on-exit"});
  ASSERT_TRUE(daemon.started()) << daemon.log();
  ASSERT_TRUE(daemon.ask({{"op", "status"}}).value("ok", false)) << daemon.log();
  ASSERT_EQ(kill(daemon.pid(), SIGSTOP), 0);
  ASSERT_TRUE(waitFor([&] { return everyThreadStopped(daemon.pid()); }, std::chrono::seconds(10)));
  for (int client = 0; client < 4; ++client)
    EXPECT_FALSE(askAndGiveUp(daemon.socketPath, std::chrono::milliseconds(600)))
        << "a stopped daemon answered";
  ASSERT_EQ(kill(daemon.pid(), SIGCONT), 0);
  for (int client = 0; client < 4; ++client) {
    nlohmann::json status = daemon.ask({{"op", "status"}});
    EXPECT_TRUE(status.value("ok", false)) << status.dump() << daemon.log();
  }
  EXPECT_TRUE(daemon.alive()) << daemon.log();
  EXPECT_TRUE(daemon.stop()) << daemon.log();
}

// A reproducer directory others could enter or plant files in is refused
// before anything is attached; so is a link in its place.
TEST(Daemon, RefusesAReproducerDirectoryOthersCouldReach) {
  std::filesystem::path scratch = std::filesystem::temp_directory_path() /
                                  ("morpheus-test-reprodir-" + std::to_string(getpid()));
  struct RemoveDir {
    std::filesystem::path path;
    ~RemoveDir() { std::filesystem::remove_all(path); }
  } cleanup{scratch};
  std::filesystem::path open = scratch / "open", mine = scratch / "mine",
                        link = scratch / "link";
  std::filesystem::create_directories(open);
  std::filesystem::permissions(open, std::filesystem::perms::all);
  std::filesystem::create_directories(mine);
  std::filesystem::permissions(mine, std::filesystem::perms::owner_all);
  std::filesystem::create_symlink(mine, link);
  for (const auto &[dir, why] : {std::pair(open, ": mode 0777 lets its group or others in"),
                                 std::pair(link, ": a symbolic link")}) {
    runtime::DaemonOptions options;
    options.ifaces = {"lo"};
    options.reproducerDir = dir.string();
    std::string printed, problems;
    llvm::raw_string_ostream out(printed), errors(problems);
    auto started = runtime::Daemon::start(sourcePath("examples/policy_fwd.bpf.c"), options,
                                          out, errors);
    std::string said = started ? std::string("started") : llvm::toString(started.takeError());
    EXPECT_EQ(said, "the reproducer directory: " + dir.string() + why +
                        ": refused for files holding map contents " +
                        (dir == open ? "(chmod 700 it, or choose another directory)"
                                     : "(name the directory itself)"));
  }
  EXPECT_EQ(modeOf(open), 0777u) << "left as it was";
}

} // namespace
} // namespace morpheus::testing
