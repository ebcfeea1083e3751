// The metrics server (runtime/MetricsServer) scraped over real TCP
// connections on the loopback: status, content type and body; the page
// read by Prometheus's own Python parser (prometheus_client, from
// requirements.txt); addresses refused naming them; clients that are idle,
// oversized or hang up mid-answer.
#include "runtime/MetricsServer.h"
#include "runtime/Metrics.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FileUtilities.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/raw_ostream.h>
#include <llvm/Testing/Support/Error.h>

#include <arpa/inet.h>
#include <csignal>
#include <netinet/in.h>
#include <pthread.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <limits>

namespace morpheus::runtime::metrics {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr const char *ExpositionType = "text/plain; version=0.0.4; charset=utf-8";

// A TCP connection to host:port (a numeric IPv4 or IPv6 address), which
// gives up reading or writing after 5 s; -1 when it cannot connect.
int connectTo(const std::string &host, uint16_t port) {
  sockaddr_storage address{};
  socklen_t length;
  int family = host.find(':') == std::string::npos ? AF_INET : AF_INET6;
  if (family == AF_INET) {
    auto *v4 = reinterpret_cast<sockaddr_in *>(&address);
    v4->sin_family = AF_INET;
    v4->sin_port = htons(port);
    inet_pton(AF_INET, host.c_str(), &v4->sin_addr);
    length = sizeof *v4;
  } else {
    auto *v6 = reinterpret_cast<sockaddr_in6 *>(&address);
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(port);
    inet_pton(AF_INET6, host.c_str(), &v6->sin6_addr);
    length = sizeof *v6;
  }
  int fd = socket(family, SOCK_STREAM | SOCK_CLOEXEC, 0);
  timeval limit{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &limit, sizeof limit);
  if (connect(fd, reinterpret_cast<sockaddr *>(&address), length) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

struct Reply {
  int status = 0;
  std::string contentType;
  std::string body;
};

// Sends `request` on a connection of its own and reads the answer to its
// end (the request says Connection: close).
Reply exchange(const std::string &host, uint16_t port, const std::string &request) {
  Reply reply;
  int fd = connectTo(host, port);
  if (fd < 0) {
    ADD_FAILURE() << "cannot connect to " << host << " port " << port << ": "
                  << std::strerror(errno);
    return reply;
  }
  EXPECT_EQ(send(fd, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
  std::string raw;
  char buffer[65536];
  for (ssize_t got; (got = recv(fd, buffer, sizeof buffer, 0)) > 0;)
    raw.append(buffer, got);
  close(fd);
  size_t headersEnd = raw.find("\r\n\r\n");
  if (!raw.starts_with("HTTP/1.1 ") || headersEnd == std::string::npos) {
    ADD_FAILURE() << "not an HTTP answer: " << raw.substr(0, 200);
    return reply;
  }
  reply.status = std::stoi(raw.substr(9, 3));
  reply.body = raw.substr(headersEnd + 4);
  std::string headers = raw.substr(0, headersEnd + 2);
  size_t contentLength = std::string::npos;
  for (size_t at = headers.find("\r\n") + 2, end;
       (end = headers.find("\r\n", at)) != std::string::npos; at = end + 2) {
    std::string line = headers.substr(at, end - at);
    std::string name = line.substr(0, line.find(':'));
    std::string value = line.substr(std::min(line.size(), name.size() + 2));
    if (strcasecmp(name.c_str(), "Content-Type") == 0)
      reply.contentType = value;
    if (strcasecmp(name.c_str(), "Content-Length") == 0)
      contentLength = std::stoul(value);
  }
  EXPECT_EQ(contentLength, reply.body.size()) << "Content-Length is the body's";
  return reply;
}

Reply get(const std::string &host, uint16_t port, const std::string &path) {
  return exchange(host, port,
                  "GET " + path + " HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n");
}

// A registry with every kind of family, escaping and unusual values.
void fill(Registry &registry) {
  auto cycles =
      registry.counter("morpheus_cycles_total", "Cycles run, by outcome", {"program", "outcome"});
  auto entries = registry.gauge("morpheus_map_entries", "Entries of a table\nwith \\ and \"",
                                {"program", "map"});
  auto seconds =
      registry.histogram("morpheus_cycle_seconds", "Duration of a cycle", {"program"}, {0.25, 1});
  auto ratio = registry.gauge("morpheus_ratio", "Odd values");
  ASSERT_THAT_EXPECTED(cycles, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(entries, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(seconds, llvm::Succeeded());
  ASSERT_THAT_EXPECTED(ratio, llvm::Succeeded());
  cycles->with({"fw", "installed"}).inc(3);
  cycles->with({"a\\b\"c\nd", "refused"}).inc();
  entries->with({"fw", "policy"}).set(1000000);
  entries->with({"fw", "routes"}).set(std::numeric_limits<double>::quiet_NaN());
  seconds->with({"fw"}).observe(0.125);
  seconds->with({"fw"}).observe(0.5);
  seconds->with({"fw"}).observe(3);
  ratio->with({}).set(std::numeric_limits<double>::infinity());
}

TEST(MetricsServer, ScrapeOverTcpAnswersTheExposition) {
  Registry registry;
  fill(registry);
  auto scrapes = registry.gauge("morpheus_scrapes", "Pages rendered");
  ASSERT_THAT_EXPECTED(scrapes, llvm::Succeeded());
  // The callback refreshes a figure before rendering, as the agent will.
  int rendered = 0;
  auto server = Server::start("127.0.0.1:0", [&] {
    scrapes->with({}).set(++rendered);
    return registry.exposition();
  });
  ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
  uint16_t port = (*server)->port();
  ASSERT_NE(port, 0) << "port 0 bound a free port";
  EXPECT_EQ((*server)->address(), "127.0.0.1:" + std::to_string(port));

  Reply first = get("127.0.0.1", port, "/metrics");
  EXPECT_EQ(first.status, 200);
  EXPECT_EQ(first.contentType, ExpositionType);
  EXPECT_EQ(first.body, registry.exposition()) << "the page is the registry's text";
  EXPECT_THAT(first.body, HasSubstr("\nmorpheus_scrapes 1\n"));
  Reply second = get("127.0.0.1", port, "/metrics");
  EXPECT_THAT(second.body, HasSubstr("\nmorpheus_scrapes 2\n")) << "rendered anew per scrape";
}

TEST(MetricsServer, IndexPageLinksToMetricsAndOtherPathsAreNotFound) {
  auto server = Server::start("127.0.0.1:0", [] { return std::string(); });
  ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
  Reply index = get("127.0.0.1", (*server)->port(), "/");
  EXPECT_EQ(index.status, 200);
  EXPECT_EQ(index.contentType, "text/html; charset=utf-8");
  EXPECT_THAT(index.body, HasSubstr("<a href=\"/metrics\">"));
  EXPECT_EQ(get("127.0.0.1", (*server)->port(), "/metric").status, 404);
}

TEST(MetricsServer, ServesOnIPv6) {
  auto server = Server::start("[::1]:0", [] { return std::string("up 1\n"); });
  ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
  EXPECT_EQ((*server)->address(), "[::1]:" + std::to_string((*server)->port()));
  Reply reply = get("::1", (*server)->port(), "/metrics");
  EXPECT_EQ(reply.status, 200);
  EXPECT_EQ(reply.body, "up 1\n");
}

TEST(MetricsServer, APortInUseIsRefusedNamingTheAddress) {
  auto first = Server::start("127.0.0.1:0", [] { return std::string(); });
  ASSERT_THAT_EXPECTED(first, llvm::Succeeded());
  std::string taken = "127.0.0.1:" + std::to_string((*first)->port());
  EXPECT_THAT_EXPECTED(Server::start(taken, [] { return std::string(); }),
                       llvm::FailedWithMessage("metrics address '" + taken +
                                               "': cannot listen: Address already in use"));
  EXPECT_EQ(get("127.0.0.1", (*first)->port(), "/").status, 200) << "the first serves on";
}

TEST(MetricsServer, AddressesThatCannotBeServedAreRefusedNamingThem) {
  struct Case {
    const char *address;
    const char *why;
  };
  for (const Case &bad : std::initializer_list<Case>{
           {"127.0.0.1", "expected HOST:PORT or [IPv6]:PORT"},
           {"localhost:9100", "'localhost' is not an IPv4 address (names are not resolved"},
           {":9100", "'' is not an IPv4 address"},
           {"::1:9100", "'::1' is not an IPv4 address"},
           {"[::1]", "expected [IPv6]:PORT"},
           {"[::1]9100", "expected [IPv6]:PORT"},
           {"[10.0.0.1]:80", "'10.0.0.1' is not an IPv6 address"},
           {"127.0.0.1:", "'' is not a port"},
           {"127.0.0.1:65536", "'65536' is not a port"},
           {"127.0.0.1:-1", "'-1' is not a port"},
           {"127.0.0.1:80x", "'80x' is not a port"},
           // TEST-NET-1 is no address of this host: bind() refuses it.
           {"192.0.2.1:0", "cannot listen: Cannot assign requested address"},
       }) {
    EXPECT_THAT_EXPECTED(Server::start(bad.address, [] { return std::string(); }),
                         llvm::FailedWithMessage(AllOf(
                             StartsWith("metrics address '" + std::string(bad.address) + "': "),
                             HasSubstr(bad.why))))
        << bad.address;
  }
}

TEST(MetricsServer, ClientsNeitherCrashNorBlockIt) {
  // A page large enough that answering a client that hung up fails midway.
  std::string page(8 << 20, '#');
  page.back() = '\n';
  ServerOptions options;
  options.timeout = std::chrono::seconds(1);
  auto server = Server::start("127.0.0.1:0", [&] { return page; }, options);
  ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
  uint16_t port = (*server)->port();

  // Idle: connects and says nothing, holding a worker.
  int idle = connectTo("127.0.0.1", port);
  ASSERT_GE(idle, 0);
  // Oversized: announces a body far over maxRequestBody (a GET's body is
  // never read, a POST's is, up to the limit).
  Reply oversized = exchange("127.0.0.1", port,
                             "POST /metrics HTTP/1.1\r\nHost: test\r\nContent-Length: 1000000\r\n"
                             "Connection: close\r\n\r\n");
  EXPECT_EQ(oversized.status, 413);
  // Hangs up at once, with a FIN or a reset: the answer meets a closed
  // socket and costs that connection alone (SIGPIPE: the next test).
  for (bool reset : {false, true, false, true}) {
    int rude = connectTo("127.0.0.1", port);
    ASSERT_GE(rude, 0);
    std::string request = "GET /metrics HTTP/1.1\r\nHost: test\r\n\r\n";
    ASSERT_EQ(send(rude, request.data(), request.size(), MSG_NOSIGNAL), ssize_t(request.size()));
    linger lingering{reset, 0};
    setsockopt(rude, SOL_SOCKET, SO_LINGER, &lingering, sizeof lingering);
    close(rude);
  }

  auto began = std::chrono::steady_clock::now();
  Reply scrape = get("127.0.0.1", port, "/metrics");
  EXPECT_EQ(scrape.status, 200);
  EXPECT_EQ(scrape.body.size(), page.size());
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(3))
      << "a scrape beside an idle client is answered at once";

  // The idle client is dropped after the timeout.
  char byte;
  began = std::chrono::steady_clock::now();
  EXPECT_EQ(recv(idle, &byte, 1, 0), 0) << "closed by the server, not by our 5 s limit";
  EXPECT_LT(std::chrono::steady_clock::now() - began, std::chrono::seconds(4));
  close(idle);
}

// A write to a client that hung up raises SIGPIPE in the writing thread,
// and its default action ends the process. cpp-httplib checks that the
// peer is there before each write, which leaves a window, and its
// constructor ignores SIGPIPE for the whole process, which is not its to
// decide: the process keeps its disposition, the server's threads block it.
TEST(MetricsServer, SigpipeIsBlockedInItsThreadsAndTheProcessKeepsItsAction) {
  struct sigaction defaultAction = {};
  defaultAction.sa_handler = SIG_DFL;
  ASSERT_EQ(sigaction(SIGPIPE, &defaultAction, nullptr), 0);
  std::atomic<int> blockedWhereAnswered = -1;
  auto server = Server::start("127.0.0.1:0", [&] {
    sigset_t mask;
    pthread_sigmask(SIG_BLOCK, nullptr, &mask);
    blockedWhereAnswered = sigismember(&mask, SIGPIPE);
    return std::string();
  });
  ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
  struct sigaction action;
  ASSERT_EQ(sigaction(SIGPIPE, nullptr, &action), 0);
  EXPECT_EQ(action.sa_handler, SIG_DFL) << "the process's action on SIGPIPE is left alone";
  EXPECT_EQ(get("127.0.0.1", (*server)->port(), "/metrics").status, 200);
  EXPECT_EQ(blockedWhereAnswered, 1) << "the answering thread blocks SIGPIPE";
  sigset_t callers;
  pthread_sigmask(SIG_BLOCK, nullptr, &callers);
  EXPECT_EQ(sigismember(&callers, SIGPIPE), 0) << "the caller's thread is left alone";
}

// Prometheus's own parser, in Python: families with their type and help,
// samples with their labels (sorted) and values (as floats: whether an
// integer comes back as int depends on the client's version).
constexpr const char *ParseWithPrometheusClient = R"(
import sys
from prometheus_client.parser import text_string_to_metric_families
for family in text_string_to_metric_families(open(sys.argv[1]).read()):
    print(family.name, family.type, repr(family.documentation))
    for sample in family.samples:
        print(' ', sample.name, sorted(sample.labels.items()), float(sample.value))
)";

TEST(MetricsServer, PrometheusClientParsesTheScrapedPage) {
  Registry registry;
  fill(registry);
  auto server = Server::start("127.0.0.1:0", [&] { return registry.exposition(); });
  ASSERT_THAT_EXPECTED(server, llvm::Succeeded());
  Reply scrape = get("127.0.0.1", (*server)->port(), "/metrics");
  ASSERT_EQ(scrape.status, 200);

  llvm::SmallString<128> pagePath, parsedPath;
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("metrics-page", "txt", pagePath));
  ASSERT_FALSE(llvm::sys::fs::createTemporaryFile("metrics-parsed", "txt", parsedPath));
  llvm::FileRemover removePage(pagePath), removeParsed(parsedPath);
  {
    std::error_code error;
    llvm::raw_fd_ostream out(pagePath, error);
    ASSERT_FALSE(error);
    out << scrape.body;
  }
  auto python = llvm::sys::findProgramByName("python3");
  ASSERT_TRUE(bool(python)) << "python3 on PATH";
  std::string message;
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(parsedPath),
                                                std::nullopt};
  int status = llvm::sys::ExecuteAndWait(
      *python, {*python, "-c", ParseWithPrometheusClient, pagePath}, std::nullopt, redirects,
      /*SecondsToWait=*/60, 0, &message);
  ASSERT_EQ(status, 0) << "prometheus_client refused the page (or is not installed: "
                          "requirements.txt): "
                       << message;
  auto parsed = llvm::MemoryBuffer::getFile(parsedPath);
  ASSERT_TRUE(bool(parsed));
  // The counter's family is named without _total, as the parser does;
  // escaped label values and help come back as they were recorded.
  EXPECT_EQ((*parsed)->getBuffer().str(), R"(morpheus_cycle_seconds histogram 'Duration of a cycle'
  morpheus_cycle_seconds_bucket [('le', '0.25'), ('program', 'fw')] 1.0
  morpheus_cycle_seconds_bucket [('le', '1'), ('program', 'fw')] 2.0
  morpheus_cycle_seconds_bucket [('le', '+Inf'), ('program', 'fw')] 3.0
  morpheus_cycle_seconds_sum [('program', 'fw')] 3.625
  morpheus_cycle_seconds_count [('program', 'fw')] 3.0
morpheus_cycles counter 'Cycles run, by outcome'
  morpheus_cycles_total [('outcome', 'refused'), ('program', 'a\\b"c\nd')] 1.0
  morpheus_cycles_total [('outcome', 'installed'), ('program', 'fw')] 3.0
morpheus_map_entries gauge 'Entries of a table\nwith \\ and "'
  morpheus_map_entries [('map', 'policy'), ('program', 'fw')] 1000000.0
  morpheus_map_entries [('map', 'routes'), ('program', 'fw')] nan
morpheus_ratio gauge 'Odd values'
  morpheus_ratio [] inf
)");
}

} // namespace
} // namespace morpheus::runtime::metrics
