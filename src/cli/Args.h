// A small command-line parser: positional arguments plus --long options,
// each declared with its help text so `--help` is generated from the same
// table the parser reads and cannot drift from it.
#pragma once

#include "support/Error.h"

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::cli {

struct OptionSpec {
  std::string name;     // "--iface" (or "-I" for compiler flags)
  std::string argument; // placeholder for the value, "" for a switch
  std::string help;
  bool repeatable = false;
};

class Args {
public:
  // Parses argv[first..]; unknown options are errors naming the command.
  static Expected<Args> parse(const std::string &command, int argc, char **argv,
                              int first, const std::vector<OptionSpec> &specs);

  bool has(const std::string &name) const { return values.count(name); }
  std::optional<std::string> get(const std::string &name) const;
  std::vector<std::string> all(const std::string &name) const;
  const std::vector<std::string> &positional() const { return rest; }
  bool help() const { return wantsHelp; }

private:
  std::multimap<std::string, std::string> values;
  std::vector<std::string> rest;
  bool wantsHelp = false;
};

std::string formatOptions(const std::vector<OptionSpec> &specs);

// "1s", "250ms", "2.5s" -> milliseconds.
Expected<double> parseDuration(const std::string &text, const std::string &what);
Expected<uint64_t> parseUnsigned(const std::string &text, const std::string &what);

} // namespace morpheus::cli
