#include "support/ProgramFile.h"

#include <llvm/ADT/StringRef.h>
#include <llvm/Support/Path.h>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

namespace morpheus {

namespace {

// How many first bytes tell text from binary data.
constexpr size_t SniffedBytes = 4096;

const char *kindOf(mode_t mode) {
  if (S_ISCHR(mode))
    return "a character device";
  if (S_ISBLK(mode))
    return "a block device";
  if (S_ISFIFO(mode))
    return "a FIFO";
  if (S_ISSOCK(mode))
    return "a socket";
  return "not a file";
}

bool isTextByte(unsigned char byte) {
  return byte >= 0x20 || byte == '\t' || byte == '\n' || byte == '\r' || byte == '\f' ||
         byte == '\v';
}

} // namespace

Expected<ProgramFormat> programFormat(const std::string &path) {
  struct stat status = {};
  if (::stat(path.c_str(), &status))
    return errno == ENOENT ? makeError("{0}: no such file", path)
                           : makeSystemError(errno, "{0}: cannot open", path);
  if (S_ISDIR(status.st_mode))
    return makeError("{0}: is a directory, not a program (C, LLVM IR or bitcode)", path);
  if (!S_ISREG(status.st_mode))
    return makeError("{0}: not a regular file ({1}): a program is a C, LLVM IR or bitcode "
                     "file",
                     path, kindOf(status.st_mode));
  if (status.st_size == 0)
    return makeError("{0}: empty, not C, LLVM IR or bitcode", path);
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0)
    return makeSystemError(errno, "{0}: cannot open", path);
  char first[SniffedBytes];
  ssize_t length = ::read(fd, first, sizeof(first));
  int err = errno;
  ::close(fd);
  if (length < 0)
    return makeSystemError(err, "{0}: cannot read", path);
  llvm::StringRef head(first, size_t(length));
  if (head.starts_with("BC\xC0\xDE") || head.starts_with("\xDE\xC0\x17\x0B"))
    return ProgramFormat::Bitcode; // raw, or in its wrapper header
  if (head.starts_with("\x7F" "ELF"))
    return makeError("{0}: an ELF object, not C, LLVM IR or bitcode (Morpheus specializes "
                     "from the source: give the .c, or IR from clang -target bpf "
                     "-emit-llvm)",
                     path);
  llvm::StringRef extension = llvm::sys::path::extension(path);
  if (extension == ".bc")
    return makeError("{0}: not LLVM bitcode (it does not start with bitcode's magic number)",
                     path);
  if (!std::all_of(head.begin(), head.end(), [](char c) { return isTextByte(c); }))
    return makeError("{0}: binary data, not C, LLVM IR or bitcode", path);
  if (extension == ".c" || extension == ".i")
    return ProgramFormat::C;
  if (extension == ".ll")
    return ProgramFormat::IrText;
  return makeError("{0}: not C, LLVM IR or bitcode by its name (C ends in .c, LLVM IR in .ll, "
                   "bitcode in .bc)",
                   path);
}

} // namespace morpheus
