#include "support/Clang.h"

#include "support/FileCache.h"

#include <llvm/ADT/ScopeExit.h>
#include <llvm/ADT/SmallString.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Program.h>

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
  CacheKey key;
  key.add("morpheus-bitcode-1").add(clang);
  if (!key.addFileIdentity(clang))
    return std::nullopt;
  for (const std::string &flag : flags)
    key.add(flag);
  SmallString<128> cwd;
  if (sys::fs::current_path(cwd))
    return std::nullopt;
  key.add(cwd).add(path).add((*preprocessed)->getBuffer());
  return key.hex();
}

} // namespace

Expected<Bitcode> compileToBitcode(const std::string &clang, const std::string &path,
                                   const std::vector<std::string> &flags,
                                   const std::optional<std::string> &cacheDirectory) {
  std::optional<FileCache> cache;
  std::optional<std::string> key;
  if (cacheDirectory && (key = entryName(clang, path, flags))) {
    cache.emplace(*cacheDirectory, "bitcode", ".bc");
    if (std::unique_ptr<MemoryBuffer> kept = cache->read(*key))
      return Bitcode{std::move(kept), /*fromCache=*/true};
  }
  auto bitcode = clangOutput(clang, path, flags, {"-emit-llvm", "-c"});
  if (!bitcode)
    return bitcode.takeError();
  if (cache)
    cache->store(*key, (*bitcode)->getBuffer());
  return Bitcode{std::move(*bitcode), /*fromCache=*/false};
}

} // namespace morpheus
