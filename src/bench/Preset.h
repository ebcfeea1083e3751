// Benchmark presets: how a program is set up to be measured (which
// program, its interfaces, its control plane's setup commands and map
// writes, its traces), read from nf/NAME/bench*.conf or
// tests/programs/bench/NAME.conf, and the program loaded under an
// optimizer and configured as the preset says.
#pragma once

#include "nf/common/ConfigFile.h"
#include "runtime/Differential.h"
#include "runtime/Optimizer.h"
#include "support/Bytes.h"

#include <functional>
#include <memory>
#include <string>
#include <vector>

namespace morpheus::bench {

// A preset's write into the program's maps, in its control plane's place:
// `update MAP key HEX... value HEX...` (bpf::MapUpdater: every CPU of a
// per-CPU map, as `morpheus map update` writes; all of a preset's writes
// under one guard bracket, as a control plane's transaction) or `global
// NAME HEX...` (a .data/.bss variable's bytes, as a loader sets them
// through the section's map).
struct PresetWrite {
  enum class Kind { Map, Global };
  nf::ConfigLine line; // where it was written, for errors
  Kind kind = Kind::Map;
  std::string target;  // the map or the global
  Bytes key;           // maps only
  Bytes value;
};

// How to set a program up for benchmarking: nf/NAME/bench*.conf configures
// a network function through `morpheus nf`; tests/programs/bench/NAME.conf
// configures a program of the corpus by map writes (docs/benchmarks.md).
struct Preset {
  std::string function; // the network function, its folder in nf/ ("router"); "" = none
  std::string name;     // bench.conf: the function; bench-X.conf: "function-X"; else the stem
  std::string file;    // the bench.conf read
  std::string program; // its BPF C
  std::string entry;   // the program to run and attach; "" = the object's first
  // Clang flags for the program as its project builds it (-I, -D, -include:
  // relative paths are the preset file's).
  std::vector<std::string> cflags;
  std::vector<std::string> interfaces; // created in a scratch namespace
  std::string ingress; // the interface every packet arrives on; "" = none
  std::vector<nf::ConfigLine> setup;   // `morpheus nf NAME <words>`, in order
  std::vector<PresetWrite> writes;     // after the setup, in order
  // For tools/traces/gen_trace.py; a preset without a function names its
  // flow source (--nf) here.
  std::vector<std::string> traceArgs;
  std::string oracle;  // hand-specialized versions, by kind ("router"); "" = none
};

// NAME = a folder of nf/ with a bench.conf (NAME-X: its bench-X.conf), a
// tests/programs/bench/NAME.conf, or the path of a preset file.
Expected<Preset> readPreset(const std::string &nameOrFile);

// The preset's maps as its control plane configures them (up to `limit`
// non-zero entries per map, values as one CPU's row): realistic map states
// for `morpheus fuzz --preset`.
Expected<runtime::MapContents> configuredContents(const Preset &preset, uint32_t limit);

// `base` with the preset's clang flags: how its program is compiled.
bpf::FrontendOptions frontendFor(const Preset &preset, bpf::FrontendOptions base);

// The preset's function under an optimizer of `options`, on maps of its
// own (no pin root: maps declared pinned by name are not a running
// loader's), pinned in a fresh directory named after `variant` and
// configured by its own control plane. Runs in the preset's namespace
// (interface names resolve there).
Expected<std::unique_ptr<runtime::Optimizer>> loadConfigured(const Preset &preset,
                                                             runtime::OptimizerOptions options,
                                                             const std::string &variant);

// Runs `work` on a thread inside a scratch namespace holding the preset's
// interfaces (devmap entries and ingress ifindexes are only valid there),
// passing the ingress interface's veth peer.
Error inPresetNamespace(const Preset &preset,
                        const std::function<Error(const std::string &sender)> &work);

} // namespace morpheus::bench
