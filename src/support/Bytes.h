// Raw bytes: what map keys, values and packets are to the kernel, and the
// one place that turns a C struct into bytes, bytes back into a struct, and
// bytes into hex for people. Product code and tests share these.
#pragma once

#include <llvm/ADT/ArrayRef.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <type_traits>
#include <vector>

namespace morpheus {

using Bytes = std::vector<uint8_t>;

// The bytes of a plain struct as the kernel sees it (padding included, so
// callers keep their layouts free of padding or zero it).
template <typename T> Bytes bytesOf(const T &value) {
  static_assert(std::is_trivially_copyable_v<T>, "only plain data has a byte image");
  const auto *raw = reinterpret_cast<const uint8_t *>(&value);
  return Bytes(raw, raw + sizeof(T));
}

// Bytes are their own image, so code taking "a key" accepts either.
inline Bytes bytesOf(const Bytes &bytes) { return bytes; }

// The bytes of a plain struct (or of a Bytes) in place, without a copy:
// what a map key or value, a packet or a context is passed as.
template <typename T> llvm::ArrayRef<uint8_t> byteView(const T &value) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return value;
  } else {
    static_assert(std::is_trivially_copyable_v<T>, "only plain data has a byte image");
    return {reinterpret_cast<const uint8_t *>(&value), sizeof(T)};
  }
}
template <typename T> llvm::MutableArrayRef<uint8_t> mutableByteView(T &value) {
  if constexpr (std::is_same_v<T, Bytes>) {
    return value;
  } else {
    static_assert(std::is_trivially_copyable_v<T>, "only plain data has a byte image");
    return {reinterpret_cast<uint8_t *>(&value), sizeof(T)};
  }
}

// The struct whose bytes lead `bytes` (which must hold at least sizeof(T)).
template <typename T> T fromBytes(const Bytes &bytes) {
  static_assert(std::is_trivially_copyable_v<T>, "only plain data has a byte image");
  T value;
  std::memcpy(&value, bytes.data(), sizeof(T));
  return value;
}

// Lowercase hex, a space between bytes ("0a 00 00 01", as bpftool prints
// them and parseHexBytes reads them back); with `perLine`, a line break
// instead of the space after every `perLine` bytes (packet dumps).
inline std::string toHex(const Bytes &bytes, size_t perLine = 0) {
  static const char digits[] = "0123456789abcdef";
  std::string out;
  out.reserve(bytes.size() * 3);
  for (size_t i = 0; i < bytes.size(); ++i) {
    if (i)
      out += perLine && i % perLine == 0 ? '\n' : ' ';
    out += digits[bytes[i] >> 4];
    out += digits[bytes[i] & 15];
  }
  return out;
}

// A packet in a failure message: 16 bytes a line.
inline std::string hexDump(const Bytes &bytes) { return toHex(bytes, 16); }

} // namespace morpheus
