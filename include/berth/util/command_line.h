#pragma once

#include <string>
#include <vector>

namespace berth {

// A command line split at its first "--", as testpmd and DPDK's examples take theirs: the EAL's
// arguments before it, the program's own after it. Both keep argv[0] first, so each can go to
// its parser as a whole command line.
struct SplitCommandLine {
  std::vector<std::string> eal;
  std::vector<std::string> own;
};
// Without a "--", every argument is the EAL's (`without_separator_own` false: berthgen) or the
// program's own (true: berthd, whose EAL options may come from its config instead).
SplitCommandLine splitAtDoubleDash(int argc, const char* const* argv, bool without_separator_own);

// argv-style pointers into `arguments`, which must outlive them.
std::vector<char*> argvOf(std::vector<std::string>& arguments);

}  // namespace berth
