#include "nf/common/ConfigFile.h"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <sstream>

namespace morpheus::nf {

Expected<std::vector<ConfigLine>> readConfig(const std::string &path) {
  std::ifstream in(path);
  if (!in)
    return makeSystemError(errno ? errno : ENOENT, "{0}: cannot open", path);
  std::vector<ConfigLine> lines;
  std::string text;
  for (unsigned number = 1; std::getline(in, text); ++number) {
    if (auto hash = text.find('#'); hash != std::string::npos)
      text.resize(hash);
    std::istringstream words(text);
    ConfigLine line{path, number, {}};
    for (std::string word; words >> word;)
      line.words.push_back(word);
    if (!line.words.empty())
      lines.push_back(std::move(line));
  }
  if (in.bad())
    return makeSystemError(errno, "{0}: read error", path);
  return lines;
}

Expected<uint32_t> parseIpv4(const ConfigLine &line, const std::string &text,
                             const char *what) {
  unsigned a, b, c, d;
  char extra;
  if (std::sscanf(text.c_str(), "%u.%u.%u.%u%c", &a, &b, &c, &d, &extra) != 4 || a > 255 ||
      b > 255 || c > 255 || d > 255)
    return line.error("{0}: '{1}' is not an IPv4 address", what, text);
  return (a << 24) | (b << 16) | (c << 8) | d;
}

Expected<Ipv4Prefix> parsePrefix(const ConfigLine &line, const std::string &text,
                                 const char *what) {
  std::string address = text;
  unsigned length = 32;
  if (auto slash = text.find('/'); slash != std::string::npos) {
    address = text.substr(0, slash);
    auto parsed = parseNumber(line, text.substr(slash + 1), what, 32);
    if (!parsed)
      return parsed.takeError();
    length = *parsed;
  }
  auto ip = parseIpv4(line, address, what);
  if (!ip)
    return ip.takeError();
  uint32_t mask = length ? ~uint32_t(0) << (32 - length) : 0;
  if (*ip & ~mask)
    return line.error("{0}: '{1}' has host bits set beyond /{2}", what, text, length);
  return Ipv4Prefix{*ip, uint8_t(length)};
}

Expected<Mac> parseMac(const ConfigLine &line, const std::string &text, const char *what) {
  unsigned parts[6];
  char extra;
  if (std::sscanf(text.c_str(), "%x:%x:%x:%x:%x:%x%c", &parts[0], &parts[1], &parts[2],
                  &parts[3], &parts[4], &parts[5], &extra) != 6)
    return line.error("{0}: '{1}' is not a MAC address like 02:00:00:00:00:01", what, text);
  Mac mac;
  for (int i = 0; i < 6; ++i) {
    if (parts[i] > 0xff)
      return line.error("{0}: '{1}' is not a MAC address", what, text);
    mac[i] = parts[i];
  }
  return mac;
}

Expected<uint64_t> parseNumber(const ConfigLine &line, const std::string &text,
                               const char *what, uint64_t max) {
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || *end || errno || text[0] == '-')
    return line.error("{0}: '{1}' is not a number", what, text);
  if (value > max)
    return line.error("{0}: {1} is larger than {2}", what, text, max);
  return value;
}

Expected<std::pair<uint16_t, uint16_t>> parsePortRange(const ConfigLine &line,
                                                       const std::string &text,
                                                       const char *what) {
  auto colon = text.find(':');
  auto low = parseNumber(line, text.substr(0, colon), what, 65535);
  if (!low)
    return low.takeError();
  uint64_t high = *low;
  if (colon != std::string::npos) {
    auto parsed = parseNumber(line, text.substr(colon + 1), what, 65535);
    if (!parsed)
      return parsed.takeError();
    high = *parsed;
  }
  if (high < *low)
    return line.error("{0}: range '{1}' is empty", what, text);
  return std::pair<uint16_t, uint16_t>(*low, high);
}

Expected<std::map<std::string, std::string>> keyValues(const ConfigLine &line) {
  std::map<std::string, std::string> values;
  for (const std::string &word : line.words) {
    auto eq = word.find('=');
    if (eq == std::string::npos || eq == 0)
      return line.error("expected key=value, got '{0}'", word);
    if (!values.emplace(word.substr(0, eq), word.substr(eq + 1)).second)
      return line.error("'{0}' given twice", word.substr(0, eq));
  }
  return values;
}

} // namespace morpheus::nf
