#include "support/Clang.h"

#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/Program.h>
#include <llvm/Support/SHA256.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <utime.h>

using namespace llvm;

namespace morpheus {

namespace {

// `clang FLAGS MODE PATH -o TEMPORARY`, stderr to a temporary file: what
// clang wrote, or an error naming `path` with clang's diagnostics.
Expected<std::unique_ptr<MemoryBuffer>> clangOutput(const std::string &clang,
                                                    const std::string &path,
                                                    const std::vector<std::string> &flags,
                                                    const std::vector<std::string> &mode) {
  SmallString<128> output, errors;
  if (std::error_code ec = sys::fs::createTemporaryFile("morpheus", "out", output))
    return makeSystemError(ec.value(), "{0}: cannot create a temporary file", path);
  if (std::error_code ec = sys::fs::createTemporaryFile("morpheus", "err", errors))
    return makeSystemError(ec.value(), "{0}: cannot create a temporary file", path);
  auto cleanup = make_scope_exit([&] {
    sys::fs::remove(output);
    sys::fs::remove(errors);
  });

  std::vector<std::string> args = {clang};
  args.insert(args.end(), flags.begin(), flags.end());
  args.insert(args.end(), mode.begin(), mode.end());
  args.insert(args.end(), {path, "-o", output.str().str()});
  std::vector<StringRef> argv(args.begin(), args.end());
  std::optional<StringRef> redirects[] = {std::nullopt, std::nullopt, StringRef(errors)};
  std::string execError;
  int status = sys::ExecuteAndWait(clang, argv, std::nullopt, redirects, 0, 0, &execError);
  if (status != 0) {
    std::string diagnostics;
    if (auto buffer = MemoryBuffer::getFile(errors))
      diagnostics = (*buffer)->getBuffer().rtrim().str();
    if (status < 0)
      return makeError("{0}: cannot run {1}: {2}", path, clang, execError);
    return makeError("{0}: clang failed:\n{1}", path, diagnostics);
  }
  auto buffer = MemoryBuffer::getFile(output);
  if (!buffer)
    return makeSystemError(buffer.getError().value(), "{0}: cannot read clang output", path);
  return std::move(*buffer);
}

using Digest = std::array<uint8_t, 32>;

// The cache entry's name: a hash of everything that decides clang's output
// (Clang.h), or nothing when the source cannot be preprocessed (the real
// compile then reports why).
std::optional<std::string> entryName(const std::string &clang, const std::string &path,
                                     const std::vector<std::string> &flags) {
  auto preprocessed = clangOutput(clang, path, flags, {"-E"});
  if (!preprocessed) {
    consumeError(preprocessed.takeError());
    return std::nullopt;
  }
  SHA256 hash;
  auto field = [&](StringRef bytes) {
    hash.update(std::to_string(bytes.size()) + ":");
    hash.update(bytes);
  };
  field("morpheus-bitcode-1");
  field(clang);
  sys::fs::file_status binary;
  if (sys::fs::status(clang, binary))
    return std::nullopt;
  field(std::to_string(binary.getSize()) + "@" +
        std::to_string(binary.getLastModificationTime().time_since_epoch().count()));
  for (const std::string &flag : flags)
    field(flag);
  SmallString<128> cwd;
  if (sys::fs::current_path(cwd))
    return std::nullopt;
  field(cwd);
  field(path);
  field((*preprocessed)->getBuffer());
  Digest digest = hash.final();
  return "bitcode-" + toHex(digest, /*LowerCase=*/true) + ".bc";
}

Digest checksum(StringRef bytes) { return SHA256::hash(arrayRefFromStringRef(bytes)); }

// An entry is the checksum of the bitcode, then the bitcode.
std::unique_ptr<MemoryBuffer> readEntry(const std::string &file) {
  auto buffer = MemoryBuffer::getFile(file, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer || (*buffer)->getBufferSize() <= sizeof(Digest))
    return nullptr;
  StringRef bytes = (*buffer)->getBuffer();
  StringRef stored = bytes.take_front(sizeof(Digest)), bitcode = bytes.drop_front(sizeof(Digest));
  Digest expected = checksum(bitcode);
  if (stored != StringRef(reinterpret_cast<const char *>(expected.data()), expected.size()))
    return nullptr;
  ::utime(file.c_str(), nullptr); // now: recently used (storeEntry's eviction order)
  return MemoryBuffer::getMemBufferCopy(bitcode, file);
}

// Writes through a file of its own and a rename, so concurrent runs that
// store the same entry never interleave their bytes; then removes the
// least recently used entries beyond BitcodeCacheEntries. Failures are
// ignored: the cache only saves time.
void storeEntry(const std::string &directory, const std::string &file, StringRef bitcode) {
  if (sys::fs::create_directories(directory))
    return;
  SmallString<128> temporary;
  int fd;
  if (sys::fs::createUniqueFile(file + ".%%%%%%%%", fd, temporary))
    return;
  {
    raw_fd_ostream out(fd, /*shouldClose=*/true);
    Digest digest = checksum(bitcode);
    out.write(reinterpret_cast<const char *>(digest.data()), digest.size());
    out << bitcode;
    out.close();
    if (out.has_error()) {
      out.clear_error();
      sys::fs::remove(temporary);
      return;
    }
  }
  if (sys::fs::rename(temporary, file)) {
    sys::fs::remove(temporary);
    return;
  }
  std::vector<std::pair<sys::TimePoint<>, std::string>> entries;
  std::error_code ec;
  for (sys::fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    StringRef name = sys::path::filename(it->path());
    sys::fs::file_status status;
    if (name.starts_with("bitcode-") && name.ends_with(".bc") && !sys::fs::status(it->path(), status))
      entries.push_back({status.getLastModificationTime(), it->path()});
  }
  if (entries.size() <= BitcodeCacheEntries)
    return;
  std::sort(entries.begin(), entries.end());
  for (size_t i = 0; i + BitcodeCacheEntries < entries.size(); ++i)
    sys::fs::remove(entries[i].second);
}

} // namespace

Expected<Bitcode> compileToBitcode(const std::string &clang, const std::string &path,
                                   const std::vector<std::string> &flags,
                                   const std::optional<std::string> &cacheDirectory) {
  std::optional<std::string> entry;
  if (cacheDirectory)
    if (std::optional<std::string> name = entryName(clang, path, flags)) {
      entry = *cacheDirectory + "/" + *name;
      if (std::unique_ptr<MemoryBuffer> kept = readEntry(*entry))
        return Bitcode{std::move(kept), /*fromCache=*/true};
    }
  auto bitcode = clangOutput(clang, path, flags, {"-emit-llvm", "-c"});
  if (!bitcode)
    return bitcode.takeError();
  if (entry)
    storeEntry(*cacheDirectory, *entry, (*bitcode)->getBuffer());
  return Bitcode{std::move(*bitcode), /*fromCache=*/false};
}

} // namespace morpheus
