// Reading and writing live BPF maps, and the byte formats operators use for
// keys and values (hex as bpftool prints it; JSON snapshots).
#pragma once

#include "core/Tables.h"
#include "support/Error.h"

#include <nlohmann/json_fwd.hpp>

#include <functional>
#include <map>
#include <string>
#include <string_view>

namespace morpheus::bpf {

// Reads what `request` asks for from the map behind `fd`: the whole map when
// it has at most request.wholeTableLimit entries (stopping as soon as it has
// more), plus each requested key. Per-CPU values are collapsed when all CPUs
// agree.
Expected<core::TableContents> readTable(int fd, const core::TableInfo &info,
                                        const core::TableReadRequest &request);

// Reads every table of `plan` from the maps in `fds` (name -> fd), as
// readTable does; the snapshot a version is specialized for.
Expected<core::TableSnapshot> readSnapshot(const core::ReadPlan &plan,
                                           const core::TableCatalog &catalog,
                                           const std::map<std::string, int> &fds);

// Parses raw bytes written as hex: "0a000001", "0a 00 00 01", "0x0a 0x00 ..."
// or bpftool's JSON form ["0x0a","0x00",...]. `what` names the field in errors.
Expected<core::Bytes> parseHexBytes(std::string_view text, const std::string &what);
Expected<core::Bytes> parseJsonBytes(const nlohmann::json &value,
                                     const std::string &what);
std::string toHex(const core::Bytes &bytes);

// A snapshot document: {"maps": {"NAME": [{"key": HEX, "value": HEX}, ...]}}.
// Per-CPU maps may give "values": [HEX per CPU] instead of "value". Every
// listed map is taken as complete; keys and values are checked against the
// catalog's sizes.
Expected<core::TableSnapshot> parseSnapshot(const nlohmann::json &document,
                                            const core::TableCatalog &catalog,
                                            const std::string &source);
nlohmann::json snapshotToJson(const core::TableSnapshot &snapshot);

// The number of possible CPUs, as per-CPU map values are laid out.
int possibleCpus();

// Calls `visit` with each key of the map in the kernel's order until it
// returns false or the keys run out (an entry deleted meanwhile is skipped).
void forEachKey(int fd, uint32_t keySize, const std::function<bool(const core::Bytes &)> &visit);

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
