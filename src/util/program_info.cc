#include "berth/util/program_info.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "absl/flags/commandlineflag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "berth/util/flag_spelling.h"

namespace berth {

const char* berthVersion() { return BERTH_VERSION; }

namespace {

std::string helpText(std::string_view usage, bool list_flags) {
  std::string text(usage);
  if (!absl::EndsWith(text, "\n")) text += "\n";
  // A program without absl flags lists its options, --help and --version among them, itself.
  if (!list_flags) return text;
  text += "\nOptions:\n";
  std::vector<const absl::CommandLineFlag*> own;
  for (const auto& [name, flag] : absl::GetAllFlags()) {
    // absl's own (--flagfile, --fromenv, --helpfull, ...) are not the program's.
    if (absl::StrContains(flag->Filename(), "absl/")) continue;
    own.push_back(flag);
  }
  std::sort(own.begin(), own.end(),
            [](const absl::CommandLineFlag* a, const absl::CommandLineFlag* b) {
              return a->Name() < b->Name();
            });
  for (const absl::CommandLineFlag* flag : own) {
    const std::string default_value = flag->DefaultValue();
    absl::StrAppend(&text, "  --", flagSpelling(std::string(flag->Name())),
                    default_value.empty() ? "" : absl::StrCat(" (default ", default_value, ")"),
                    "\n      ", flag->Help(), "\n");
  }
  text +=
      "  --help\n      print this help and exit\n"
      "  --version\n      print the version and exit\n";
  return text;
}

}  // namespace

bool answerHelpOrVersion(int argc, const char* const* argv, std::string_view program,
                         std::string_view usage, bool list_flags) {
  bool help = false;
  bool version = false;
  for (int i = 1; i < argc; ++i) {
    const std::string_view arg = argv[i];
    help |= arg == "--help";
    version |= arg == "--version";
  }
  if (help) {
    std::fputs(helpText(usage, list_flags).c_str(), stdout);
  } else if (version) {
    std::printf("%.*s %s\n", static_cast<int>(program.size()), program.data(), berthVersion());
  }
  std::fflush(stdout);
  return help || version;
}

std::vector<char*> parseProgramFlags(int argc, char** argv, std::string_view program) {
  // absl keeps pointers into the arguments it is given, for as long as the program runs.
  static std::vector<std::string>* respelled = new std::vector<std::string>;
  static std::vector<char*>* pointers = new std::vector<char*>;
  absl::StatusOr<RespelledFlags> flags =
      respellFlags(std::vector<std::string>(argv, argv + argc), registeredFlags());
  const int program_size = static_cast<int>(program.size());
  if (!flags.ok()) {
    std::fprintf(stderr, "%.*s: %s\n", program_size, program.data(),
                 std::string(flags.status().message()).c_str());
    std::exit(1);
  }
  for (const std::string& note : flags->notes) {
    std::fprintf(stderr, "%.*s: %s\n", program_size, program.data(), note.c_str());
  }
  *respelled = std::move(flags->arguments);
  for (std::string& argument : *respelled) pointers->push_back(argument.data());
  pointers->push_back(nullptr);
  return absl::ParseCommandLine(static_cast<int>(respelled->size()), pointers->data());
}

}  // namespace berth
