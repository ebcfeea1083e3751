#include "support/Log.h"

#include <memory>

namespace morpheus {

namespace {

std::unique_ptr<Log> &processLogSlot() {
  static std::unique_ptr<Log> log = std::make_unique<Log>(llvm::outs(), llvm::errs());
  return log;
}

} // namespace

const char *logLevelName(LogLevel level) {
  switch (level) {
  case LogLevel::Error:
    return "error";
  case LogLevel::Warning:
    return "warning";
  case LogLevel::Info:
    return "info";
  case LogLevel::Debug:
    return "debug";
  }
  return "unknown";
}

std::string Log::aboutSubject(const llvm::Twine &text) const {
  std::string whole = text.str();
  if (subject.empty())
    return whole;
  std::string prefixed;
  for (size_t start = 0; start < whole.size();) {
    size_t end = whole.find('\n', start);
    end = end == std::string::npos ? whole.size() : end + 1;
    prefixed += "[" + subject + "] " + whole.substr(start, end - start);
    start = end;
  }
  return prefixed;
}

void Log::writeJson(nlohmann::json line) {
  if (!subject.empty())
    line["name"] = subject;
  out << line.dump() << "\n";
  out.flush();
}

void Log::write(LogLevel wanted, const llvm::Twine &message) {
  if (!enabled(wanted))
    return;
  if (format == LogFormat::Json) {
    writeJson({{"event", "log"}, {"level", logLevelName(wanted)}, {"message", message.str()}});
    return;
  }
  if (wanted >= LogLevel::Info)
    errors << aboutSubject(message) << "\n";
  else
    errors << program << ": " << (wanted == LogLevel::Warning ? "warning: " : "")
           << aboutSubject(message) << "\n";
  errors.flush();
}

void Log::external(LogLevel wanted, llvm::StringRef source, llvm::StringRef message) {
  if (!enabled(wanted))
    return;
  message.consume_back("\n");
  if (format == LogFormat::Json) {
    writeJson({{"event", "log"},
               {"level", logLevelName(wanted)},
               {"source", source.str()},
               {"message", message.str()}});
    return;
  }
  errors << aboutSubject(source + ": " + message) << "\n";
  errors.flush();
}

void Log::record(llvm::StringRef event, nlohmann::json fields, const llvm::Twine &text) {
  if (!enabled(LogLevel::Info))
    return;
  if (format == LogFormat::Json) {
    nlohmann::json line = {{"event", event.str()}};
    // `{}` at a call site is a JSON null, not an empty object: a record
    // with nothing to add.
    if (!fields.is_null())
      line.update(fields);
    writeJson(std::move(line));
    return;
  }
  out << aboutSubject(text);
  out.flush();
}

Log &processLog() { return *processLogSlot(); }

void configureProcessLog(LogLevel level, LogFormat format, std::string program) {
  processLogSlot() =
      std::make_unique<Log>(llvm::outs(), llvm::errs(), level, format, std::move(program));
}

} // namespace morpheus
