#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace berth {

// berth's release, as the build names it (meson's project version): what --version, berthctl
// status and the fleet's instance reports show.
const char* berthVersion();

// The GNU conventions every berth program keeps, ahead of its own parsing, since scripts and
// package checks rely on them (absl's own --help exits 1):
//   - `--help` prints `usage` to stdout, then, where the program takes absl flags
//     (`list_flags`), each of its own flags with its default and help, and --help and
//     --version (a program without them lists its options in `usage`);
//   - `--version` prints "PROGRAM VERSION".
// Either anywhere on the command line, after "--" too; `--help` wins over `--version`. Returns
// true when one was given and answered: the program then exits 0.
bool answerHelpOrVersion(int argc, const char* const* argv, std::string_view program,
                         std::string_view usage, bool list_flags);

// absl::ParseCommandLine over `argc`/`argv` respelled to berth's one flag style
// (util/flag_spelling.h): the old underscore spellings print a note "PROGRAM: --x_y is now
// spelled --x-y; ...", and an unknown flag prints "PROGRAM: unknown flag --z; did you mean
// --y?" and exits 1. Returns the positional arguments, argv[0] first.
std::vector<char*> parseProgramFlags(int argc, char** argv, std::string_view program);

}  // namespace berth
