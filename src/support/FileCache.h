// A directory of files Morpheus built once and reads back in later runs,
// each named by a hash of everything that decides its contents (clang's
// bitcode: support/Clang; BPF objects: backend/bpf/Codegen), so a stale
// file is never read as a current one. Entries carry a checksum of their
// bytes (a damaged one reads as absent), are written through a file of
// their own and a rename (concurrent runs storing the same entry never
// interleave), and the least recently used beyond the capacity are removed
// after each store. Failures to read or write are not errors: a cache only
// saves time. But a cache directory that cannot be written is said, once
// per process (a warning naming it and why), and then left alone: the
// process goes on without it rather than fail to store every entry.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA256.h>

#include <memory>
#include <optional>
#include <string>

namespace morpheus {

// The name of an entry: SHA-256 over fields, each length-prefixed so no
// two lists of fields hash alike by concatenation.
class CacheKey {
public:
  CacheKey &add(llvm::StringRef field);
  // A file's identity for the key (its size and modification time: a
  // rebuilt clang or Morpheus is another key); false when it has none.
  bool addFileIdentity(llvm::StringRef path);
  std::string hex();

private:
  llvm::SHA256 hash;
};

// How many entries of one kind a cache keeps.
inline constexpr size_t CacheEntriesKept = 64;

class FileCache {
public:
  // Entries `root`/`kind`/`kind`-KEY`suffix` (root: the build cache,
  // support/CacheDirectory), at most CacheEntriesKept of them.
  FileCache(const std::string &root, std::string kind, std::string suffix)
      : root(root), directory(root + "/" + kind), kind(std::move(kind)),
        suffix(std::move(suffix)) {}

  // The entry's bytes (marked recently used), or null when absent or damaged.
  std::unique_ptr<llvm::MemoryBuffer> read(const std::string &key) const;
  void store(const std::string &key, llvm::StringRef bytes) const;

private:
  std::string path(const std::string &key) const { return directory + "/" + kind + "-" + key + suffix; }

  // Said once, then no more stores under `root` in this process.
  void giveUp(std::error_code why, const std::string &doing) const;
  bool givenUp() const;

  std::string root, directory, kind, suffix;
};

} // namespace morpheus
