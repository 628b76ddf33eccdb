// berthctl: the operator's command line for berth.

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/reflection.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "berth/api/commands.h"
#include "berth/client/announcer.h"
#include "berth/config/loader.h"
#include "berth/util/did_you_mean.h"
#include "berth/util/heap.h"
#include "berth/util/program_info.h"
#include "check_command.h"
#include "fleet_commands.h"
#include "live_commands.h"
#include "offline_commands.h"
#include "pcap_report.h"
#include "progress.h"

ABSL_FLAG(std::string, config, "", "path of the YAML config to read");
ABSL_FLAG(std::string, service, "", "service name (table; drain and undrain to narrow)");
ABSL_FLAG(std::string, proto, "tcp", "explain: the flow's protocol, tcp or udp");
ABSL_FLAG(std::string, src, "", "explain: the client's ADDRESS:PORT ([ADDRESS]:PORT for IPv6)");
ABSL_FLAG(std::string, dst, "", "explain: the VIP's ADDRESS:PORT");
ABSL_FLAG(std::string, announced, "",
          "announce: report the routes the caller has in BIRD now (berth-announcer's report)");
ABSL_FLAG(bool, json, false, "print JSON instead of text");
ABSL_FLAG(double, watch, 0,
          "commands to berthd: ask again every this many seconds, as watch(1) does (Ctrl-C "
          "ends it)");
ABSL_FLAG(int64_t, watch_count, 0, "--watch: stop after this many answers (0: never)");
ABSL_FLAG(bool, all, false, "stats: every counter, zeros included, and each backend's traffic");
ABSL_FLAG(bool, summary, false,
          "table: the balance and slots per backend, without the backend of every slot");
ABSL_FLAG(std::vector<std::string>, fail, {},
          "comma-separated backend names to treat as unhealthy");
ABSL_FLAG(std::string, socket, "/run/berth/berth.sock", "berthd's control socket");
ABSL_FLAG(int, max_failures, 100,
          "analyze: single failures to analyse per service, evenly spaced; 0 for every backend");
ABSL_FLAG(std::string, algorithms, "",
          "analyze: compare these algorithms, comma-separated: maglev, ring, rendezvous, jump, "
          "modulo");
ABSL_FLAG(std::string, pcap, "",
          "analyze: hash the flows of this Ethernet capture with each service's hash fields and "
          "test how they spread over the backends and the hash space");
ABSL_FLAG(std::string, against, "",
          "analyze: what a reload from this config to --config would move in each table");
ABSL_FLAG(std::string, plot, "", "analyze --algorithms: also write the charts to this SVG file");
ABSL_FLAG(bool, timing, true, "analyze --algorithms: measure build and lookup times");
ABSL_FLAG(std::string, routes_dir, "/run/berth-announcer",
          "bird-config: where berth-announcer writes the VIP routes BIRD includes");

namespace {

constexpr char kUsageHead[] = R"(berthctl COMMAND [flags]

Commands that read a config file:
  check   --config FILE [--json]
          what berthd checks before it starts, every error in one pass: the file (each error
          names its field and line; EAL options and device strings too), each service's table
          and flow sync's key files; exit status 0 when berthd would start with it. Warnings:
          a service that can serve nothing, a fleet TLS file it cannot read, a port's kernel
          interface missing here. Ends with what it did not check (docs/troubleshooting.md)
  table   --config FILE --service NAME [--fail A,B] [--summary] [--json]
          the backend of every slot of one service's Maglev table, and slots per backend
          (--summary: the balance and slots per backend only; without --config: berthd's
          live table, below)
  analyze --config FILE [--service NAME] [--fail A,B] [--max-failures N] [--json]
          per service: balance, and how many slots each single backend failure moves with
          min-disruption failover and with a full rebuild, against the ideal; with --fail,
          the same figures with those backends unhealthy
  analyze --config FILE --pcap CAPTURE [--service NAME] [--json]
          per service, the capture's flows hashed as berthd hashes them: flows and packets per
          backend against its weight, and chi-squared tests (with p-values) of the flows over
          the backends and of their hashes over 1,024 bins of the hash space
  analyze --config NEW --against OLD [--service NAME] [--json]
          per service, what a reload from OLD to NEW would move in its table against the
          least that had to move, and why (added, removed, weight or reload), as berthd logs it
  analyze --config FILE --algorithms maglev,ring,rendezvous,jump,modulo [--service NAME]
          [--plot FILE.svg] [--max-failures N] [--no-timing] [--json]
          per service, each algorithm on its backends: build time, lookup cost, memory,
          balance (max/ideal, min/ideal, coefficient of variation), weighted error, and the
          slots moved when a backend joins, when each one leaves, and when a tenth leave;
          --plot draws slots per backend and movement against backends removed

  bird-config --config FILE [--routes-dir DIR]
          the BIRD 2 config that announces this instance's VIPs over BGP (the config's bgp
          section), with the route files berth-announcer keeps up to date

Commands to the fleet's etcd, named by the fleet section of --config FILE (an instance's file):
  fleet push VERSION_FILE --config FILE
          checks VERSION_FILE (services alone) and writes it as the fleet's next version; it
          fails, keeping nothing, when another push lands first
  fleet status --config FILE [--json]
          the fleet's version, every live instance with the version it serves and each
          service's table fingerprint, and whether they agree (exit status 3 when not)

Commands to a running berthd, over its control socket (--socket, default /run/berth/berth.sock);
each takes --json for berthd's JSON reply, and those that only read take --watch SECONDS to
ask again and again, as watch(1) does:
)";

int fail(absl::string_view message) {
  std::fprintf(stderr, "berthctl: %.*s\n", static_cast<int>(message.size()), message.data());
  return 1;
}

const std::string& usage() {
  static const std::string text = absl::StrCat(kUsageHead, berth::controlCommandsUsage());
  return text;
}

// Every command berthctl takes: the config file's, the fleet's and berthd's.
std::vector<std::string> commandNames() {
  std::vector<std::string> names = {"check", "table", "analyze", "bird-config", "fleet"};
  for (const berth::CommandSpec& command : berth::controlCommands()) {
    if (command.name != "table") names.emplace_back(command.name);
  }
  return names;
}

std::string unknownCommand(const std::string& command) {
  const std::optional<std::string> nearest = berth::nearestName(command, commandNames());
  return absl::StrCat("unknown command '", command, "'",
                      nearest ? absl::StrCat("; did you mean '", *nearest, "'?") : "",
                      " (berthctl --help lists every command)");
}

// A command to berthd: its words and flags become the request's fields, as the command table
// (api/commands.h) says, and berthd's reply is printed.
int runLive(const berth::CommandSpec& command, const std::vector<char*>& positional) {
  berth::ControlFields fields;
  size_t next_word = 2;
  for (const berth::CommandArgument& argument : command.arguments) {
    std::string value;
    if (argument.positional) {
      if (next_word < positional.size()) value = positional[next_word++];
    } else {
      const absl::CommandLineFlag* flag = absl::FindCommandLineFlag(argument.field);
      if (flag == nullptr) return fail(absl::StrCat("no flag --", argument.field));
      value = flag->CurrentValue();
      // A switch goes in the request only when given.
      if (argument.value.empty() && value == "false") value.clear();
    }
    if (!value.empty()) fields.emplace_back(std::string(argument.field), std::move(value));
  }
  if (next_word < positional.size()) {
    return fail(absl::StrCat("unexpected argument '", positional[next_word], "': berthctl ",
                             command.synopsis()));
  }
  const absl::flat_hash_map<std::string, std::string> by_field(fields.begin(), fields.end());
  if (absl::Status status = berth::checkCommandFields(command, by_field); !status.ok()) {
    return fail(status.message());
  }
  if (const double every = absl::GetFlag(FLAGS_watch); every != 0) {
    if (every < 0.1 || every > 86400) return fail("--watch takes seconds from 0.1 to 86400");
    if (absl::GetFlag(FLAGS_json)) return fail("--watch shows text: leave out --json");
    const bool writes = command.name == "drain" || command.name == "undrain" ||
                        command.name == "reload" || by_field.contains("announced") ||
                        by_field.contains("action");
    if (writes) return fail(absl::StrCat("--watch repeats what only reads; not ", command.name));
    return berth::watchLiveCommand(absl::GetFlag(FLAGS_socket), std::string(command.name), fields,
                                   absl::Seconds(every), absl::GetFlag(FLAGS_watch_count));
  }
  return berth::runLiveCommand(absl::GetFlag(FLAGS_socket), std::string(command.name), fields,
                               absl::GetFlag(FLAGS_json));
}

// `fleet push FILE` and `fleet status`, with the fleet section of --config.
int runFleet(const std::vector<char*>& positional) {
  const std::string verb = positional.size() > 2 ? positional[2] : "";
  const size_t words = verb == "push" ? 4 : 3;
  if ((verb != "push" && verb != "status") || positional.size() != words) {
    return fail("expected 'fleet push VERSION_FILE' or 'fleet status'");
  }
  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) return fail("fleet commands need --config FILE with a fleet section");
  absl::StatusOr<berth::Config> config = berth::loadConfigFile(config_path);
  if (!config.ok()) return fail(config.status().message());
  if (!config->fleet) return fail(absl::StrCat(config_path, " has no fleet section"));
  if (verb == "push") return berth::fleetPush(*config->fleet, positional[3]);
  return berth::fleetStatus(*config->fleet, absl::GetFlag(FLAGS_json));
}

}  // namespace

int main(int argc, char** argv) {
  if (berth::answerHelpOrVersion(argc, argv, "berthctl", usage(), true)) return 0;
  berth::retainFreedHeapMemory();
  absl::SetProgramUsageMessage(usage());
  const std::vector<char*> positional = berth::parseProgramFlags(argc, argv, "berthctl");
  if (positional.size() < 2) {
    return fail(absl::StrCat("expected a command: ", absl::StrJoin(commandNames(), ", "),
                             " (berthctl --help says what each does)"));
  }
  const std::string command = positional[1];
  // `table` with --config reads a file; without, it asks berthd for the live table.
  const berth::CommandSpec* live = berth::findControlCommand(command);
  if (live != nullptr && !(command == "table" && !absl::GetFlag(FLAGS_config).empty())) {
    return runLive(*live, positional);
  }
  if (command == "fleet") return runFleet(positional);
  if (command != "table" && command != "analyze" && command != "bird-config" &&
      command != "check") {
    return fail(unknownCommand(command));
  }
  if (positional.size() != 2) {
    return fail(absl::StrCat("unexpected argument '", positional[2], "' after ", command,
                             " (berthctl --help)"));
  }

  const std::string config_path = absl::GetFlag(FLAGS_config);
  if (config_path.empty()) return fail("--config FILE is required");
  if (command == "check") {
    const berth::CheckOutcome outcome = berth::checkFile(config_path, absl::GetFlag(FLAGS_json));
    std::fputs(outcome.out.c_str(), stdout);
    std::fputs(outcome.err.c_str(), stderr);
    return outcome.exit_code;
  }
  absl::StatusOr<berth::Config> config = berth::loadConfigFile(config_path);
  if (!config.ok()) return fail(config.status().message());

  berth::OfflineOptions options;
  // Gone before the report is printed: the terminal shows the report alone.
  berth::TerminalProgress progress;
  options.progress = progress.report();
  options.json = absl::GetFlag(FLAGS_json);
  options.summary = absl::GetFlag(FLAGS_summary);
  options.fail = absl::GetFlag(FLAGS_fail);
  if (absl::GetFlag(FLAGS_max_failures) < 0) return fail("--max-failures must be 0 or more");
  options.max_failures = static_cast<size_t>(absl::GetFlag(FLAGS_max_failures));

  absl::StatusOr<std::string> report;
  if (command == "bird-config") {
    report = berth::birdConfig(*config, config_path, absl::GetFlag(FLAGS_routes_dir));
  } else if (command == "table") {
    if (absl::GetFlag(FLAGS_service).empty()) return fail("table needs --service NAME");
    report = berth::tableReport(*config, absl::GetFlag(FLAGS_service), options);
  } else if (const std::string capture = absl::GetFlag(FLAGS_pcap); !capture.empty()) {
    if (!absl::GetFlag(FLAGS_algorithms).empty() || !absl::GetFlag(FLAGS_against).empty()) {
      return fail("--pcap goes without --algorithms and --against");
    }
    options.service = absl::GetFlag(FLAGS_service);
    report = berth::pcapReport(*config, capture, options);
  } else if (const std::string against = absl::GetFlag(FLAGS_against); !against.empty()) {
    if (!absl::GetFlag(FLAGS_algorithms).empty())
      return fail("--against and --algorithms go separately");
    absl::StatusOr<berth::Config> previous = berth::loadConfigFile(against);
    if (!previous.ok()) return fail(absl::StrCat("--against: ", previous.status().message()));
    options.service = absl::GetFlag(FLAGS_service);
    report = berth::changeReport(*config, *previous, options);
  } else if (!absl::GetFlag(FLAGS_algorithms).empty()) {
    absl::StatusOr<std::vector<berth::ComparedAlgorithm>> algorithms =
        berth::parseComparedAlgorithms(absl::GetFlag(FLAGS_algorithms));
    if (!algorithms.ok())
      return fail(absl::StrCat("--algorithms: ", algorithms.status().message()));
    options.algorithms = *std::move(algorithms);
    options.service = absl::GetFlag(FLAGS_service);
    options.plot = !absl::GetFlag(FLAGS_plot).empty();
    options.measure_time = absl::GetFlag(FLAGS_timing);
    absl::StatusOr<berth::ComparisonOutput> output = berth::comparisonReport(*config, options);
    if (!output.ok()) return fail(std::string(output.status().message()));
    if (options.plot) {
      const std::string path = absl::GetFlag(FLAGS_plot);
      std::FILE* file = std::fopen(path.c_str(), "w");
      if (file == nullptr) return fail(absl::StrCat("--plot: cannot write ", path));
      const bool written =
          std::fwrite(output->svg.data(), 1, output->svg.size(), file) == output->svg.size();
      if (std::fclose(file) != 0 || !written)
        return fail(absl::StrCat("--plot: cannot write ", path));
    }
    report = output->report;
  } else {
    if (!absl::GetFlag(FLAGS_plot).empty()) return fail("--plot needs --algorithms");
    options.service = absl::GetFlag(FLAGS_service);
    report = berth::analyzeReport(*config, options);
  }
  progress.finish();
  if (!report.ok()) return fail(std::string(report.status().message()));
  std::fwrite(report->data(), 1, report->size(), stdout);
  return 0;
}
