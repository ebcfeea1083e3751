// The three-way run behind both checks that compare a specialized program
// with its original: pre-swap shadow validation (runtime/ShadowValidation)
// and the differential fuzzer (runtime/Differential, `morpheus fuzz`).
//
// Three versions are loaded, each on its own scratch copies of every live
// map (runtime/ScratchMaps), so nothing they do reaches the live program:
//   Original     the original program (without static program-array slots)
//   Witness      a second original: it must do exactly what the Original
//                does (below); where it does not, the step is
//                nondeterministic and the bytes, verdicts or key sets on
//                which the two disagreed are not compared in that step
//   Specialized  the candidate, with its own guard, which holds the version
//                the candidate was built for (so a live guard that moves
//                meanwhile changes nothing here), and its own fallback array
//                holding a copy of the original beside it on the same maps
//                (loaded only when the fallback is exercised); its program
//                arrays are its own, holding its own programs where the live
//                arrays hold the original's, as a live version's stage
//                arrays do: its tail calls run the specialized stages
// All three may load only some of the object's programs (Options::programs):
// the others' slots are then empty in every version alike, so a packet sent
// to one falls through its tail call in all three.
//
// The versions are deterministic with respect to each other, so that a
// difference is the code's and not chance's:
//   - a program that draws random numbers or reads clocks is compared as
//     copies whose calls of those helpers replay a state written alike into
//     every copy before each run (backend/bpf/ComparedCopy): the step's
//     random seed, and clock readings latched by the first version to run
//     and replayed to the others;
//   - scratch hash maps are created with a fixed hash seed
//     (BPF_F_ZERO_SEED) and filled in the same order, so iterating one
//     (bpf_for_each_map_elem) visits entries in the same order in all three;
//   - the checks run every version on one CPU (per-CPU maps, the CPU id).
// What nondeterminism is left (a helper not replayed) shows as the witness
// disagreeing with the original. Such a step is counted as nondeterministic,
// not as a difference: the parts where the two disagreed are not compared
// in that step (never beyond it: masks are not kept), everything else is,
// byte for byte. A packet runs through the original, the specialized
// version, then the witness.
// A difference is written in one reproducer format (Reproducer).
#pragma once

#include "backend/bpf/BpfObject.h"
#include "backend/bpf/ComparedCopy.h"
#include "backend/bpf/Guard.h"
#include "backend/bpf/MapAccess.h"
#include "backend/bpf/Profile.h"
#include "backend/bpf/ProgramSpec.h"
#include "core/FaultInjection.h"
#include "runtime/PacketSamples.h"
#include "runtime/ScratchMaps.h"
#include "support/Error.h"
#include "support/FileDescriptor.h"

#include <nlohmann/json_fwd.hpp>

#include <array>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace morpheus::runtime {

enum class Version { Original, Witness, Specialized };
inline constexpr size_t VersionCount = 3;
// "original", "witness", "specialized"
const char *versionName(Version version);

// A packet of a comparison; after a bump of the scratch guard the
// specialized version hands it to its fallback.
struct Step : SamplePacket {
  bool guardBumped = false;
};

// Map rows by map name, values as one CPU's row: a map state.
using MapContents = std::map<std::string, std::vector<std::pair<core::Bytes, core::Bytes>>>;

// What one version did with one packet.
struct Observation : PacketResult {
  std::map<std::string, MapDump> maps; // those the check read
};

// Which maps are read and compared after a packet.
enum class MapCheck {
  None,
  Written, // maps the analysis does not prove read-only, rings, queues
  All,
};

struct StepOutcome {
  std::array<Observation, VersionCount> observed; // by Version
  // The first difference between original and specialized where the
  // witness agreed with the original; none when they agree.
  std::optional<std::string> difference;
  // The witness disagreed with the original somewhere (left uncompared).
  bool nondeterministic = false;
};

// What the comparisons left uncompared because the original and the
// witness disagreed: the steps (packets, or map comparisons) where they did,
// and in those the verdicts, the bytes (8-byte words of output, context and
// map values) and the key sets (or record counts, output lengths).
struct MaskCounts {
  uint64_t steps = 0, verdicts = 0, bytes = 0, keySets = 0;
};

// The comparison of one step's observations (VersionComparison::run): fills
// `outcome.difference` (the first difference between the original and the
// specialized version where the witness agreed with the original) and
// `outcome.nondeterministic`, and adds to `counts` what was left
// uncompared. Nothing carries over to another step.
void compareObservations(StepOutcome &outcome, MaskCounts &counts);

// The one reproducer format of a difference, for shadow validation and the
// fuzzer alike (JSON, see docs/equivalence.md).
struct Reproducer {
  std::string check; // "shadow validation", "fuzz"
  std::string program, entry;
  uint64_t guardVersion = 0;
  std::optional<uint64_t> seed;
  std::string difference;
  // The maps the versions started from, as far as the check chose them:
  // the fuzzer's map state, or the entries the specialization read.
  MapContents maps;
  struct Packet {
    Step step;
    std::array<PacketResult, VersionCount> results;
  };
  std::vector<Packet> packets;
  // 1-based index in `packets` of the packet that showed the difference;
  // none when it showed in the maps after all of them.
  std::optional<size_t> differingPacket;
  std::optional<bool> shrunk; // the fuzzer's cases are shrunk

  nlohmann::json toJson() const;
};

class VersionComparison {
public:
  struct Options {
    CopySizing sizing;
    uint64_t guardVersion = 1; // what the scratch guard holds at first
    // Whether the specialized version's fallback is exercised (bumps of
    // the scratch guard): its original is then loaded beside it.
    bool fallback = false;
    // The programs every version loads, by name; unset loads them all.
    std::optional<std::set<std::string>> programs;
    // Test-only: unequalRandomStreams (the Specialized version draws
    // another stream than the originals), unlatchedClocks (every version
    // reads the clocks itself), randomHashSeeds (scratch hash maps without
    // a fixed seed).
    core::FaultInjection faults;
  };

  static Expected<std::unique_ptr<VersionComparison>>
  create(const bpf::ProgramSpec &spec, const std::string &entry, const LiveMaps &live,
         const Options &options);
  ~VersionComparison();

  // Loads `elf`, the compared copy of a specialized version of the spec
  // (SpecializedObject::comparedElf) built for the scratch guard's current
  // version, as the Specialized version (replacing one loaded before).
  Error loadSpecialized(llvm::ArrayRef<char> elf);

  bpf::GuardWord &guard() { return scratchGuard; }
  // What the kernel said of each program (verified_insns, fallback slot),
  // for ProgramSpec::fallbackFor to decide as it does for the live program.
  const std::map<std::string, bpf::ProgramFacts> &programFacts() const { return facts; }
  // Where create() spent its time: the map image, the scratch copies, each
  // load (and verification) of the original.
  const std::vector<core::BuildPhase> &setupPhases() const { return phases; }
  // A version's copies of the object's maps, by name.
  const std::map<std::string, int> &maps(Version version) const;

  // Writes `rows` (values as one CPU's row, repeated for every CPU) into
  // every version's copy of the maps named.
  Error write(const MapContents &rows);
  // The same for rows written while packets run, after the program's own
  // inserts: a row the original's map refuses because it is full (E2BIG)
  // is written into no copy. Returns the rows written.
  Expected<MapContents> writeWhereRoom(const MapContents &rows);
  // Puts every version's copies back as they were made (ScratchMaps::restore).
  Error restore(const std::map<std::string, std::vector<core::Bytes>> &touched);

  // Runs `step` through the three versions and compares them: verdict,
  // output bytes, the context after the run, and the maps `check` names.
  // `keys` are read in arrays too large to read whole.
  Expected<StepOutcome> run(const Step &step, MapCheck check,
                            const std::map<std::string, std::vector<core::Bytes>> &keys);
  // Compares the versions' maps as they are now (`observed` left without
  // a packet's results).
  Expected<StepOutcome>
  compareMaps(MapCheck check, const std::map<std::string, std::vector<core::Bytes>> &keys);

  const MaskCounts &masked() const { return maskCounts; }

private:
  Expected<MapContents> writeRows(const MapContents &rows, bool skipWhereFull);
  VersionComparison(const bpf::ProgramSpec &spec, std::string entry, bpf::GuardWord guard)
      : spec(spec), entry(std::move(entry)), scratchGuard(std::move(guard)) {}
  int programFd(Version version) const;
  // The replay state `version` runs the step from (replay_abi.h).
  Error startReplay(Version version, const Step &step);
  // What the run of `version` latched, for the versions that run after it.
  Error keepLatched(Version version);
  Error observeMaps(MapCheck check, const std::map<std::string, std::vector<core::Bytes>> &keys,
                    std::array<Observation, VersionCount> &observed) const;
  bool written(const std::string &map) const;
  // The map of `version`'s replay state (when it has one).
  bpf::MapAccess replayState(Version version) const;

  const bpf::ProgramSpec &spec;
  std::string entry;
  std::optional<std::set<std::string>> programs; // Options::programs
  bpf::GuardWord scratchGuard;
  // The specialized version's own traffic profile map, every site sampled
  // at every lookup, so the recording code runs on every packet compared
  // (and writes nothing the live program sees).
  std::optional<bpf::ProfileMap> scratchProfile;
  MapImage image;
  std::array<std::unique_ptr<ScratchMaps>, VersionCount> copies;
  std::array<std::optional<bpf::LoadedObject>, VersionCount> objects;
  std::optional<bpf::LoadedObject> fallbackOriginal; // the Specialized one's
  FileDescriptor fallbackArray;
  std::map<std::string, bpf::ProgramFacts> facts;
  std::map<std::string, int> specializedMaps; // its copies, guard and fallback
  std::vector<core::BuildPhase> phases; // of create()
  core::FaultInjection faults;
  // Per version, the replay map every load of it shares (none: the program
  // replays nothing), and the clocks latched so far in the current step.
  std::array<FileDescriptor, VersionCount> replayMaps;
  morpheus_replay_state carried = {};
  MaskCounts maskCounts;
};

} // namespace morpheus::runtime
