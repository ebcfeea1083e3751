// What operators watch of `morpheus daemon`, run as they run it: the binary
// with a configuration file, its metrics scraped over HTTP and its history
// asked on the control socket. Two policy_fwd programs, each on a veth of
// its own, one of them following the traffic (profile: naive, so every
// lookup is sampled); the test configures it through the socket, sends it
// traffic with three hot keys (BPF_PROG_TEST_RUN on the program its hook
// runs), and reads back: cycles by outcome, versions, instructions, guard
// bumps, sites and why the kept ones were kept, the fast path's hit ratio
// (exactly the hot keys' share of the traffic), bpf_stats, each program's
// history and its plot (`morpheus status --plot`); after a reload that
// removes the other program, no family names it any more.
#include "ChildProcess.h"
#include "KernelSupport.h"
#include "PolicyFwd.h"
#include "XdpHooks.h"
#include "netns/VethPair.h"
#include "support/CpuPin.h"

#include <httplib.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/MemoryBuffer.h>

#include <gtest/gtest.h>
#include <signal.h>

#include <fstream>
#include <map>
#include <regex>

namespace morpheus::testing {
namespace {

using namespace std::chrono_literals;

constexpr unsigned Policies = 200; // more than inline-small-table takes whole

policy_key keyNumber(unsigned i) { return policyKey(0x0a000001 + i, 80 + i % 4, IPPROTO_UDP); }

Bytes packetTo(unsigned i) {
  policy_key key = keyNumber(i);
  PacketSpec spec;
  spec.daddr = ntohl(key.daddr);
  spec.dport = ntohs(key.dport);
  spec.protocol = key.proto;
  return buildPacket(spec);
}

// 64 packets (the slots a site keeps per CPU between two reads): keys 3, 7
// and 11 in turn with a cold key after each three, so any stretch of it is
// three quarters hot.
std::vector<Bytes> hotTraffic() {
  std::vector<Bytes> packets;
  for (unsigned round = 0; round < 16; ++round)
    for (unsigned key : {3u, 7u, 11u, 20u + round})
      packets.push_back(packetTo(key));
  return packets;
}

// The page's samples by series, as written: `name{label="value",...}`.
std::map<std::string, double> samplesOf(const std::string &page) {
  std::map<std::string, double> samples;
  for (llvm::StringRef line : llvm::split(page, '\n')) {
    if (line.empty() || line.starts_with("#"))
      continue;
    auto [series, value] = line.rsplit(' ');
    double number = 0;
    if (!value.getAsDouble(number))
      samples[series.str()] = number;
  }
  return samples;
}

// The series of `page` whose text starts with `prefix`.
std::map<std::string, double> seriesStarting(const std::map<std::string, double> &page,
                                             const std::string &prefix) {
  std::map<std::string, double> found;
  for (const auto &[series, value] : page)
    if (llvm::StringRef(series).starts_with(prefix))
      found[series] = value;
  return found;
}

// The agent's programs (fwd always, gone while `withGone`), on their own
// veths, with a metrics endpoint on a port the kernel chooses.
struct Scene {
  explicit Scene(const std::string &tag)
      : sweep(VethPair::sweepStale(tag)), fwd(tag), other(tag), pins(tag),
        base("/tmp/morpheus-test-" + tag + "-" + std::to_string(getpid())) {}
  ~Scene() {
    for (const char *suffix : {".yaml", ".sock", ".sock.lock", ".svg"})
      unlink((base + suffix).c_str());
  }
  std::string config() const { return base + ".yaml"; }
  std::string socket() const { return base + ".sock"; }
  std::string plot() const { return base + ".svg"; }

  void writeConfig(bool withGone) const {
    std::ofstream file(config());
    file << "socket: " << socket() << "\nmetrics_address: 127.0.0.1:0\nprograms:\n";
    auto program = [&](const char *name, const VethPair &veth, const char *more) {
      file << "  - name: " << name << "\n"
           << "    source: " << sourcePath("examples/policy_fwd.bpf.c") << "\n"
           << "    ifaces: [" << veth.ifB() << "]\n"
           << "    netns: " << veth.nsB() << "\n"
           << "    xdp_mode: generic\n"
           << "    pin_dir: " << pins.path() << "/" << name << "\n"
           << "    period: 200ms\n"
           << "    quiet: true\n"
           << more;
    };
    program("fwd", fwd, "    profile: naive\n");
    if (withGone)
      program("gone", other, "");
  }

  nlohmann::json ask(nlohmann::json request) const { return askControlSocket(socket(), request); }
  nlohmann::json status(const std::string &program) const {
    nlohmann::json reply = ask({{"op", "status"}, {"program", program}});
    return reply.value("ok", false) ? reply["status"] : nlohmann::json();
  }
  // The programs the agent lists, all serving.
  bool serving(size_t programs) const {
    nlohmann::json reply = ask({{"op", "status"}});
    if (!reply.value("ok", false) || reply["status"]["programs"].size() != programs)
      return false;
    for (const nlohmann::json &program : reply["status"]["programs"])
      if (program.value("state", "") != "serving")
        return false;
    return true;
  }
  template <typename Key, typename Value>
  void update(const char *map, const Key &key, const Value &value) const {
    nlohmann::json reply = ask({{"op", "update"},
                                {"program", "fwd"},
                                {"map", map},
                                {"key", toHex(bytesOf(key))},
                                {"value", toHex(bytesOf(value))}});
    ASSERT_TRUE(reply.value("ok", false)) << reply.dump();
  }

  unsigned sweep;
  VethPair fwd, other;
  PinDir pins;
  std::string base;
};

// The port the agent's log says its metrics are served at (0: not yet).
uint16_t metricsPort(const std::string &log) {
  std::smatch found;
  if (!std::regex_search(log, found, std::regex(R"(metrics at http://127\.0\.0\.1:(\d+)/metrics)")))
    return 0;
  return uint16_t(std::stoul(found[1]));
}

std::string scrape(uint16_t port) {
  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(5, 0);
  httplib::Result page = client.Get("/metrics");
  return page && page->status == 200 ? page->body : "";
}

// The last cycle the program ran (0: none).
uint64_t lastCycle(const nlohmann::json &status) {
  return status.contains("last_cycle") ? status["last_cycle"].value("cycle", uint64_t(0)) : 0;
}

TEST(AgentMetrics, TheRunningAgentsMetricsAndHistoryShowEachProgram) {
  Scene scene("agentmetrics");
  scene.writeConfig(/*withGone=*/true);
  ChildProcess agent("agentmetrics", {binPath("morpheus"), "daemon", "--config", scene.config()});
  uint16_t port = 0;
  ASSERT_TRUE(waitFor(
                  [&] {
                    port = metricsPort(agent.log());
                    return !agent.alive() || (port && scene.serving(2));
                  },
                  60s) &&
              agent.alive())
      << agent.log();

  // Configured through the socket: every update bumps the guard twice.
  uint32_t zero = 0;
  scene.update("config", zero, config{CFG_POLICY_ENABLED, ACTION_PASS});
  for (unsigned i = 0; i < Policies; ++i)
    scene.update("policy", keyNumber(i), policyValue(i % 2 ? ACTION_TX : ACTION_DROP, uint8_t(i)));
  if (HasFatalFailure())
    return;
  // Settled: the version installed is built for the guard's version.
  ASSERT_TRUE(waitFor(
      [&] {
        nlohmann::json fwd = scene.status("fwd");
        return !fwd.is_null() && fwd.value("installed_version", uint64_t(0)) ==
                                     fwd.value("guard_version", uint64_t(1));
      },
      60s))
      << scene.status("fwd").dump() << agent.log();

  // Traffic three quarters hot, through whatever the hook runs, until the
  // version it built a fast path for has had its samples read whole: the
  // first round gives the next version its fast path; a round read before
  // that version runs, or split by a cycle that starts while the packets
  // run, goes again.
  CpuPin oneCpu; // the samples of one CPU: 64 kept between two reads
  nlohmann::json fastPath = nlohmann::json::object();
  for (int round = 0; round < 8 && fastPath.value("samples", 0) != 64; ++round) {
    uint64_t before = lastCycle(scene.status("fwd"));
    Fd hook(bpf_prog_get_fd_by_id(hookProgram(scene.fwd)));
    for (const Bytes &packet : hotTraffic())
      runOnce(hook.fd, packet);
    // A cycle that began after the last packet has read its samples.
    ASSERT_TRUE(waitFor([&] { return lastCycle(scene.status("fwd")) >= before + 2; }, 30s))
        << agent.log();
    nlohmann::json paths = scene.status("fwd")["fast_paths"];
    ASSERT_LE(paths.size(), 1u) << "one site with a fast path: policy's\n" << paths.dump();
    if (paths.size() == 1)
      fastPath = paths[0];
  }
  EXPECT_EQ(fastPath.value("table", ""), "policy") << fastPath.dump();
  ASSERT_EQ(fastPath.value("samples", 0), 64) << fastPath.dump();
  EXPECT_DOUBLE_EQ(fastPath.value("hit_ratio", 0.0), 0.75)
      << "the three hot keys are 48 of the 64 lookups sampled\n"
      << fastPath.dump();

  std::map<std::string, double> page = samplesOf(scrape(port));
  ASSERT_FALSE(page.empty()) << "nothing scraped at port " << port;
  auto value = [&](const std::string &series) {
    auto found = page.find(series);
    EXPECT_NE(found, page.end()) << "no series " << series;
    return found == page.end() ? -1.0 : found->second;
  };
  std::string site = "{program=\"fwd\",site=\"" + std::to_string(fastPath.value("site", 0)) +
                     "\",table=\"policy\"}";
  EXPECT_DOUBLE_EQ(value("morpheus_fast_path_hit_ratio" + site), 0.75);
  EXPECT_EQ(value("morpheus_fast_path_samples" + site), 64);
  EXPECT_GE(value("morpheus_cycles_total{program=\"fwd\",outcome=\"installed\"}"), 2)
      << "the configured version, then the fast path's";
  EXPECT_GE(value("morpheus_installed_version{program=\"fwd\"}"), 1);
  EXPECT_EQ(value("morpheus_program_starts_total{program=\"fwd\"}"), 1)
      << "the start with the agent counts";
  EXPECT_GT(value("morpheus_instructions{program=\"fwd\",version=\"original\"}"), 0);
  EXPECT_GT(value("morpheus_instructions{program=\"fwd\",version=\"specialized\"}"), 0);
  EXPECT_GE(value("morpheus_guard_bumps_total{program=\"fwd\"}"), 2 * (Policies + 1))
      << "two bumps an update";
  EXPECT_EQ(value("morpheus_guard_bumps_total{program=\"gone\"}"), 0);
  EXPECT_EQ(value("morpheus_verifier_refusals_total{program=\"fwd\"}"), 0);
  EXPECT_GE(value("morpheus_sites{program=\"fwd\",decision=\"specialized\"}"), 1);
  double kept = value("morpheus_sites{program=\"fwd\",decision=\"kept\"}");
  EXPECT_GE(kept, 1) << "the stats counters' lookups: the data plane writes them";
  double declines = 0;
  for (const auto &[series, sites] : seriesStarting(page, "morpheus_site_declines{program=\"fwd\""))
    declines += sites;
  EXPECT_GE(declines, kept) << "every kept site has a reason";
  EXPECT_GE(value("morpheus_site_declines{program=\"fwd\",pass=\"analysis\",reason=\"not_"
                  "replaceable\"}"),
            1);
  EXPECT_EQ(value("morpheus_bpf_stats_enabled"), 1);
  EXPECT_GT(value("morpheus_ns_per_packet{program=\"fwd\",version=\"specialized\"}"), 0);
  EXPECT_EQ(value("morpheus_program_state{program=\"gone\",state=\"serving\"}"), 1);
  EXPECT_FALSE(seriesStarting(page, "morpheus_cycles_total{program=\"gone\"").empty());

  // The history: every status period and every install, on the socket.
  nlohmann::json history = scene.ask({{"op", "history"}, {"program", "fwd"}});
  ASSERT_TRUE(history.value("ok", false)) << history.dump();
  ASSERT_EQ(history["history"]["programs"].size(), 1u);
  const nlohmann::json &fwd = history["history"]["programs"][0];
  EXPECT_EQ(fwd["name"], "fwd");
  EXPECT_GE(fwd["installs"].size(), 2u) << fwd["installs"].dump();
  bool measuredSpecialized = false;
  double previous = 0;
  for (const nlohmann::json &sample : fwd["samples"]) {
    EXPECT_GE(sample["time"].get<double>(), previous) << "in time order";
    previous = sample["time"].get<double>();
    measuredSpecialized |= sample["program"] == "specialized" && sample.contains("ns_per_packet");
  }
  EXPECT_TRUE(measuredSpecialized) << "a period of the traffic, on the specialized version";
  nlohmann::json unknown = scene.ask({{"op", "history"}, {"program", "third"}});
  EXPECT_EQ(unknown.value("error", ""), "\"program\": no program 'third' in this agent");

  // The plot, as `morpheus status --plot` writes it.
  ChildProcess plot("agentmetrics-plot", {binPath("morpheus"), "status", "--socket", scene.socket(),
                                          "--plot", scene.plot()});
  ASSERT_EQ(plot.wait(60s), std::optional<int>(0)) << plot.log();
  auto svg = llvm::MemoryBuffer::getFile(scene.plot());
  ASSERT_TRUE(bool(svg)) << plot.log();
  std::string drawn = (*svg)->getBuffer().str();
  EXPECT_NE(drawn.find(">fwd</text>"), std::string::npos);
  EXPECT_NE(drawn.find(">gone</text>"), std::string::npos);
  size_t installs = 0;
  for (size_t at = drawn.find("class=\"install\""); at != std::string::npos;
       at = drawn.find("class=\"install\"", at + 1))
    ++installs;
  EXPECT_GE(installs, fwd["installs"].size() + 1) << "fwd's installs and gone's first\n"
                                                  << scene.ask({{"op", "history"}}).dump();

  // For scripts: `morpheus status --history --json`, the socket's answer.
  ChildProcess script("agentmetrics-history",
                      {binPath("morpheus"), "status", "--socket", scene.socket(), "--program",
                       "fwd", "--history", "--json"});
  ASSERT_EQ(script.wait(60s), std::optional<int>(0)) << script.log();
  nlohmann::json printed = nlohmann::json::parse(script.log(), nullptr, false);
  ASSERT_FALSE(printed.is_discarded()) << script.log();
  ASSERT_EQ(printed["programs"].size(), 1u) << script.log();
  EXPECT_EQ(printed["programs"][0]["name"], "fwd");
  EXPECT_GE(printed["programs"][0]["installs"].size(), fwd["installs"].size());
  ChildProcess text("agentmetrics-text", {binPath("morpheus"), "status", "--socket", scene.socket(),
                                          "--program", "fwd", "--history"});
  ASSERT_EQ(text.wait(60s), std::optional<int>(0)) << text.log();
  EXPECT_NE(text.log().find("fwd: "), std::string::npos) << text.log();
  EXPECT_TRUE(std::regex_search(
      text.log(), std::regex(R"(specialized +[1-9][0-9]* packets, [0-9.]+ ns/packet)")))
      << "a period of the traffic\n"
      << text.log();

  // A reload without "gone": it stops, and no family names it any more.
  scene.writeConfig(/*withGone=*/false);
  kill(agent.pid(), SIGHUP);
  ASSERT_TRUE(waitFor([&] { return scene.serving(1); }, 30s)) << agent.log();
  std::string after = scrape(port);
  EXPECT_EQ(after.find("program=\"gone\""), std::string::npos) << after;
  EXPECT_NE(after.find("morpheus_cycles_total{program=\"fwd\""), std::string::npos) << after;
  EXPECT_TRUE(agent.stop()) << agent.log();
}

} // namespace
} // namespace morpheus::testing
