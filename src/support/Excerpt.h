// Text a user gave, as a message may quote it: at most `limit` bytes, every
// byte that is not printable ASCII written \xNN (a message stays one line of
// valid UTF-8 whatever was sent, so it can go into a JSON reply or a log
// line as it is), "..." when cut.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace morpheus {

inline std::string excerptForMessage(std::string_view text, size_t limit = 64) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  for (char c : text.substr(0, limit)) {
    auto byte = static_cast<unsigned char>(c);
    if (byte >= 0x20 && byte < 0x7f) {
      out += c;
      continue;
    }
    out += "\\x";
    out += digits[byte >> 4];
    out += digits[byte & 0xf];
  }
  if (text.size() > limit)
    out += "...";
  return out;
}

} // namespace morpheus
