#include "support/Files.h"

#include <llvm/Support/FileSystem.h>
#include <llvm/Support/FormatVariadic.h>
#include <llvm/Support/Path.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <random>
#include <utility>

namespace morpheus {

namespace {

// How many unpredictable names are tried before giving up: a clash is
// one in 2^64 unless someone fills the directory with guesses.
constexpr int TemporaryNameAttempts = 64;

std::string unpredictableSuffix() {
  std::random_device source; // the kernel's random bytes
  uint64_t bits = (uint64_t(source()) << 32) | source();
  return llvm::formatv("{0:x16}", bits).str();
}

// Writes all of `contents` to `fd`.
bool writeAll(int fd, llvm::StringRef contents) {
  const char *at = contents.data();
  size_t left = contents.size();
  while (left) {
    ssize_t done = ::write(fd, at, left);
    if (done < 0 && errno == EINTR)
      continue;
    if (done <= 0) {
      if (done == 0)
        errno = EIO;
      return false;
    }
    at += done;
    left -= size_t(done);
  }
  return true;
}

// The write of writeFile, inside the directory open as `dirFd`; `shown`
// names the target in errors.
Error writeIn(int dirFd, llvm::StringRef name, llvm::StringRef contents, FileAccess access,
              const std::string &shown) {
  mode_t mode = access == FileAccess::OwnerOnly ? 0600 : 0666; // less the umask
  std::string temporary;
  int fd = -1;
  for (int attempt = 0; fd < 0 && attempt < TemporaryNameAttempts; ++attempt) {
    temporary = "." + name.str() + "." + unpredictableSuffix() + ".tmp";
    fd = ::openat(dirFd, temporary.c_str(),
                  O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
    if (fd < 0 && errno != EEXIST)
      return makeSystemError(errno, "{0}: cannot write (a temporary file beside it)", shown);
  }
  if (fd < 0)
    return makeError("{0}: cannot write: no free temporary name beside it", shown);
  bool written = writeAll(fd, contents);
  int err = written ? 0 : errno;
  if (::close(fd) && written) {
    written = false;
    err = errno;
  }
  if (written && ::renameat(dirFd, temporary.c_str(), dirFd, name.str().c_str()) == 0)
    return Error::success();
  if (written)
    err = errno;
  ::unlinkat(dirFd, temporary.c_str(), 0);
  return makeSystemError(err, "{0}: cannot write", shown);
}

// Why the directory open as `fd` is not private to us, or success.
Error checkPrivate(int fd, const std::string &path) {
  struct stat status = {};
  if (::fstat(fd, &status))
    return makeSystemError(errno, "{0}: cannot check the directory", path);
  if (status.st_uid != ::geteuid())
    return makeError("{0}: owned by user {1}, not by this process's user {2}: refused for "
                     "files holding map contents (choose a directory of ours)",
                     path, status.st_uid, ::geteuid());
  if (status.st_mode & 077) {
    char mode[8];
    std::snprintf(mode, sizeof(mode), "%04o", unsigned(status.st_mode & 07777));
    return makeError("{0}: mode {1} lets its group or others in: refused for files holding "
                     "map contents (chmod 700 it, or choose another directory)",
                     path, mode);
  }
  return Error::success();
}

// `path` opened as a directory without following a link at its last
// component, or the error saying what it is instead.
Expected<int> openDirectory(const std::string &path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0)
    return fd;
  int err = errno;
  struct stat status = {};
  if (err == ELOOP || (::lstat(path.c_str(), &status) == 0 && S_ISLNK(status.st_mode)))
    return makeError("{0}: a symbolic link: refused for files holding map contents (name "
                     "the directory itself)",
                     path);
  if (err == ENOTDIR)
    return makeError("{0}: not a directory", path);
  return makeSystemError(err, "{0}: cannot open the directory", path);
}

} // namespace

Error writeFile(const std::string &path, llvm::StringRef contents, FileAccess access) {
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  llvm::StringRef name = llvm::sys::path::filename(path);
  if (name.empty() || name == "." || name == "..")
    return makeError("{0}: cannot write: not a file name", path);
  std::string dir = parent.empty() ? "." : parent.str();
  int dirFd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dirFd < 0)
    return makeSystemError(errno, "{0}: cannot write (its directory)", path);
  Error written = writeIn(dirFd, name, contents, access, path);
  ::close(dirFd);
  return written;
}

Expected<PrivateDirectory> PrivateDirectory::open(const std::string &path) {
  llvm::StringRef parent = llvm::sys::path::parent_path(path);
  if (!parent.empty())
    if (std::error_code ec = llvm::sys::fs::create_directories(parent))
      return makeSystemError(ec.value(), "{0}: cannot create its parent directory", path);
  bool created = ::mkdir(path.c_str(), 0700) == 0;
  if (!created && errno != EEXIST)
    return makeSystemError(errno, "{0}: cannot create the directory", path);
  auto fd = openDirectory(path);
  if (!fd)
    return fd.takeError();
  // A umask may have taken bits from 0700 that we need; it adds none.
  if (created)
    ::fchmod(*fd, 0700);
  if (Error err = checkPrivate(*fd, path)) {
    ::close(*fd);
    return err;
  }
  return PrivateDirectory(path, *fd);
}

Error PrivateDirectory::checkIfPresent(const std::string &path) {
  struct stat status = {};
  if (::lstat(path.c_str(), &status) && errno == ENOENT)
    return Error::success();
  auto fd = openDirectory(path);
  if (!fd)
    return fd.takeError();
  Error checked = checkPrivate(*fd, path);
  ::close(*fd);
  return checked;
}

PrivateDirectory::PrivateDirectory(PrivateDirectory &&other) noexcept
    : dir(std::move(other.dir)), dirFd(std::exchange(other.dirFd, -1)) {}

PrivateDirectory &PrivateDirectory::operator=(PrivateDirectory &&other) noexcept {
  if (this != &other) {
    if (dirFd >= 0)
      ::close(dirFd);
    dir = std::move(other.dir);
    dirFd = std::exchange(other.dirFd, -1);
  }
  return *this;
}

PrivateDirectory::~PrivateDirectory() {
  if (dirFd >= 0)
    ::close(dirFd);
}

Error PrivateDirectory::write(llvm::StringRef name, llvm::StringRef contents) const {
  std::string shown = dir + "/" + name.str();
  if (name.empty() || name.contains('/') || name == "." || name == "..")
    return makeError("{0}: cannot write: not a file name", shown);
  return writeIn(dirFd, name, contents, FileAccess::OwnerOnly, shown);
}

} // namespace morpheus
