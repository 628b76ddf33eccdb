#pragma once

#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace berth {

// The commands berthd answers on its control socket, in one table that both sides read: berthd
// checks a request's fields against it and dispatches by its names, and berthctl builds its
// usage, its help and its argument checks from it (docs/architecture.md, the command table). A
// new command is one entry here and one handler in berthd.

// One value a command takes: a word after the command's name, or a flag. Either way it travels
// as the request field `field`, and berthctl's flag of that name gives it.
struct CommandArgument {
  absl::string_view field;
  absl::string_view value;  // how usage shows the value: "NAME", "IP:PORT"; "" for a switch
  bool positional = false;  // berthctl drain NAME, not berthctl drain --backend NAME
  bool required = false;
};

struct CommandSpec {
  absl::string_view name;
  std::vector<CommandArgument> arguments;
  absl::string_view help;  // lines of at most 88 characters, for berthctl's usage

  // "drain NAME [--service S]": the command as berthctl takes it.
  std::string synopsis() const;
};

// Every control command, in the order berthctl's usage lists them.
absl::Span<const CommandSpec> controlCommands();
// The command of this name, or nullptr.
const CommandSpec* findControlCommand(absl::string_view name);
// "status, stats, ...": the names, for an error about an unknown one.
std::string controlCommandNames();
// The usage lines of every command: its synopsis, then its help indented.
std::string controlCommandsUsage();

// Whether `fields` (a request's, empty values counting as absent) are what `command` takes: no
// required argument missing and no field it does not know. The error is worded for berthctl's
// user: "explain needs --src IP:PORT and --dst VIP:PORT: berthctl explain ...".
absl::Status checkCommandFields(const CommandSpec& command,
                                const absl::flat_hash_map<std::string, std::string>& fields);

}  // namespace berth
