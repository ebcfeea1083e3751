// The one logger of Morpheus's product code: messages for people with a
// level, and the records `morpheus run` writes (cycle outcomes, status
// lines), as text lines or as JSON lines (one object a record).
//
// Built on LLVM's raw_ostream, which every layer already writes to, rather
// than on spdlog: what we need is levels, a program-name prefix and JSON
// lines of our own fields, not sinks, rotation or formatting patterns, and
// the daemon's tests hand it their own streams.
//
// Text (the default) is what Morpheus always printed: records on `out`
// exactly as given, errors and warnings on `errors` as "PROGRAM: message" /
// "PROGRAM: warning: message", information and debugging there as given. JSON: every record and message is one
// object on `out`: {"event": ..., fields...} or {"event": "log", "level":
// ..., "message": ...}.
#pragma once

#include <llvm/ADT/StringRef.h>
#include <llvm/ADT/Twine.h>
#include <llvm/Support/raw_ostream.h>
#include <nlohmann/json.hpp>

#include <string>

namespace morpheus {

enum class LogLevel { Error, Warning, Info, Debug }; // each includes those before it
enum class LogFormat { Text, Json };

class Log {
public:
  // `subject`: what every line is about when one process serves several
  // (the agent's program name): "[SUBJECT] " starts each text line, and
  // JSON lines carry "name": SUBJECT.
  Log(llvm::raw_ostream &out, llvm::raw_ostream &errors, LogLevel level = LogLevel::Info,
      LogFormat format = LogFormat::Text, std::string program = "morpheus",
      std::string subject = "")
      : out(out), errors(errors), level(level), format(format), program(std::move(program)),
        subject(std::move(subject)) {}

  bool enabled(LogLevel wanted) const { return wanted <= level; }
  LogLevel threshold() const { return level; }
  LogFormat outputFormat() const { return format; }

  void error(const llvm::Twine &message) { write(LogLevel::Error, message); }
  void warning(const llvm::Twine &message) { write(LogLevel::Warning, message); }
  // Info and debug messages (progress, notes) go to `errors` in text,
  // unprefixed, so they never mix with a command's output.
  void info(const llvm::Twine &message) { write(LogLevel::Info, message); }
  void debug(const llvm::Twine &message) { write(LogLevel::Debug, message); }

  // A message of another library's (libbpf): "SOURCE: message" on `errors`
  // in text, whatever its level, as that library would print it.
  void external(LogLevel wanted, llvm::StringRef source, llvm::StringRef message);

  // A record at info level: `text` (its lines, as given) in text, `fields`
  // with "event": `event` in JSON.
  void record(llvm::StringRef event, nlohmann::json fields, const llvm::Twine &text);

private:
  void write(LogLevel wanted, const llvm::Twine &message);
  // `text` with every line started by "[subject] " (as it is without one).
  std::string aboutSubject(const llvm::Twine &text) const;
  void writeJson(nlohmann::json line);

  llvm::raw_ostream &out, &errors;
  LogLevel level;
  LogFormat format;
  std::string program;
  std::string subject;
};

// The process's log, on stdout/stderr: commands, the network functions and
// support code write to it; `morpheus -v/--quiet` set its level.
Log &processLog();
void configureProcessLog(LogLevel level, LogFormat format, std::string program);

const char *logLevelName(LogLevel level);

} // namespace morpheus
