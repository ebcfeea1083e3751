// libbpf objects: opening an ELF to learn its maps (no kernel needed), and
// loading one into the kernel with chosen maps shared from elsewhere.
#pragma once

#include "core/Tables.h"
#include "support/Error.h"

#include <llvm/ADT/ArrayRef.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

struct bpf_object;

namespace morpheus::bpf {

// The BTF-defined maps of a BPF ELF object, in core terms.
Expected<core::TableCatalog> readCatalog(llvm::ArrayRef<char> elf,
                                         const std::string &objectName);

// The instruction count of every program of a BPF ELF object, by name.
Expected<std::map<std::string, size_t>> readProgramSizes(llvm::ArrayRef<char> elf,
                                                         const std::string &objectName);

// What verifying a loaded program cost the kernel (bpf_prog_info's
// verified_insns), or nullopt if the kernel does not say.
std::optional<uint64_t> verifiedInstructions(int programFd);

// The core's view of a kernel map type.
core::TableInfo tableInfoFor(const std::string &name, unsigned type,
                             uint32_t keySize, uint32_t valueSize,
                             uint32_t maxEntries);

class LoadedObject {
public:
  // Loads `elf` as `objectName` (which also names its internal maps, so two
  // loads of versions of the same program agree on them). Maps named in
  // `sharedMaps` reuse that fd instead of creating a map; a verifier
  // rejection comes back with the verifier's log.
  static Expected<LoadedObject> load(llvm::ArrayRef<char> elf,
                                     const std::string &objectName,
                                     const std::map<std::string, int> &sharedMaps);

  LoadedObject(LoadedObject &&other) noexcept;
  LoadedObject &operator=(LoadedObject &&other) noexcept;
  ~LoadedObject();

  bpf_object *object() const { return obj; }
  int programFd(const std::string &name) const; // -1 if absent
  int mapFd(const std::string &name) const;     // -1 if absent
  std::vector<std::string> programNames() const;
  // Every map of the object: name -> fd.
  std::map<std::string, int> maps() const;

private:
  explicit LoadedObject(bpf_object *obj) : obj(obj) {}
  bpf_object *obj = nullptr;
};

// A program's totals from the kernel's bpf_stats (zero unless stats are
// enabled, e.g. with bpf_enable_stats): nanoseconds spent and runs counted.
// Totals of different programs (`programId`) cannot be subtracted.
struct ProgramRunStats {
  uint32_t programId = 0;
  uint64_t runTimeNs = 0, runCount = 0;
};
ProgramRunStats programRunStats(int programFd);

// Mounts bpffs at /sys/fs/bpf unless one is there; `user` (a pin directory,
// a command) names what needs it in the error.
Error ensureBpffs(const std::string &user);

// Routes libbpf's messages into Morpheus's log (warnings only unless
// verbose), so they carry context and do not interleave with status output.
void setLibbpfVerbose(bool verbose);

} // namespace morpheus::bpf
