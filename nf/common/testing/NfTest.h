// Loading a network function the way an operator without Morpheus would
// (plain libbpf, the object clang built), with its maps pinned in a test
// directory so control-plane code can be exercised exactly as deployed; and
// what every function's tests need around it: config files, map contents,
// the command line.
#pragma once

#include "KernelSupport.h"
#include "nf/common/Subcommands.h"
#include "runtime/Optimizer.h"

#include <bpf/libbpf.h>

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::nf::testing {

using morpheus::testing::Bytes;
using morpheus::testing::RunResult;

// build/nf/<name>.bpf.o, built from nf/<name>/<name>.bpf.c by plain clang.
std::string objectPath(const std::string &name);

class NfProgram {
public:
  // Loads the object and pins every map under `pinDir`/<map name>.
  NfProgram(const std::string &objectPath, const std::string &pinDir);
  ~NfProgram();
  NfProgram(const NfProgram &) = delete;
  NfProgram &operator=(const NfProgram &) = delete;

  bool ok() const { return object != nullptr; }
  // The program named `name`, or the object's first program.
  int programFd(const std::string &name = "") const;
  int mapFd(const std::string &name) const;
  RunResult run(const Bytes &packet, uint32_t ingressIfindex = 0,
                const std::string &program = "") const;

private:
  bpf_object *object = nullptr;
  std::string pins;
};

// A fresh directory under /tmp for a test's files, removed with them when
// the object goes away.
class TempDir {
public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir &) = delete;
  TempDir &operator=(const TempDir &) = delete;
  // Writes `text` to the file `name` in the directory; returns its path.
  std::string write(const std::string &name, const std::string &text) const;

private:
  std::string dir;
};

// A file holding `text`, removed with the object. `name` is what error
// messages about the file show.
class TempFile {
public:
  explicit TempFile(const std::string &text) : TempFile("config", text) {}
  TempFile(const std::string &name, const std::string &text) : file(dir.write(name, text)) {}
  const std::string &path() const { return file; }

private:
  TempDir dir;
  std::string file;
};

// Every entry of a map as raw bytes, in key order; a per-CPU map's value is
// every CPU's, back to back. A failed walk fails the test.
std::map<Bytes, Bytes> rawEntries(int mapFd);
// The same as structs, for a map whose entries are one K and one V.
template <typename K, typename V> std::map<K, V> entriesOf(int mapFd) {
  std::map<K, V> entries;
  for (const auto &[key, value] : rawEntries(mapFd))
    entries.emplace(fromBytes<K>(key), fromBytes<V>(value));
  return entries;
}

// Whether the loaded program references the map.
bool usesMap(int programFd, int mapFd);

// The specialized code alone: the optimizer's program specialized for what
// its maps hold now, without a guard (so without the generic copy an
// in-program fallback keeps, which references every map the original
// does), loaded on the same maps. The maps it references are the ones
// specialized code can still touch.
class SpecializedAlone {
public:
  explicit SpecializedAlone(runtime::Optimizer &optimizer);
  int programFd() const { return object ? object->programFd(entry) : -1; }

private:
  void build(runtime::Optimizer &optimizer); // gtest assertions need a void function
  std::optional<bpf::LoadedObject> object;
  std::string entry;
};

// Runs a function's command line on `words` (NAME first, as after `morpheus
// nf`) in this process and returns the exit code.
int runCommand(const Function &function, std::vector<std::string> words);

} // namespace morpheus::nf::testing
