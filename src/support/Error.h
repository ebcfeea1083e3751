// One error convention for all of Morpheus: library code returns
// llvm::Error / llvm::Expected<T> and never throws or asserts on bad input;
// messages name the object they concern ("map 'policy': ...") so the CLI can
// print them verbatim. Only main() turns an error into an exit code.
#pragma once

#include <llvm/Support/Error.h>
#include <llvm/Support/FormatVariadic.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <system_error>

namespace morpheus {

template <typename T> using Expected = llvm::Expected<T>;
using Error = llvm::Error;

// A failure with a free-form message (bad input, unsupported program).
template <typename... Ts>
inline Error makeError(const char *fmt, Ts &&...args) {
  return llvm::createStringError(
      std::make_error_code(std::errc::invalid_argument), "%s",
      llvm::formatv(fmt, std::forward<Ts>(args)...).str().c_str());
}

// A failed system call or libbpf call: `err` is a negative or positive errno.
template <typename... Ts>
inline Error makeSystemError(int err, const char *fmt, Ts &&...args) {
  if (err < 0)
    err = -err;
  std::string msg = llvm::formatv(fmt, std::forward<Ts>(args)...).str();
  msg += ": ";
  msg += std::strerror(err);
  return llvm::createStringError(std::error_code(err, std::generic_category()),
                                 "%s", msg.c_str());
}

// The error code and the message of `err`, which it consumes: for callers
// that decide on the code (ENODEV: no such interface) and still report the
// message. {} and "" for success.
struct ErrorDetails {
  std::error_code code;
  std::string message;
};
inline ErrorDetails takeErrorDetails(Error err) {
  ErrorDetails info;
  llvm::handleAllErrors(std::move(err), [&](const llvm::ErrorInfoBase &part) {
    if (!info.message.empty())
      info.message += "; ";
    info.message += part.message();
    info.code = part.convertToErrorCode();
  });
  return info;
}

// The base of every error class of Morpheus's own: a kind of failure some
// caller decides on (Error::isA<T>, llvm::handleErrors), carrying what
// that caller needs as data (a verifier's log, the fields of a map that
// differ). Deciding on a message's text or on an errno guessed from it is
// never right: the text is for people, and every makeError says EINVAL.
// withContext prefixes the message and keeps the class and its data.
class TypedError : public llvm::ErrorInfo<TypedError> {
public:
  inline static char ID = 0;

  void log(llvm::raw_ostream &out) const final { out << context << describe(); }
  // `outer: ` before what the message said so far.
  void addContext(const std::string &outer) { context = outer + ": " + context; }

protected:
  // The message without the context added on the way up.
  virtual std::string describe() const = 0;

private:
  std::string context;
};

// Prefixes every message in `err` with `context: `. A TypedError stays of its
// class with its data; any other error becomes a string error with its
// error code.
inline Error withContext(Error err, const std::string &context) {
  return llvm::handleErrors(
      std::move(err),
      [&](std::unique_ptr<TypedError> typed) -> Error {
        typed->addContext(context);
        return Error(std::move(typed));
      },
      [&](std::unique_ptr<llvm::ErrorInfoBase> other) -> Error {
        return llvm::createStringError(other->convertToErrorCode(), "%s: %s", context.c_str(),
                                       other->message().c_str());
      });
}

template <typename T>
Expected<T> withContext(Expected<T> value, const std::string &context) {
  if (!value)
    return withContext(value.takeError(), context);
  return value;
}

} // namespace morpheus
