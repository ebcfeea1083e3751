// The byte formats operators use for keys, values and whole snapshots (hex as
// bpftool prints it; JSON snapshot documents), without libbpf: part of
// morpheus_bpf_ir, which the pass driver (morpheus-opt) links.
#pragma once

#include "core/Tables.h"
#include "support/Bytes.h"
#include "support/Error.h"

#include <nlohmann/json_fwd.hpp>

#include <string>
#include <string_view>

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

// The snapshot document in the file `path` (parseSnapshot): a regular file
// of at most 1 GiB, read whole; anything else is an error naming the file.
Expected<core::TableSnapshot> readSnapshotFile(const std::string &path,
                                               const core::TableCatalog &catalog);

} // namespace morpheus::bpf
