#include "support/FileCache.h"

#include "support/Log.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringExtras.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Path.h>
#include <llvm/Support/raw_ostream.h>

#include <algorithm>
#include <array>
#include <mutex>
#include <set>
#include <utime.h>
#include <vector>

using namespace llvm;

namespace morpheus {

namespace {

using Digest = std::array<uint8_t, 32>;

Digest checksum(StringRef bytes) { return SHA256::hash(arrayRefFromStringRef(bytes)); }

StringRef digestBytes(const Digest &digest) {
  return StringRef(reinterpret_cast<const char *>(digest.data()), digest.size());
}

} // namespace

CacheKey &CacheKey::add(StringRef field) {
  hash.update(std::to_string(field.size()) + ":");
  hash.update(field);
  return *this;
}

bool CacheKey::addFileIdentity(StringRef path) {
  sys::fs::file_status status;
  if (sys::fs::status(path, status))
    return false;
  add(std::to_string(status.getSize()) + "@" +
      std::to_string(status.getLastModificationTime().time_since_epoch().count()));
  return true;
}

std::string CacheKey::hex() {
  Digest digest = hash.final();
  return toHex(digest, /*LowerCase=*/true);
}

// An entry is the checksum of its bytes, then the bytes.
std::unique_ptr<MemoryBuffer> FileCache::read(const std::string &key) const {
  std::string file = path(key);
  auto buffer = MemoryBuffer::getFile(file, /*IsText=*/false, /*RequiresNullTerminator=*/false);
  if (!buffer || (*buffer)->getBufferSize() <= sizeof(Digest))
    return nullptr;
  StringRef bytes = (*buffer)->getBuffer();
  StringRef contents = bytes.drop_front(sizeof(Digest));
  if (bytes.take_front(sizeof(Digest)) != digestBytes(checksum(contents)))
    return nullptr;
  ::utime(file.c_str(), nullptr); // now: recently used, for the eviction order
  return MemoryBuffer::getMemBufferCopy(contents, file);
}

namespace {

std::mutex givenUpMutex;
std::set<std::string> givenUpRoots; // under givenUpMutex

} // namespace

bool FileCache::givenUp() const {
  std::lock_guard lock(givenUpMutex);
  return givenUpRoots.count(root) != 0;
}

void FileCache::giveUp(std::error_code why, const std::string &doing) const {
  {
    std::lock_guard lock(givenUpMutex);
    if (!givenUpRoots.insert(root).second)
      return;
  }
  processLog().warning("cache directory " + root + ": cannot " + doing + " (" + why.message() +
                       "): going on without it (set MORPHEUS_CACHE_DIR to a writable "
                       "directory to keep what is built across runs)");
}

void FileCache::store(const std::string &key, StringRef bytes) const {
  if (givenUp())
    return;
  if (std::error_code ec = sys::fs::create_directories(directory))
    return giveUp(ec, "create " + directory);
  std::string file = path(key);
  SmallString<128> temporary;
  int fd;
  if (std::error_code ec = sys::fs::createUniqueFile(file + ".%%%%%%%%.tmp", fd, temporary))
    return giveUp(ec, "create a file in " + directory);
  {
    raw_fd_ostream out(fd, /*shouldClose=*/true);
    out << digestBytes(checksum(bytes)) << bytes;
    out.close();
    if (out.has_error()) {
      std::error_code ec = out.error();
      out.clear_error();
      sys::fs::remove(temporary);
      return giveUp(ec, "write " + temporary.str().str());
    }
  }
  if (std::error_code ec = sys::fs::rename(temporary, file)) {
    sys::fs::remove(temporary);
    return giveUp(ec, "rename a file in " + directory);
  }
  std::vector<std::pair<sys::TimePoint<>, std::string>> entries;
  std::error_code ec;
  for (sys::fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    StringRef name = sys::path::filename(it->path());
    sys::fs::file_status status;
    if (name.starts_with(kind + "-") && name.ends_with(suffix) &&
        !sys::fs::status(it->path(), status))
      entries.push_back({status.getLastModificationTime(), it->path()});
  }
  if (entries.size() <= CacheEntriesKept)
    return;
  std::sort(entries.begin(), entries.end());
  for (size_t i = 0; i + CacheEntriesKept < entries.size(); ++i)
    sys::fs::remove(entries[i].second);
}

} // namespace morpheus
