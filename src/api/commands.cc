#include "berth/api/commands.h"

#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace berth {
namespace {

const std::vector<CommandSpec>& commandTable() {
  static const std::vector<CommandSpec> commands = {
      {"status",
       {},
       "version, uptime, config file and its CRC32-C, snapshot generation, workers, drains,\n"
       "and each service's table fingerprint (instances that agree send flows alike)"},
      {"stats",
       {{"all", ""}},
       "the workers' counters summed and grouped (drops by reason, malformed frames, the\n"
       "connection table, ...), with units and the rates over the last second; the ports'\n"
       "own counters. Only counters that are not zero; --all: every one, and per backend"},
      {"services",
       {},
       "per service: listener, forwarding mode, backends, healthy ones, packets, bytes"},
      {"backends",
       {},
       "per backend: address, weight, health (or drained), slots owned, packets, bytes"},
      {"reload", {}, "re-read the config file; a bad file is refused and the running config stays"},
      {"drain",
       {{"backend", "NAME", true, true}, {"service", "S"}},
       "no new flows to backend NAME (in every service that has one, or in S); established\n"
       "ones finish"},
      {"undrain",
       {{"backend", "NAME", true, true}, {"service", "S"}},
       "give backend NAME its weight back"},
      {"explain",
       {{"src", "IP:PORT", false, true}, {"dst", "VIP:PORT", false, true}, {"proto", "tcp|udp"}},
       "the flow's service, hash, slot and the table's backend, the connection-table entry of\n"
       "the worker holding it, and where its next packet goes and why"},
      {"table",
       {{"service", "NAME", false, true}, {"summary", ""}},
       "the live table: slots per backend and the backend of every slot; --summary: the\n"
       "balance and slots per backend only (with many backends, the most over and under\n"
       "their weight's share)"},
      {"neighbors",
       {{"action", "flush", true}},
       "each next hop resolved by ARP or ND (gateways, l2dsr backends): port, address, MAC,\n"
       "state, seconds since it last answered, changes, and claims of another MAC refused.\n"
       "neighbors flush asks every next hop again now; the MACs in use serve until answered"},
      {"announce",
       {{"announced", "N"}},
       "the VIP routes this instance wants announced over BGP (berth-announcer's input): none\n"
       "while its datapath is stalled or its port is down or it is stopping, and none for a\n"
       "service without a healthy backend. --announced N tells berthd how many routes the\n"
       "caller has in BIRD now; a 0 while stopping lets berthd finish its stop\n"
       "(bgp.forward_after_withdrawal later)"},
  };
  return commands;
}

std::string argumentText(const CommandArgument& argument) {
  if (argument.positional) return std::string(argument.value);
  return argument.value.empty() ? absl::StrCat("--", argument.field)
                                : absl::StrCat("--", argument.field, " ", argument.value);
}

}  // namespace

std::string CommandSpec::synopsis() const {
  std::string text(name);
  for (const CommandArgument& argument : arguments) {
    absl::StrAppend(&text, " ", argument.required ? "" : "[", argumentText(argument),
                    argument.required ? "" : "]");
  }
  return text;
}

absl::Span<const CommandSpec> controlCommands() { return commandTable(); }

const CommandSpec* findControlCommand(absl::string_view name) {
  for (const CommandSpec& command : commandTable()) {
    if (command.name == name) return &command;
  }
  return nullptr;
}

std::string controlCommandNames() {
  std::vector<absl::string_view> names;
  for (const CommandSpec& command : commandTable()) names.push_back(command.name);
  return absl::StrJoin(names, ", ");
}

std::string controlCommandsUsage() {
  std::string text;
  for (const CommandSpec& command : commandTable()) {
    absl::StrAppend(&text, "  ", command.synopsis(), "\n");
    for (absl::string_view line : absl::StrSplit(command.help, '\n')) {
      absl::StrAppend(&text, "          ", line, "\n");
    }
  }
  return text;
}

absl::Status checkCommandFields(const CommandSpec& command,
                                const absl::flat_hash_map<std::string, std::string>& fields) {
  // Any required argument missing names them all: "explain needs --src IP:PORT and --dst ...".
  std::vector<std::string> required;
  bool missing = false;
  for (const CommandArgument& argument : command.arguments) {
    if (!argument.required) continue;
    required.push_back(argument.positional ? std::string(argument.value) : argumentText(argument));
    auto it = fields.find(argument.field);
    missing |= it == fields.end() || it->second.empty();
  }
  if (missing) {
    return absl::InvalidArgumentError(absl::StrCat(command.name, " needs ",
                                                   absl::StrJoin(required, " and "), ": berthctl ",
                                                   command.synopsis()));
  }
  for (const auto& [field, value] : fields) {
    if (value.empty()) continue;
    bool known = false;
    for (const CommandArgument& argument : command.arguments) known |= argument.field == field;
    if (!known) {
      return absl::InvalidArgumentError(
          command.arguments.empty()
              ? absl::StrCat(command.name, " takes no arguments, not '", field, "'")
              : absl::StrCat(command.name, " takes no '", field, "': berthctl ",
                             command.synopsis()));
    }
  }
  return absl::OkStatus();
}

}  // namespace berth
