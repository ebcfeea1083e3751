// Writing a file whole, and where: reproducers, reports, objects and
// benchmark results are read by people and tools after Morpheus wrote them,
// so none may be left half written; and Morpheus often runs as root, so a
// file it writes must never be one another user chose for it (a link
// planted at the name, or at a temporary name one could guess).
//
// Every write goes to a new file of an unpredictable name in the target's
// directory, created exclusively and without following a link
// (O_CREAT|O_EXCL|O_NOFOLLOW), then renamed over the target: a link at the
// target's name is replaced, never followed, and a failure never leaves a
// truncated file where the old one was.
#pragma once

#include "support/Error.h"

#include <llvm/ADT/StringRef.h>

#include <string>

namespace morpheus {

// Who may read a file Morpheus writes.
enum class FileAccess {
  Shared,    // as any new file: 0666 less the umask (objects, reports, results)
  OwnerOnly, // 0600: it holds map contents (reproducers)
};

// Writes `contents` to `path` as above. The error names the path.
Error writeFile(const std::string &path, llvm::StringRef contents,
                FileAccess access = FileAccess::Shared);

// A directory only Morpheus's user may enter, for files that hold map
// contents (refused candidates' reproducers). It is held open, so every file
// lands in the directory that was checked, whatever happens to its path.
class PrivateDirectory {
public:
  // Opens `path`, creating it with mode 0700 (and its missing parents as
  // any new directory) when it does not exist. Refused, with an error
  // naming the path and why: a symbolic link, not a directory, owned by
  // another user, or open to its group or others (mode & 077).
  static Expected<PrivateDirectory> open(const std::string &path);
  // The same checks of `path` when it exists; success when it does not
  // yet (open() creates it private).
  static Error checkIfPresent(const std::string &path);

  PrivateDirectory(PrivateDirectory &&other) noexcept;
  PrivateDirectory &operator=(PrivateDirectory &&other) noexcept;
  ~PrivateDirectory();

  const std::string &path() const { return dir; }
  // Writes `contents` to the file `name` in the directory, OwnerOnly, as
  // writeFile does. The error names the file.
  Error write(llvm::StringRef name, llvm::StringRef contents) const;

private:
  PrivateDirectory(std::string path, int fd) : dir(std::move(path)), dirFd(fd) {}
  std::string dir;
  int dirFd = -1;
};

} // namespace morpheus
