#include "berth/util/command_line.h"

#include <cstring>

namespace berth {

SplitCommandLine splitAtDoubleDash(int argc, const char* const* argv, bool without_separator_own) {
  SplitCommandLine split;
  if (argc < 1) return split;
  split.eal.emplace_back(argv[0]);
  split.own.emplace_back(argv[0]);
  int separator = argc;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--") == 0) {
      separator = i;
      break;
    }
  }
  if (separator == argc) {
    auto& all = without_separator_own ? split.own : split.eal;
    for (int i = 1; i < argc; ++i) all.emplace_back(argv[i]);
    return split;
  }
  for (int i = 1; i < separator; ++i) split.eal.emplace_back(argv[i]);
  for (int i = separator + 1; i < argc; ++i) split.own.emplace_back(argv[i]);
  return split;
}

std::vector<char*> argvOf(std::vector<std::string>& arguments) {
  std::vector<char*> argv;
  argv.reserve(arguments.size());
  for (std::string& argument : arguments) argv.push_back(argument.data());
  return argv;
}

}  // namespace berth
