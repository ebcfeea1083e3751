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

void Log::write(LogLevel wanted, const llvm::Twine &message) {
  if (!enabled(wanted))
    return;
  if (format == LogFormat::Json) {
    nlohmann::json line = {
        {"event", "log"}, {"level", logLevelName(wanted)}, {"message", message.str()}};
    out << line.dump() << "\n";
    out.flush();
    return;
  }
  if (wanted >= LogLevel::Info)
    errors << message << "\n";
  else
    errors << program << ": " << (wanted == LogLevel::Warning ? "warning: " : "") << message
           << "\n";
  errors.flush();
}

void Log::external(LogLevel wanted, llvm::StringRef source, llvm::StringRef message) {
  if (!enabled(wanted))
    return;
  message.consume_back("\n");
  if (format == LogFormat::Json) {
    nlohmann::json line = {{"event", "log"},
                           {"level", logLevelName(wanted)},
                           {"source", source.str()},
                           {"message", message.str()}};
    out << line.dump() << "\n";
    out.flush();
    return;
  }
  errors << source << ": " << message << "\n";
  errors.flush();
}

void Log::record(llvm::StringRef event, nlohmann::json fields, const llvm::Twine &text) {
  if (!enabled(LogLevel::Info))
    return;
  if (format == LogFormat::Json) {
    nlohmann::json line = {{"event", event.str()}};
    line.update(fields);
    out << line.dump() << "\n";
  } else {
    out << text;
  }
  out.flush();
}

Log &processLog() { return *processLogSlot(); }

void configureProcessLog(LogLevel level, LogFormat format, std::string program) {
  processLogSlot() =
      std::make_unique<Log>(llvm::outs(), llvm::errs(), level, format, std::move(program));
}

} // namespace morpheus
