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

  // Read option `name` into `into` when given; untouched otherwise.
  Error readUnsigned(const std::string &name, uint32_t &into) const;
  Error readUnsigned(const std::string &name, uint64_t &into) const;
  Error readDuration(const std::string &name, double &milliseconds) const;

private:
  std::multimap<std::string, std::string> values;
  std::vector<std::string> rest;
  bool wantsHelp = false;
};

std::string formatOptions(const std::vector<OptionSpec> &specs);

// Prints `synopsis`, `description` and the options: to stdout for --help
// (returns 0), to stderr for a usage mistake (returns 2).
int printUsage(const Args &args, const char *synopsis, const char *description,
               const std::vector<OptionSpec> &specs);

// The exit-code convention of every command: 0 success, 1 failure, 2 bad
// usage. fail() prints "morpheus: <message>" and returns 1; usageError()
// prints the problem and returns 2.
int fail(Error err);
int usageError(const std::string &message);

// "1s", "250ms", "2.5s" -> milliseconds.
Expected<double> parseDuration(const std::string &text, const std::string &what);
Expected<uint64_t> parseUnsigned(const std::string &text, const std::string &what);

} // namespace morpheus::cli
