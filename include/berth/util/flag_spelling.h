#pragma once

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace berth {

// One flag style across berth's programs: words joined by hyphens (--control-socket, --tx-dev,
// --no-timing), as GNU tools and berthgen spell theirs. absl, which parses berthd's, berthctl's
// and berth-announcer's flags, names them with underscores, so each command line is respelled
// before absl reads it. The underscore spellings of earlier releases are still taken, with a
// note; a flag that is neither is refused here with the nearest one ("did you mean").

struct KnownFlag {
  std::string name;  // as absl registers it: control_socket
  bool boolean = false;
};

struct RespelledFlags {
  std::vector<std::string> arguments;  // argv for absl, argv[0] first
  std::vector<std::string> notes;      // one per old spelling used
};

// Respells `arguments` (argv[0] first; everything after a bare "--" is left as it is). Refuses
// an unknown flag: "unknown flag --control-sockt; did you mean --control-socket?".
absl::StatusOr<RespelledFlags> respellFlags(std::vector<std::string> arguments,
                                            absl::Span<const KnownFlag> known);

// The flags absl has registered in this program, absl's own among them.
std::vector<KnownFlag> registeredFlags();

// How a flag is written on the command line: control_socket -> control-socket.
std::string flagSpelling(const std::string& name);

}  // namespace berth
