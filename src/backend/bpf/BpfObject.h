// libbpf objects: opening an ELF to learn its maps (no kernel needed), and
// loading one into the kernel with chosen maps given by fd.
//
// Which maps a load may create, reuse or re-open decides whether it can
// touch the running data plane: only the live original's load honours
// pins by name (`pinning = LIBBPF_PIN_BY_NAME`); every other load has them
// cleared, so libbpf neither re-opens a pinned live map nor pins a copy.
#pragma once

#include "backend/bpf/MapTypes.h"
#include "backend/bpf/Snapshot.h"
#include "core/Globals.h"
#include "core/Tables.h"
#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <llvm/ADT/ArrayRef.h>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

struct bpf_object;

namespace morpheus::bpf {

// The BTF-defined maps of a BPF ELF object, in core terms.
Expected<core::TableCatalog> readCatalog(llvm::ArrayRef<char> elf,
                                         const std::string &objectName);

// Where each writable global (.data, .bss, .data.NAME) lives in its
// section's map, from the object's BTF; empty without BTF. `frozen`: the
// read-only ones (.rodata*) instead.
Expected<std::vector<core::GlobalSlice>> readGlobalSlices(llvm::ArrayRef<char> elf,
                                                          const std::string &objectName,
                                                          bool frozen = false);

// What the kernel compares of every program that uses one program array
// (it records them of the first one checked against it, the array's owner,
// and refuses a program that differs): the program type, the expected
// attach type, and the flags that must agree (fragments, sleepable).
struct ProgramArrayKind {
  uint32_t type = 0;               // BPF_PROG_TYPE_*
  uint32_t expectedAttachType = 0; // BPF_*
  uint32_t flags = 0;              // BPF_F_XDP_HAS_FRAGS, BPF_F_SLEEPABLE
  bool operator==(const ProgramArrayKind &) const = default;
};

// What libbpf reads of one program of a BPF ELF object before loading it.
struct OpenedProgram {
  size_t instructions = 0;
  ProgramArrayKind arrayKind; // as libbpf would load it
};

// Every program of a BPF ELF object, by name.
Expected<std::map<std::string, OpenedProgram>> readPrograms(llvm::ArrayRef<char> elf,
                                                            const std::string &objectName);

// What verifying a loaded program cost the kernel (bpf_prog_info's
// verified_insns), or nullopt if the kernel does not say.
std::optional<uint64_t> verifiedInstructions(int programFd);

// How many instructions the kernel runs of a loaded program, after its
// rewrites (bpf_prog_info's xlated_prog_len / 8); 0 if it does not say.
size_t translatedInstructions(int programFd);

// What the kernel says of a loaded program: its name (cut to 15
// characters), id, tag (a hash of its instructions as loaded, map
// references masked) and the maps it uses.
struct LiveProgram {
  std::string name;
  uint32_t id = 0;
  std::array<uint8_t, 8> tag = {};
  std::vector<uint32_t> mapIds;
};
Expected<LiveProgram> liveProgram(int programFd);
// The same of the program with kernel id `programId`.
Expected<LiveProgram> liveProgramById(uint32_t programId);
// The kernel's type of map `mapId` (BPF_MAP_TYPE_*); 0 when it is gone.
uint32_t mapTypeById(uint32_t mapId);
// Whether program arrays `a` and `b` hold, slot by slot, programs of the
// same code (kernel tags: instructions as loaded, map references masked),
// or nothing in the same slots.
bool sameProgramsInSlots(int a, int b);

// A map's properties, as an ELF declares them or as the kernel reports them.
struct MapLayout {
  std::string name;
  uint32_t type = 0, keySize = 0, valueSize = 0, maxEntries = 0, flags = 0;
  uint64_t extra = 0; // map_extra (a bloom filter's hash count)
  // Kernel maps only: the map's id and BTF (0 when it has none).
  uint32_t id = 0, btfId = 0, btfKeyTypeId = 0, btfValueTypeId = 0;
  std::string kernelName; // as the kernel holds it (at most 15 characters)
  // Maps of maps, as declared: the layout every inner map must have.
  std::shared_ptr<const MapLayout> inner;
};

// The kernel's view of the map behind `fd`; `name` names it in errors.
Expected<MapLayout> layoutOf(int fd, const std::string &name);

// Every map `elf` declares (internal .data/.bss/.rodata/.kconfig included).
Expected<std::map<std::string, MapLayout>> readMapLayouts(llvm::ArrayRef<char> elf,
                                                          const std::string &objectName);

// The bytes libbpf writes into each internal map (.rodata, .data, .bss) it
// creates for `elf`, by map name.
Expected<std::map<std::string, std::vector<char>>> readInitialValues(llvm::ArrayRef<char> elf,
                                                                     const std::string &objectName);

// One property in which a map differs from the declaration it stands in
// for (values as numbers: the type a BPF_MAP_TYPE_*, the flags a mask).
enum class MapField { Type, KeySize, ValueSize, MaxEntries, Flags, MapExtra };
struct MapFieldDifference {
  MapField field = MapField::Type;
  bool innerMap = false; // of the inner maps a map of maps holds
  uint64_t declared = 0, existing = 0;
  bool operator==(const MapFieldDifference &) const = default;
};

// Why a map with layout `existing` cannot stand in for one declared as
// `declared`, field by field; empty when it can. `compareMaxEntries` false
// accepts any size (a scratch copy holding a window of a large map).
std::vector<MapFieldDifference> layoutDifferences(const MapLayout &declared,
                                                  const MapLayout &existing,
                                                  bool compareMaxEntries = true);

// The differences for people: "key size: declared 8, the map has 4; ...;
// inner map: value size: ...".
std::string describeDifferences(const std::vector<MapFieldDifference> &differences);

// A load was handed, or found pinned, a map whose layout differs from what
// the object declares: using it would corrupt the state of the programs
// that use it with the layout they were compiled for. Not the verifier's
// doing: a specialization built with less meets it just the same.
class IncompatibleMap : public llvm::ErrorInfo<IncompatibleMap, TypedError> {
public:
  inline static char ID = 0;

  // `standIn` says which map, for people ("the existing map", "the map
  // pinned at PATH").
  IncompatibleMap(std::string object, std::string map, std::string standIn,
                  std::vector<MapFieldDifference> differences)
      : objectName(std::move(object)), mapName(std::move(map)), standIn(std::move(standIn)),
        fields(std::move(differences)) {}

  const std::string &object() const { return objectName; }
  const std::string &map() const { return mapName; }
  const std::vector<MapFieldDifference> &differences() const { return fields; }

  // The C client's convention for bad input, as every makeError.
  std::error_code convertToErrorCode() const override {
    return std::make_error_code(std::errc::invalid_argument);
  }

protected:
  std::string describe() const override {
    return "object '" + objectName + "': map '" + mapName + "': cannot use " + standIn + ": " +
           describeDifferences(fields);
  }

private:
  std::string objectName, mapName, standIn;
  std::vector<MapFieldDifference> fields;
};

// Maps that only ever hold what libbpf wrote at creation and programs cannot
// write (.rodata*, .kconfig: frozen): every load gets its own.
bool isFrozenSection(const std::string &mapName);

// Where bpffs is mounted, and libbpf pins maps by name unless told otherwise.
inline constexpr const char *DefaultPinRoot = "/sys/fs/bpf";

// How a load treats maps declared with `pinning = LIBBPF_PIN_BY_NAME`.
enum class PinByName {
  // The live original's load only: a map pinned at <root>/<name> is re-used
  // (its max_entries adopted, every other property checked), otherwise the
  // new map is pinned there, as libbpf does for any loader.
  Honour,
  // Every other load: pin paths are cleared before loading.
  Ignore,
};

struct LoadOptions {
  // Maps given by fd instead of created, by name. Every property must agree
  // with the ELF's declaration (type, key and value size, max_entries, flags,
  // the inner map's layout); an error names each field that differs.
  std::map<std::string, int> maps;
  // The given maps are scratch copies sized to a window of the live ones
  // (validation, fuzzing): their max_entries may be smaller, and hash maps
  // may have a fixed seed (BPF_F_ZERO_SEED).
  bool windowedCopies = false;
  PinByName pinning = PinByName::Ignore;
  std::string pinRoot; // where pins by name live; "" = libbpf's default, /sys/fs/bpf
  // Every program of type `attachTypeOf` loaded with this expected attach
  // type instead of its section's: an adopted program's, since a program
  // array takes only programs of one kind, expected attach type included
  // (a raw loader loads XDP with none, libbpf with BPF_XDP).
  std::optional<uint32_t> expectedAttachType;
  uint32_t attachTypeOf = 0; // a BPF_PROG_TYPE_*
  // The programs loaded, by name; the others are not loaded (libbpf's
  // autoload off: no verification, no fd, their program-array slots stay
  // empty). Unset loads every program.
  std::optional<std::set<std::string>> programs;
};

// PROG_ARRAY contents by program name: map name -> slot -> program name.
using ProgramSlots = std::map<std::string, std::map<uint32_t, std::string>>;

class LoadedObject {
public:
  // Loads `elf` as `objectName` (which also names its internal maps, so two
  // loads of versions of the same program agree on them). A program the
  // kernel refused with its log comes back as a VerifierRejection, a map
  // given or pinned with another layout as an IncompatibleMap.
  static Expected<LoadedObject> load(llvm::ArrayRef<char> elf,
                                     const std::string &objectName,
                                     const LoadOptions &options);

  LoadedObject(LoadedObject &&other) noexcept;
  LoadedObject &operator=(LoadedObject &&other) noexcept;
  ~LoadedObject();

  bpf_object *object() const { return obj; }
  // The pins by name this load made (PinByName::Honour, where no map was
  // pinned yet); re-used pins are not listed.
  const std::vector<std::string> &pinsMade() const { return madePins; }
  const std::string &name() const { return objectName; }
  int programFd(const std::string &name) const; // -1 if absent
  int mapFd(const std::string &name) const;     // -1 if absent
  std::vector<std::string> programNames() const;
  // Every map of the object: name -> fd.
  std::map<std::string, int> maps() const;
  // What the object's program arrays hold now, by name of this object's
  // programs; a slot holding a program of another object is left out. A
  // program another loader loaded counts as this object's of its name when
  // it runs the same code on the same maps: the same name, tag and map ids
  // (an adopted program's stages, loaded by their owner from the object
  // Morpheus builds from the same source, on the maps both loads share).
  Expected<ProgramSlots> programSlots() const;
  // The same for the arrays every occupied slot of which holds one of this
  // object's programs (at least one): an array with a slot holding another
  // object's program is left out whole, as is an empty one.
  Expected<ProgramSlots> ownProgramSlots() const;
  // Points slot i of every array in `slots` at this object's program of the
  // name given, or at `others`' (name -> program fd) for a program this
  // object does not have; slots not listed are emptied. `arrays` (name ->
  // fd) are the program arrays to write, which need not be this object's
  // own.
  Error fillProgramSlots(const ProgramSlots &slots, const std::map<std::string, int> &arrays,
                         const std::map<std::string, int> &others = {}) const;

  // Program `name`'s instructions as this load handed them to the kernel
  // (CO-RE resolved, subprograms appended), each map reference by the
  // map's name instead of its fd; the maps it names, and the bytes the
  // global sections among them (.rodata*, .data*, .bss, .kconfig: each
  // load may have its own) hold now. Two loads whose code agrees run the
  // same instructions on maps of the same names, with the same constants.
  // `guardVersion`: the version the load was built for, which each guard
  // check compares with the guard's (an equality jump against that
  // immediate): those immediates are masked, so versions built from the
  // same inputs for different guard versions agree. Error if the program
  // was not loaded.
  struct Code {
    std::string instructions; // opaque: compare only
    std::set<std::string> maps;
    std::map<std::string, std::vector<char>> sections;
    // How many tail calls one run of the program attempts at most (the
    // kernel counts an attempt whether or not its slot holds a program):
    // its tail-call instructions, when none lies on a cycle of its control
    // flow (a loop) and the program calls no subprogram and passes no
    // callback (either may run a tail call more than once); unset otherwise.
    std::optional<unsigned> mostTailCalls = 0;
    bool tailCalls() const { return mostTailCalls != 0u; } // calls bpf_tail_call
    bool operator==(const Code &) const = default;
  };
  Expected<Code> programCode(const std::string &name,
                             std::optional<uint64_t> guardVersion = std::nullopt) const;

private:
  LoadedObject(bpf_object *obj, std::string name) : obj(obj), objectName(std::move(name)) {}
  Expected<ProgramSlots> readProgramSlots(bool ownArraysOnly) const;
  bpf_object *obj = nullptr;
  std::string objectName;
  std::vector<std::string> madePins;
};

// Stamps a program that reads the guard version it expects from slot
// `slot` of a version array (VersionArraySection's map, `arrayFd`) valid
// for guard version `version`: the caller found every table it reads the
// same, where it only reads, in that version's snapshot.
Error stampExpectedVersion(int arrayFd, unsigned slot, uint64_t version);

// Tail calls the kernel allows in a row, per packet (MAX_TAIL_CALL_CNT).
inline constexpr unsigned KernelTailCallLimit = 33;

// At most how many tail calls the kernel has counted when each program of a
// version starts, for the programs that make none of their own
// (ProgramFacts::tailCallsBefore). The entry starts after `beforeEntry` (an
// adoption trampoline's tail call, or none on a hook of its own); a program
// held by a slot of a program array of `stages` starts after the most that
// any program naming that array (as `code`, the original's, has it) starts
// after, plus the most tail calls that program attempts (a version makes
// the same tail calls as its original: no pass adds or repeats one). Only
// a version's own programs can reach its programs: the arrays of `stages`
// are the version's own. Left out: a program not reached from the entry,
// or reached through a cycle of tail calls or from a program that may
// attempt any number of them.
std::map<std::string, uint32_t>
tailCallsBefore(const std::string &entry, uint32_t beforeEntry,
                const std::map<std::string, LoadedObject::Code> &code, const ProgramSlots &stages);

// The guard's fallback array for `object`: slot i holds program i of
// `programs` (the spec's order), the entry registered first because it
// fixes the program type the array accepts. Programs of another type (an
// xdp/devmap program beside an xdp entry) cannot join; they get no slot
// and can only fall back inside the program (ProgramSpec::fallbackFor).
struct FallbackArray {
  int fd = -1; // owned by the caller
  std::map<std::string, ProgramFacts> programs; // what the kernel told of each
};
Expected<FallbackArray> createFallbackArray(const LoadedObject &object,
                                            const std::vector<std::string> &programs,
                                            const std::string &entry);

// What a running program's fallback array (a run's pinned
// `morpheus_fallback`) tells of the programs in its slots, by the name the
// kernel holds (at most 15 characters): their slots and what verifying
// them cost. A snapshot carries them (`morpheus map dump DIR`).
Expected<std::map<std::string, ProgramFacts>> readFallbackFacts(int fallbackFd);

// A program's totals from the kernel's bpf_stats (zero unless stats are
// enabled, e.g. with bpf_enable_stats): nanoseconds spent and runs counted.
// Totals of different programs (`programId`) cannot be subtracted.
struct ProgramRunStats {
  uint32_t programId = 0;
  uint64_t runTimeNs = 0, runCount = 0;
};
ProgramRunStats programRunStats(int programFd);

// Turns the kernel's bpf_stats on for as long as the returned descriptor is
// open (every holder's closed: off again).
Expected<FileDescriptor> enableRunTimeStats();

// Whether this kernel verifies cpu v4's 32-bit jump (`gotol`, Linux 6.6):
// asked once, by loading a three-instruction socket filter.
bool kernelTakesLongJumps();

// Mounts bpffs at /sys/fs/bpf unless one is there; `user` (a pin directory,
// a command) names what needs it in the error.
Error ensureBpffs(const std::string &user);

} // namespace morpheus::bpf
