// The agent's configuration file (`morpheus daemon --config FILE`), YAML:
//
//   socket: /run/morpheus/agent.sock     # the control socket (this default)
//   metrics_address: 127.0.0.1:9464      # Prometheus /metrics; none if absent
//   cpu_budget: 0.5                      # share of one core for all cycles
//   programs:                            # may be empty: an idle agent
//     - name: edge_fw                    # unique; pins in /sys/fs/bpf/morpheus/NAME
//       source: fw.bpf.c                 # relative to this file
//       ifaces: [eth0, eth1]             # attach it there, or:
//       adopt: eth0 | eth0:ingress | 42 | /sys/fs/bpf/link   # join another loader's
//       ...                              # the rest as `morpheus run`'s flags
//
// Each program's keys mean what the flags of `morpheus run` of the same
// name mean (cli/RunOptions): entry (--prog), netns, xdp_mode, tc_attach,
// accept_one_tail_call_fewer, other_writers (poll | keep-generic),
// keep_generic (a list of maps), period, pin_dir, pin_root, inline_limit,
// passes (the table passes to run; [] runs none: the program is only
// watched), cost_model, shadow_packets, profile, no_profile,
// reproducer_dir, quiet, explore (true: run --explore), explore_trials,
// explore_rounds, explore_slice, explore_min_runs, explore_budget,
// explore_margin, explore_shortfall, explore_every, and the compiler's includes, defines, cflags,
// compile_db, prog_type.
//
// Read with LLVM's YAML I/O: an unknown key, a value of the wrong kind or
// an unknown choice is an error naming the file, line and column; the
// checks YAML cannot express (names, one of ifaces/adopt, durations) name
// the program. Nothing of a file that does not read is applied.
#pragma once

#include "cli/RunOptions.h"
#include "runtime/Agent.h"
#include "support/Error.h"

#include <string>
#include <vector>

namespace morpheus::cli {

struct ConfiguredProgram {
  std::string name;
  RunOptions options; // paths made absolute
  // The entry written back in one canonical form: an entry that reads the
  // same after a reload is the same program, left running.
  std::string fingerprint;
};

struct AgentConfig {
  std::string socketPath = "/run/morpheus/agent.sock";
  std::string metricsAddress; // "" = no metrics endpoint
  double cpuBudget = 0;       // 0 = no limit
  std::vector<ConfiguredProgram> programs;
};

Expected<AgentConfig> readAgentConfig(const std::string &path);
// The same from text (`path` names it in messages and anchors relative
// paths). Reading touches nothing.
Expected<AgentConfig> parseAgentConfig(llvm::StringRef text, const std::string &path);

// The agent's programs: each entry's daemon options (cost model read, pin
// directory defaulted to /sys/fs/bpf/morpheus/NAME and made ready).
Expected<std::vector<runtime::AgentProgram>> agentPrograms(const AgentConfig &config);

} // namespace morpheus::cli
