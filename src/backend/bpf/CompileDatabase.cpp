#include "backend/bpf/CompileDatabase.h"

#include <llvm/ADT/SmallString.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/Path.h>
#include <nlohmann/json.hpp>

#include <optional>

namespace morpheus::bpf {

namespace {

std::string absoluteIn(const std::string &directory, llvm::StringRef path) {
  llvm::SmallString<256> joined(path);
  if (!llvm::sys::path::is_absolute(joined)) {
    joined = directory;
    llvm::sys::path::append(joined, path);
  }
  llvm::SmallString<256> real;
  if (!llvm::sys::fs::real_path(joined, real))
    return real.str().str();
  llvm::sys::path::remove_dots(joined, /*remove_dot_dot=*/true);
  return joined.str().str();
}

// A compile command as words: "arguments" as given, or "command" split the
// way a shell would for the quoting compile databases use.
std::vector<std::string> wordsOf(const nlohmann::json &entry) {
  std::vector<std::string> words;
  if (entry.contains("arguments") && entry["arguments"].is_array()) {
    for (const auto &word : entry["arguments"])
      if (word.is_string())
        words.push_back(word.get<std::string>());
    return words;
  }
  std::string command = entry.value("command", "");
  std::string word;
  bool inWord = false;
  char quote = 0;
  for (size_t i = 0; i < command.size(); ++i) {
    char c = command[i];
    if (quote) {
      if (c == quote)
        quote = 0;
      else if (c == '\\' && quote == '"' && i + 1 < command.size())
        word += command[++i];
      else
        word += c;
    } else if (c == '"' || c == '\'') {
      quote = c;
      inWord = true;
    } else if (c == '\\' && i + 1 < command.size()) {
      word += command[++i];
      inWord = true;
    } else if (c == ' ' || c == '\t') {
      if (inWord)
        words.push_back(word);
      word.clear();
      inWord = false;
    } else {
      word += c;
      inWord = true;
    }
  }
  if (inWord)
    words.push_back(word);
  return words;
}

} // namespace

Expected<std::vector<std::string>> compileDatabaseFlags(const std::string &database,
                                                        const std::string &source) {
  auto buffer = llvm::MemoryBuffer::getFile(database);
  if (!buffer)
    return makeSystemError(buffer.getError().value(), "{0}: cannot read the compile database",
                           database);
  nlohmann::json entries = nlohmann::json::parse((*buffer)->getBuffer().begin(),
                                                 (*buffer)->getBuffer().end(), nullptr, false);
  if (!entries.is_array())
    return makeError("{0}: not a compile database (expected a JSON array of "
                     "{{\"directory\", \"file\", \"arguments\" or \"command\"} entries)",
                     database);
  std::string wanted = absoluteIn(".", source);
  for (const auto &entry : entries) {
    if (!entry.is_object() || !entry.contains("file") || !entry["file"].is_string())
      continue;
    std::string directory = entry.value("directory", ".");
    if (absoluteIn(directory, entry["file"].get<std::string>()) != wanted)
      continue;
    std::vector<std::string> words = wordsOf(entry), flags;
    static const char *const PathFlags[] = {"-I", "-isystem", "-iquote", "-idirafter",
                                            "-include"};
    for (size_t i = 1; i < words.size(); ++i) {
      llvm::StringRef word = words[i];
      // "-I dir", "-Idir", "-isystem dir", ...: the path made absolute.
      std::optional<std::string> path;
      llvm::StringRef pathFlag;
      for (llvm::StringRef flag : PathFlags) {
        if (word == flag && i + 1 < words.size())
          path = words[++i];
        else if (flag == "-I" && word.starts_with(flag) && word.size() > flag.size())
          path = word.drop_front(flag.size()).str();
        if (path) {
          pathFlag = flag;
          break;
        }
      }
      if (path) {
        flags.push_back(pathFlag.str());
        flags.push_back(absoluteIn(directory, *path));
        continue;
      }
      if ((word == "-D" || word == "-U") && i + 1 < words.size()) {
        flags.push_back(word.str() + words[++i]);
      } else if (word.starts_with("-D") || word.starts_with("-U") || word.starts_with("-std=") ||
                 word.starts_with("-mcpu=") || word.starts_with("-mattr=") ||
                 word == "-mlittle-endian" || word == "-mbig-endian") {
        flags.push_back(word.str());
      }
    }
    return flags;
  }
  return makeError("{0}: no entry for {1} in the compile database ({2} entries): pass the "
                   "file as the build names it, or its flags with -I/-D/--cflags",
                   database, wanted, entries.size());
}

} // namespace morpheus::bpf
