// Reading the network functions' configuration files: one entry per line,
// '#' starts a comment, and every error names the file and line.
#pragma once

#include "support/Error.h"

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace morpheus::nf {

struct ConfigLine {
  std::string file;
  unsigned number = 0;
  std::vector<std::string> words; // split on white space

  // "routes.txt:12: <message>"
  template <typename... Ts> Error error(const char *format, Ts &&...args) const {
    return makeError("{0}:{1}: {2}", file, number,
                     llvm::formatv(format, std::forward<Ts>(args)...).str());
  }
};

// The largest configuration read: a full Internet routing table (~1M
// routes) is ~30 MB, so a larger file is a wrong file.
inline constexpr uint64_t MaxConfigBytes = uint64_t(64) << 20;

// All non-empty, non-comment lines of `path`. Refused, with an error naming
// the file (and line): one that cannot be read, is not a regular file (a
// directory, /dev/zero, a FIFO), is larger than MaxConfigBytes, or has a
// line that is not text (a control byte: binary data).
Expected<std::vector<ConfigLine>> readConfig(const std::string &path);

struct Ipv4Prefix {
  uint32_t address = 0; // host byte order, host bits zero
  uint8_t length = 0;
};
using Mac = std::array<uint8_t, 6>;

// Field parsers: `what` names the field in the error ("next hop", "sport").
Expected<uint32_t> parseIpv4(const ConfigLine &line, const std::string &text,
                             const char *what);
// "10.0.0.0/8"; host bits set in the address are an error, "10.0.0.1" alone
// is a /32.
Expected<Ipv4Prefix> parsePrefix(const ConfigLine &line, const std::string &text,
                                 const char *what);
Expected<Mac> parseMac(const ConfigLine &line, const std::string &text, const char *what);
Expected<uint64_t> parseNumber(const ConfigLine &line, const std::string &text,
                               const char *what, uint64_t max);
// "LO:HI" (inclusive) or a single number.
Expected<std::pair<uint16_t, uint16_t>> parsePortRange(const ConfigLine &line,
                                                       const std::string &text,
                                                       const char *what);
// key=value words; an error for a word without '=' or a repeated key.
Expected<std::map<std::string, std::string>> keyValues(const ConfigLine &line);

} // namespace morpheus::nf
