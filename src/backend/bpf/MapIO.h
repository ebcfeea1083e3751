// Reading and writing live BPF maps; the byte formats of keys, values and
// snapshots are in Snapshot.h (included here for the callers of both).
#pragma once

#include "backend/bpf/Snapshot.h"
#include "core/Globals.h"
#include "core/Tables.h"
#include "support/Bytes.h"
#include "support/Error.h"

#include <llvm/ADT/STLFunctionalExtras.h>

#include <map>
#include <string>
#include <string_view>

namespace morpheus::bpf {

// The bytes a content read of the array `info` copies: every slot's value
// as the syscall returns it.
uint64_t arrayContentBytes(const core::TableInfo &info);

// Reads what `request` asks for from the map behind `fd`, as the shared
// readTable (Snapshot.h) decides: the whole map within
// request.wholeTableLimit, a larger array within ArrayContentReadBytes by
// content (read in batches), each requested key. Per-CPU values are
// collapsed when all CPUs agree.
Expected<core::TableContents> readTable(int fd, const core::TableInfo &info,
                                        const core::TableReadRequest &request);

// Reads every table of `plan` from the maps in `fds` (name -> fd), as
// readTable does; the snapshot a version is specialized for.
Expected<core::TableSnapshot> readSnapshot(const core::ReadPlan &plan,
                                           const core::TableCatalog &catalog,
                                           const std::map<std::string, int> &fds);

// The live bytes of every global of `slices`, from its section's map in
// `fds` (one lookup per section); a section without a map is an error.
Expected<core::GlobalValues> readGlobals(const std::vector<core::GlobalSlice> &slices,
                                         const std::map<std::string, int> &fds);

// The number of possible CPUs, as per-CPU map values are laid out.
int possibleCpus();

// The one key walk: calls `visit` with each key of the map behind `fd`, in
// the kernel's order, until it returns false or the keys run out. A key
// deleted while the walk stands on it makes the kernel start over from the
// first key, so under concurrent deletes a key can be visited twice; after
// 2 x max_entries + 2 steps the walk gives up with an error (the map
// changes faster than it is walked: what was visited may not be all of
// it), so it always ends and never passes a partial walk off as whole. An
// error (other than the end of the keys) breaks the walk off and is
// returned, naming `mapName`.
Error forEachKey(int fd, uint32_t keySize, const std::string &mapName,
                 llvm::function_ref<bool(const core::Bytes &)> visit);

// The one entry walk: calls `visit(key, value)` for each entry of the map
// behind `fd`, keys walked as forEachKey walks them, until it returns
// false. A key deleted between the walk and its lookup is skipped; a lookup
// that fails otherwise ends the walk with its error. Values are as the
// syscall returns them, `valueBytes` long (syscallValueSize).
Error forEachEntry(int fd, uint32_t keySize, size_t valueBytes, const std::string &mapName,
                   llvm::function_ref<bool(const core::Bytes &, const core::Bytes &)> visit);

// Kinds of kernel maps, by BPF_MAP_TYPE_*.
bool isArrayMap(unsigned type);
bool isPerCpuMap(unsigned type);
// Maps whose contents user space can read and write as plain bytes; the
// others (devmaps, program arrays, maps of maps, ring buffers) hold kernel
// object references or cannot be read.
bool isPlainDataMap(unsigned type);
// Bytes of one value as the syscalls read and write it: every CPU's copy,
// each padded to 8 bytes, for per-CPU maps.
size_t syscallValueSize(unsigned type, uint32_t valueSize);

} // namespace morpheus::bpf
