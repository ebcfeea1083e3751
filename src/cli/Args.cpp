#include "cli/Args.h"

#include <cstdio>
#include <cstdlib>

namespace morpheus::cli {

Expected<Args> Args::parse(const std::string &command, int argc, char **argv,
                           int first, const std::vector<OptionSpec> &specs) {
  Args args;
  for (int i = first; i < argc; ++i) {
    std::string word = argv[i];
    if (word == "--help" || word == "-h") {
      args.wantsHelp = true;
      continue;
    }
    if (word.size() < 2 || word[0] != '-') {
      args.rest.push_back(word);
      continue;
    }
    // Compiler-style -Ifoo / -DX=1 glue their value to the flag.
    std::string name = word, value;
    bool glued = false;
    if (word[1] != '-' && word.size() > 2) {
      name = word.substr(0, 2);
      value = word.substr(2);
      glued = true;
    } else if (auto eq = word.find('='); eq != std::string::npos) {
      name = word.substr(0, eq);
      value = word.substr(eq + 1);
      glued = true;
    }
    const OptionSpec *spec = nullptr;
    for (const OptionSpec &candidate : specs)
      if (candidate.name == name)
        spec = &candidate;
    if (!spec)
      return makeError("{0}: unknown option '{1}' (see 'morpheus {0} --help')",
                       command, word);
    if (spec->argument.empty()) {
      args.values.emplace(name, "");
      continue;
    }
    if (!glued) {
      if (i + 1 >= argc)
        return makeError("{0}: option {1} needs a value ({2})", command, name,
                         spec->argument);
      value = argv[++i];
    }
    if (!spec->repeatable && args.values.count(name))
      return makeError("{0}: option {1} given twice", command, name);
    args.values.emplace(name, value);
  }
  return args;
}

std::optional<std::string> Args::get(const std::string &name) const {
  auto it = values.find(name);
  if (it == values.end())
    return std::nullopt;
  return it->second;
}

std::vector<std::string> Args::all(const std::string &name) const {
  std::vector<std::string> out;
  auto [begin, end] = values.equal_range(name);
  for (auto it = begin; it != end; ++it)
    out.push_back(it->second);
  return out;
}

Error Args::readUnsigned(const std::string &name, uint64_t &into) const {
  if (auto text = get(name)) {
    auto value = parseUnsigned(*text, name);
    if (!value)
      return value.takeError();
    into = *value;
  }
  return Error::success();
}

Error Args::readUnsigned(const std::string &name, uint32_t &into) const {
  uint64_t wide = into;
  if (Error err = readUnsigned(name, wide))
    return err;
  if (wide > UINT32_MAX)
    return makeError("{0}: {1} is too large", name, wide);
  into = wide;
  return Error::success();
}

Error Args::readDuration(const std::string &name, double &milliseconds) const {
  if (auto text = get(name)) {
    auto value = parseDuration(*text, name);
    if (!value)
      return value.takeError();
    milliseconds = *value;
  }
  return Error::success();
}

int printUsage(const Args &args, const char *synopsis, const char *description,
               const std::vector<OptionSpec> &specs) {
  std::fprintf(args.help() ? stdout : stderr, "usage: %s\n\n%s\n%s", synopsis,
               description, formatOptions(specs).c_str());
  return args.help() ? 0 : 2;
}

std::string formatOptions(const std::vector<OptionSpec> &specs) {
  std::string out;
  for (const OptionSpec &spec : specs) {
    std::string left = "  " + spec.name +
                       (spec.argument.empty() ? "" : " " + spec.argument);
    if (left.size() < 28)
      left.resize(28, ' ');
    else
      left += "\n" + std::string(28, ' ');
    out += left + spec.help + "\n";
  }
  return out;
}

int fail(Error err) {
  std::fprintf(stderr, "morpheus: %s\n", llvm::toString(std::move(err)).c_str());
  return 1;
}

int usageError(const std::string &message) {
  std::fprintf(stderr, "morpheus: %s\n", message.c_str());
  return 2;
}

Expected<double> parseDuration(const std::string &text, const std::string &what) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  double scale = unit == "ms" ? 1 : unit == "s" || unit.empty() ? 1000 : -1;
  if (end == text.c_str() || scale < 0 || value <= 0)
    return makeError("{0}: '{1}' is not a duration like 1s or 250ms", what, text);
  return value * scale;
}

Expected<uint64_t> parseUnsigned(const std::string &text, const std::string &what) {
  char *end = nullptr;
  errno = 0;
  unsigned long long value = std::strtoull(text.c_str(), &end, 0);
  if (text.empty() || *end || errno || text[0] == '-')
    return makeError("{0}: '{1}' is not a non-negative integer", what, text);
  return value;
}

} // namespace morpheus::cli
