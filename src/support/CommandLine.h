// The command lines of Morpheus (`morpheus` and its subcommands, `morpheus
// nf NAME COMMAND`, `morpheus bench`, the tools), on CLI11: a tree of
// commands with typed options whose --help is generated from the same
// declarations the parser reads, and one exit-code convention:
//   0  success (and --help, printed on stdout)
//   1  failure: the command ran and reported an error ("morpheus: ...")
//   2  bad usage: unknown option or command, bad value, missing argument;
//      the message names the command and the option, on stderr.
// CLI11 reports parse errors by exception; they are caught here and never
// leave run().
#pragma once

#include "support/Error.h"

#include <CLI/CLI.hpp>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

namespace morpheus::commandline {

// What a command does once its command line parsed (`command` is the
// command itself, for usageError): the exit status.
using Body = std::function<int(const CLI::App &command)>;

// A top-level command line (`morpheus`, `morpheus-demo`): `description`
// heads its --help, `footer` (optional) follows it. With a body it is a
// command of its own (a tool); without, a group of subcommands.
std::unique_ptr<CLI::App> makeApp(const std::string &name, const std::string &description,
                                  const std::string &footer = "", Body body = nullptr);

// Adds subcommand `name` to `parent`, listed with `summary`; its --help
// shows `summary` and `description`. `body` runs when it is the command
// selected. Without a body it is a group: its subcommands are the commands,
// and naming the group alone prints its help on stderr (exit 2).
CLI::App &addCommand(CLI::App &parent, const std::string &name, const std::string &summary,
                     const std::string &description, Body body);
inline CLI::App &addGroup(CLI::App &parent, const std::string &name,
                          const std::string &summary, const std::string &description = "") {
  return addCommand(parent, name, summary, description, nullptr);
}

// Parses argv (argv[0] is the program, as main receives it) and runs the
// selected command's body, with the exit-code convention above.
int run(CLI::App &app, int argc, const char *const *argv);
int run(CLI::App &app, const std::vector<std::string> &words); // words[0] is the program

// "morpheus: <message>" on stderr; returns 1 (the command failed).
int fail(Error err);
// "morpheus: <command>: <message> (see '<command> --help')" on stderr;
// returns 2. For usage mistakes only the command can see after parsing.
int usageError(const CLI::App &command, const std::string &message);

// "morpheus run", "morpheus nf router load-routes": a command's full name.
std::string commandPath(const CLI::App &command);
// The --help text of `command` itself.
std::string helpText(const CLI::App &command);

// A validator that takes one of the names of `choices` and passes on its
// value (for enums and flags); a bad name is a usage error listing them.
template <typename T> CLI::Validator oneOf(const std::map<std::string, T> &choices) {
  std::string names;
  for (const auto &[name, value] : choices)
    names += (names.empty() ? "" : ", ") + name;
  return CLI::Validator(
      [choices, names](std::string &input) -> std::string {
        auto found = choices.find(input);
        if (found == choices.end())
          return "'" + input + "' is not one of " + names;
        if constexpr (std::is_enum_v<T>)
          input = std::to_string(static_cast<std::underlying_type_t<T>>(found->second));
        else
          input = std::to_string(found->second);
        return "";
      },
      ""); // no description: the option's type name shows the choices
}

// "1s", "250ms", "2.5s", "2" (seconds) -> milliseconds; std::nullopt if not
// a positive duration.
std::optional<double> parseDuration(const std::string &text);

// An option taking a duration ("1s", "250ms", "2.5s"; a bare number is
// seconds), stored in milliseconds.
CLI::Option *addDuration(CLI::App &command, const std::string &name, double &milliseconds,
                         const std::string &help);
// The same for an option that may be left out: std::nullopt then.
CLI::Option *addDuration(CLI::App &command, const std::string &name,
                         std::optional<double> &milliseconds, const std::string &help);

} // namespace morpheus::commandline
