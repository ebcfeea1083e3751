#include "nf/common/ConfigFile.h"

#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/StringExtras.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <optional>

namespace morpheus::nf {

namespace {

// The whole of the regular file `path`, at most MaxConfigBytes; anything
// else is refused with an error naming the file and what it is.
Expected<std::string> configText(const std::string &path) {
  // O_NONBLOCK: opening a FIFO would otherwise wait for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0)
    return makeSystemError(errno, "{0}: cannot open", path);
  auto closeFd = llvm::make_scope_exit([fd] { ::close(fd); });
  struct stat status = {};
  if (::fstat(fd, &status))
    return makeSystemError(errno, "{0}: cannot open", path);
  if (S_ISDIR(status.st_mode))
    return makeError("{0}: is a directory, not a configuration file", path);
  if (!S_ISREG(status.st_mode))
    return makeError("{0}: not a regular file ({1}): a configuration is a text file", path,
                     S_ISCHR(status.st_mode)    ? "a character device"
                     : S_ISBLK(status.st_mode)  ? "a block device"
                     : S_ISFIFO(status.st_mode) ? "a FIFO"
                                                : "a socket");
  auto tooLarge = [&](uint64_t bytes) {
    return makeError("{0}: {1} bytes; a configuration larger than {2} bytes is refused",
                     path, bytes, MaxConfigBytes);
  };
  if (uint64_t(status.st_size) > MaxConfigBytes)
    return tooLarge(status.st_size);
  std::string text;
  char chunk[1 << 16];
  for (;;) {
    ssize_t got = ::read(fd, chunk, sizeof(chunk));
    if (got < 0 && errno == EINTR)
      continue;
    if (got < 0)
      return makeSystemError(errno, "{0}: read error", path);
    if (got == 0)
      return text;
    if (text.size() + size_t(got) > MaxConfigBytes) // it grew while being read
      return tooLarge(text.size() + size_t(got));
    text.append(chunk, size_t(got));
  }
}

// Text is printable, tabs and spaces; bytes from 0x80 (UTF-8 in comments)
// too. A control byte (NUL above all) says the file is not text.
std::optional<size_t> firstControlByte(llvm::StringRef line) {
  for (size_t at = 0; at < line.size(); ++at) {
    unsigned char byte = line[at];
    if ((byte < 0x20 && byte != '\t' && byte != '\r') || byte == 0x7f)
      return at;
  }
  return std::nullopt;
}

} // namespace

Expected<std::vector<ConfigLine>> readConfig(const std::string &path) {
  auto text = configText(path);
  if (!text)
    return text.takeError();
  std::vector<ConfigLine> lines;
  llvm::StringRef rest = *text;
  for (unsigned number = 1; !rest.empty(); ++number) {
    auto [content, after] = rest.split('\n');
    rest = after;
    ConfigLine line{path, number, {}};
    if (std::optional<size_t> at = firstControlByte(content))
      return line.error("not text (byte 0x{0:x-2} at column {1})", unsigned(uint8_t(content[*at])),
                        *at + 1);
    content = content.take_until([](char c) { return c == '#'; });
    for (content = content.ltrim(); !content.empty(); content = content.ltrim()) {
      llvm::StringRef word = content.take_until(llvm::isSpace);
      line.words.push_back(word.str());
      content = content.drop_front(word.size());
    }
    if (!line.words.empty())
      lines.push_back(std::move(line));
  }
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
