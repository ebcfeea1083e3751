// Commands a test runs as child processes (`morpheus run`, `morpheus
// fuzz`), with their output in a log file, killed if still running when the
// test ends; optionally in a mount namespace with a bpffs of their own, so
// maps pinned by name (/sys/fs/bpf/<name>) are private to the test.
#pragma once

#include <nlohmann/json.hpp>
#include <sys/types.h>

#include <chrono>
#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::testing {

// Where a child's mounts come from.
struct ChildMounts {
  enum Kind {
    Inherited,    // the test's own
    PrivateBpffs, // a new mount namespace with a fresh bpffs at /sys/fs/bpf
    SameAs,       // the mount namespace of process `of`
  } kind = Inherited;
  pid_t of = 0;
};

class ChildProcess {
public:
  // Runs `argv` (argv[0] is the binary's path); `tag` names the log file.
  ChildProcess(const std::string &tag, std::vector<std::string> argv, ChildMounts mounts = {});
  ~ChildProcess();
  ChildProcess(const ChildProcess &) = delete;
  ChildProcess &operator=(const ChildProcess &) = delete;

  pid_t pid() const { return child; }
  bool alive() const;
  // Waits up to `limit` for the child to exit: its exit status, or none if
  // it is still running (or was killed by a signal).
  std::optional<int> wait(std::chrono::seconds limit);
  // SIGTERM, then waits; true when it exits with status 0.
  bool stop();
  std::string log() const;
  // `path` as the child sees it in its mount namespace, from the test.
  std::string seenByChild(const std::string &path) const;

private:
  pid_t child = -1;
  std::string logPath;
};

bool waitFor(const std::function<bool()> &condition, std::chrono::milliseconds limit);

// One request to a Morpheus control socket (/run/morpheus/<program>.sock),
// one reply line parsed; {"connect_error": ...} when nobody listens,
// {"no_reply": TEXT} when what came back is not JSON.
std::string askControlSocketRaw(const std::string &socketPath, const std::string &line);
nlohmann::json askControlSocket(const std::string &socketPath, const nlohmann::json &request);

} // namespace morpheus::testing
