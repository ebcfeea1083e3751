// An owned file descriptor: closed when its owner goes, so every path out
// of a function (an early error return included) closes it once. Kernel
// objects reached by fd (BPF maps, programs, links; namespaces, sockets)
// live exactly as long as the FileDescriptor that holds them.
#pragma once

#include <unistd.h>

#include <utility>

namespace morpheus {

class FileDescriptor {
public:
  FileDescriptor() = default;
  // Takes `fd` over (a negative one: none).
  explicit FileDescriptor(int fd) : fd(fd) {}
  FileDescriptor(FileDescriptor &&other) noexcept : fd(other.release()) {}
  FileDescriptor &operator=(FileDescriptor &&other) noexcept {
    if (this != &other)
      reset(other.release());
    return *this;
  }
  FileDescriptor(const FileDescriptor &) = delete;
  FileDescriptor &operator=(const FileDescriptor &) = delete;
  ~FileDescriptor() { reset(); }

  int get() const { return fd; }
  bool valid() const { return fd >= 0; }
  // Gives the descriptor up without closing it: the caller closes it.
  int release() { return std::exchange(fd, -1); }
  // Closes the one held, if any, and holds `other` instead.
  void reset(int other = -1) {
    if (fd >= 0)
      ::close(fd);
    fd = other;
  }

private:
  int fd = -1;
};

} // namespace morpheus
