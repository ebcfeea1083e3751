// The byte formats operators use for keys, values and whole snapshots (hex as
// bpftool prints it; JSON snapshot documents), and the one reading of a
// table a cycle makes, over a live map (MapIO) or a snapshot's listing, so
// that `specialize` and `explain` decide on a snapshot what `run` decides on
// the same maps. Without libbpf: part of morpheus_bpf_ir, which the pass
// driver (morpheus-opt) links.
#pragma once

#include "core/Globals.h"
#include "core/Tables.h"
#include "support/Bytes.h"
#include "support/Error.h"

#include <llvm/ADT/STLFunctionalExtras.h>
#include <nlohmann/json_fwd.hpp>

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace morpheus::bpf {

// Parses raw bytes written as hex: "0a000001", "0a 00 00 01", "0x0a 0x00 ..."
// or bpftool's JSON form ["0x0a","0x00",...]. `what` names the field in errors.
Expected<core::Bytes> parseHexBytes(std::string_view text, const std::string &what);
Expected<core::Bytes> parseJsonBytes(const nlohmann::json &value,
                                     const std::string &what);

// A snapshot document: {"maps": {"NAME": [{"key": HEX, "value": HEX}, ...]}}.
// Per-CPU maps may give "values": [HEX per CPU] instead of "value". Every
// listed map is taken as complete; keys and values are checked against the
// catalog's sizes.
Expected<core::TableSnapshot> parseSnapshot(const nlohmann::json &document,
                                            const core::TableCatalog &catalog,
                                            const std::string &source);
nlohmann::json snapshotToJson(const core::TableSnapshot &snapshot);

// What a loaded program tells a cycle about itself: what verifying it cost
// and its slot in the fallback program array (BpfObject.h,
// createFallbackArray). A snapshot of a running program carries them, so
// that an offline build chooses every fallback as the live cycle did.
struct ProgramFacts {
  // bpf_prog_info.verified_insns: what verifying it cost.
  std::optional<uint64_t> verifiedInstructions;
  // Its slot in the fallback program array; none when it could not join
  // (e.g. an xdp/devmap program beside the xdp entry).
  std::optional<uint32_t> fallbackSlot;
  // Set for a program that makes no tail calls of its own: at most how many
  // tail calls the kernel has counted when it starts, in the version these
  // facts are for (tailCallsBefore, BpfObject.h). A fallback by tail call
  // is one more, which the kernel allows while the sum stays within its
  // limit; in an object that makes tail calls, only then.
  std::optional<uint32_t> tailCallsBefore;
  bool operator==(const ProgramFacts &) const = default;
};

// The program of `programs` that `name` names: its whole name, or the
// 15 characters the kernel keeps of it when they start only one; an error
// saying which otherwise.
Expected<std::string> programNamed(const std::string &name,
                                   const std::vector<std::string> &programs);

// A snapshot document's "programs": {NAME: {"verified_instructions": N,
// "fallback_slot": N, "tail_calls_before": N}}, a fact not known left out.
nlohmann::json programFactsToJson(const std::map<std::string, ProgramFacts> &programs);

// An array with more slots than a read request's wholeTableLimit is read
// whole by content (the slots that differ from its most common value, which
// TableContents::unlistedValue holds) when its values take at most this
// many bytes as the syscall returns them: 1 MiB (16,384 slots of 64 bytes)
// took 3.5 ms a cycle in batches of 1,024 slots on this machine
// (docs/passes.md), so 16 MiB about 60 ms, inside a 1 s period; the
// firewall's rule-set arrays (16,386 sets of 520 bytes, 8.5 MB each) are
// what region-as-table reads.
constexpr size_t ArrayContentReadBytes = 16 << 20;

// Where a cycle reads one table from: the live map (MapIO.cpp) or a
// snapshot's listing of it (readSnapshotFile). readTable decides what to
// read; a source only answers.
class TableSource {
public:
  virtual ~TableSource() = default;
  // Calls `visit` with each key until it returns false or the keys run out.
  virtual Error forEachKey(llvm::function_ref<bool(const core::Bytes &)> visit) = 0;
  // Whether lookup(key) knows the answer (a snapshot does not know the
  // value of an array slot it does not list; a live map always answers).
  virtual bool answers(const core::Bytes &key) const { return true; }
  // The entry at `key` (per-CPU values collapsed), nullopt when absent.
  virtual Expected<std::optional<core::TableEntry>> lookup(const core::Bytes &key) = 0;
  // Calls `visit` with the slots of an array in index order (keys from 0),
  // until it returns false or the slots run out, when all of them can be
  // read within ArrayContentReadBytes; false (nothing visited) otherwise.
  virtual Expected<bool> forEachSlot(llvm::function_ref<bool(core::TableEntry &&)> visit) = 0;
};

// Reads what `request` asks for of the table `info` from `source`: the
// whole table when it has at most request.wholeTableLimit entries (stopping
// as soon as it has more); for a larger array, its slots by content (every
// slot that differs from the array's most common value, the value itself
// as TableContents::unlistedValue; zeros win a tie), given up as soon as
// the slots read pass both of the request's content bounds; then, unless
// the table was read whole, each requested key the source answers. The one reading of a table, live (MapIO's
// readTable) and offline (readSnapshotFile): both take the same entries.
Expected<core::TableContents> readTable(TableSource &source, const core::TableInfo &info,
                                        const core::TableReadRequest &request);

// What a program's snapshot may list besides its tables: the section maps
// of its writable globals (`.data`, `.bss`, `.data.*`, by their maps' names
// in the object), each one slot of the section's size.
struct SnapshotLayout {
  const core::TableCatalog &catalog;
  const std::vector<core::GlobalSlice> &globals;
  std::map<std::string, uint64_t> sectionBytes; // section map -> its bytes
  // The object's programs, which "programs" names (by the whole name, or
  // by the kernel's 15 characters when they are the start of only one).
  const std::vector<std::string> &programs;
};

// A snapshot as a cycle takes it: the tables as the cycle's read plan
// reads them from the listing, each global's bytes from its section's map,
// and the facts of the programs that were running (the document's
// "programs").
struct ProgramSnapshot {
  core::TableSnapshot tables;
  core::GlobalValues globals;
  std::map<std::string, ProgramFacts> programs;
};

// The snapshot document in the file `path`: a regular file of at most
// 1 GiB, read whole, its maps parsed (parseSnapshot), its section maps cut
// into the globals they hold, and each table of `plan` read from its
// listing by readTable, as the cycle reads the live map; a table the plan
// does not name is not read, as the cycle does not read it. Anything else
// (a section map of another size, a program the object does not have, a
// fact that is not a number) is an error naming the file, the map and the
// offset or the program.
Expected<ProgramSnapshot> readSnapshotFile(const std::string &path, const SnapshotLayout &layout,
                                           const core::ReadPlan &plan);

} // namespace morpheus::bpf
