#include "support/CommandLine.h"

#include "support/Log.h"

#include <cctype>
#include <cstdio>
#include <cstdlib>
#include <sstream>

namespace morpheus::commandline {

namespace {

// A CLI11 command that knows what to run once selected.
class Command : public CLI::App {
public:
  Command(const std::string &summary, const std::string &name, Body body)
      : CLI::App(summary, name), body(std::move(body)) {}

  Body body;
};

constexpr size_t HelpColumn = 30, HelpWidth = 92;

// `text` broken into lines of at most `width` characters at spaces.
std::string wrap(const std::string &text, size_t width) {
  std::string out, line;
  std::istringstream words(text);
  for (std::string word; words >> word;) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      out += line + "\n";
      line.clear();
    }
    line += (line.empty() ? "" : " ") + word;
  }
  return out + line;
}

// Help as Morpheus always printed it: the usage line first, then what the
// command does, then its arguments, options and commands, each described
// in a column.
class HelpFormatter : public CLI::Formatter {
public:
  HelpFormatter() {
    label("Usage", "usage");
    label("SUBCOMMAND", "COMMAND");
    label("SUBCOMMANDS", "COMMANDS");
    column_width(HelpColumn);
  }

  std::string make_option_desc(const CLI::Option *option) const override {
    return wrap(option->get_description(), HelpWidth - HelpColumn);
  }

  std::string make_subcommand(const CLI::App *command) const override {
    std::stringstream out;
    CLI::detail::format_help(out, command->get_display_name(true),
                             wrap(command->get_description(), HelpWidth - HelpColumn),
                             HelpColumn);
    return out.str();
  }

  std::string make_help(const CLI::App *app, std::string name,
                        CLI::AppFormatMode mode) const override {
    if (mode == CLI::AppFormatMode::Sub)
      return make_expanded(app);
    std::string out = make_usage(app, name) + "\n";
    // The footer holds the long description; the description is the
    // one-line summary the parent's list shows.
    const std::string &text = app->get_footer().empty() ? app->get_description()
                                                        : app->get_footer();
    if (!text.empty())
      out += text + (text.back() == '\n' ? "" : "\n");
    out += make_positionals(app) + make_groups(app, mode) + make_subcommands(app, mode);
    return out;
  }
};

std::shared_ptr<HelpFormatter> formatter() {
  static auto shared = std::make_shared<HelpFormatter>();
  return shared;
}

void configure(CLI::App &app) {
  app.formatter(formatter());
  app.set_help_flag("-h,--help", "print this help and exit");
}

// The command the words selected: the innermost subcommand parsed.
const CLI::App &selected(const CLI::App &app) {
  const CLI::App *current = &app;
  for (;;) {
    std::vector<CLI::App *> chosen = current->get_subcommands();
    if (chosen.empty())
      return *current;
    current = chosen.front();
  }
}

const CLI::App &root(const CLI::App &command) {
  const CLI::App *current = &command;
  while (current->get_parent())
    current = current->get_parent();
  return *current;
}

// CLI11's message, as the middle of a sentence.
std::string describe(const CLI::ParseError &error) {
  std::string message = error.what();
  if (message.size() > 1 && std::isupper(static_cast<unsigned char>(message[0])) &&
      std::islower(static_cast<unsigned char>(message[1])))
    message[0] = char(std::tolower(static_cast<unsigned char>(message[0])));
  return message;
}


} // namespace

std::optional<double> parseDuration(const std::string &text) {
  char *end = nullptr;
  double value = std::strtod(text.c_str(), &end);
  std::string unit = end ? end : "";
  double scale = unit == "ms" ? 1 : unit == "s" || unit.empty() ? 1000 : -1;
  if (end == text.c_str() || scale < 0 || !(value > 0))
    return std::nullopt;
  return value * scale;
}

std::unique_ptr<CLI::App> makeApp(const std::string &name, const std::string &description,
                                  const std::string &footer, Body body) {
  auto app = std::make_unique<Command>(description, name, std::move(body));
  configure(*app);
  app->footer(footer.empty() ? "" : description + "\n\n" + footer);
  return app;
}

CLI::App &addCommand(CLI::App &parent, const std::string &name, const std::string &summary,
                     const std::string &description, Body body) {
  CLI::App *command =
      parent.add_subcommand(std::make_shared<Command>(summary, name, std::move(body)));
  configure(*command);
  command->group("Commands");
  command->footer(description);
  return *command;
}

std::string commandPath(const CLI::App &command) {
  std::string path = command.get_name();
  for (const CLI::App *up = command.get_parent(); up; up = up->get_parent())
    path = up->get_name() + " " + path;
  return path;
}

std::string helpText(const CLI::App &command) {
  return command.get_formatter()->make_help(&command, commandPath(command),
                                            CLI::AppFormatMode::Normal);
}

int fail(Error err) {
  processLog().error(llvm::toString(std::move(err)));
  return 1;
}

int usageError(const CLI::App &command, const std::string &message) {
  std::string path = commandPath(command);
  std::string program = root(command).get_name();
  std::string where = path == program ? "" : path.substr(program.size() + 1) + ": ";
  std::fprintf(stderr, "%s: %s%s (see '%s --help')\n", program.c_str(), where.c_str(),
               message.c_str(), path.c_str());
  return 2;
}

namespace {

// A repeatable option takes one value each time it is given (`-I a -I b
// PROG`): CLI11's vector options would otherwise go on taking words, the
// positional PROG after them included ("PROG is required").
void oneValuePerOccurrence(CLI::App &command) {
  for (CLI::Option *option : command.get_options())
    if (option->nonpositional() && option->get_items_expected_max() > 1)
      option->allow_extra_args(false);
  for (CLI::App *sub : command.get_subcommands([](CLI::App *) { return true; }))
    oneValuePerOccurrence(*sub);
}

} // namespace

int run(CLI::App &app, int argc, const char *const *argv) {
  oneValuePerOccurrence(app);
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp &) {
    std::fputs(app.help().c_str(), stdout); // the selected command's help
    return 0;
  } catch (const CLI::CallForAllHelp &) {
    std::fputs(app.help("", CLI::AppFormatMode::All).c_str(), stdout);
    return 0;
  } catch (const CLI::ExtrasError &error) {
    // Name the first word nobody took, the way people think of it.
    const CLI::App &command = selected(app);
    std::vector<std::string> extra = command.remaining();
    if (extra.empty())
      return usageError(command, describe(error));
    const std::string &word = extra.front();
    bool hasCommands = !command.get_subcommands({}).empty();
    return usageError(command, word.size() > 1 && word[0] == '-' ? "unknown option '" + word + "'"
                               : hasCommands ? "unknown command '" + word + "'"
                                             : "unexpected argument '" + word + "'");
  } catch (const CLI::ParseError &error) {
    return usageError(selected(app), describe(error));
  }
  const CLI::App &command = selected(app);
  const auto *runnable = dynamic_cast<const Command *>(&command);
  if (!runnable || !runnable->body) {
    // A group named alone: say what it offers, as a usage error.
    std::fputs(app.help().c_str(), stderr);
    return 2;
  }
  return runnable->body(command);
}

int run(CLI::App &app, const std::vector<std::string> &words) {
  std::vector<const char *> argv;
  for (const std::string &word : words)
    argv.push_back(word.c_str());
  argv.push_back(nullptr);
  return run(app, int(words.size()), argv.data());
}

// The one duration option; `store` receives the milliseconds.
static CLI::Option *addDuration(CLI::App &command, const std::string &name,
                                std::function<void(double)> store, const std::string &help) {
  return command
      .add_option_function<std::string>(
          name,
          [store, name](const std::string &text) {
            std::optional<double> parsed = parseDuration(text);
            if (!parsed)
              throw CLI::ValidationError(name, "'" + text +
                                                   "' is not a duration like 1s or 250ms");
            store(*parsed);
          },
          help)
      ->type_name("DURATION");
}

CLI::Option *addDuration(CLI::App &command, const std::string &name, double &milliseconds,
                         const std::string &help) {
  return addDuration(command, name, [&milliseconds](double parsed) { milliseconds = parsed; },
                     help);
}

CLI::Option *addDuration(CLI::App &command, const std::string &name,
                         std::optional<double> &milliseconds, const std::string &help) {
  return addDuration(command, name, [&milliseconds](double parsed) { milliseconds = parsed; },
                     help);
}

} // namespace morpheus::commandline
