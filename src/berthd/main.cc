// berthd: the berth load balancer daemon.
//
//   berthd [EAL options] -- --config FILE [--control-socket PATH] [--read-only-socket PATH]
//          [--read-only-group NAME] [--drain-state FILE] [--counters-json FILE]
//
// EAL options may also come from the config (dataplane.eal); the command line's come first. The
// start-up order is one table below (the config first, then the EAL and the control plane's
// steps); a failed step is named, and teardown runs the table backwards. SIGINT and SIGTERM stop it
// cleanly; SIGUSR1 prints the counters; SIGHUP reloads the config.

#include <fcntl.h>
#include <grp.h>
#include <rte_eal.h>
#include <rte_errno.h>

#include <atomic>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
#include "berth/config/eal_options.h"
#include "berth/config/loader.h"
#include "berth/daemon/control_plane.h"
#include "berth/fleet/generation.h"
#include "berth/fleet/store.h"
#include "berth/util/command_line.h"
#include "berth/util/heap.h"
#include "berth/util/program_info.h"
#include "berth/util/start_sequence.h"
#include "berth/util/whole_file.h"

ABSL_FLAG(std::string, config, "", "path of the YAML config (required)");
ABSL_FLAG(std::string, control_socket, "/run/berth/berth.sock",
          "the Unix socket berthctl talks to berthd over (mode 0600)");
ABSL_FLAG(std::string, read_only_socket, "",
          "a second Unix socket that serves only status, stats and announce, for berth-announcer "
          "and monitoring (mode 0666, or 0660 with --read-only-group); default: beside "
          "--control-socket, berth.sock giving berth-ro.sock; 'off' for none");
ABSL_FLAG(std::string, read_only_group, "",
          "the group of the read-only socket, which is then mode 0660");
ABSL_FLAG(std::string, drain_state, "",
          "the file that keeps drains made with berthctl across restarts; default: beside "
          "--control-socket, berth.sock giving berth-drains.json; 'off' for none");
ABSL_FLAG(std::string, counters_json, "",
          "on exit, also write the final counters as JSON to this file");
ABSL_FLAG(std::string, testing_hold_file, "",
          "for tests of the systemd watchdog only: while this file exists, the management loop "
          "holds, as a stuck one would");

namespace {

std::atomic<bool> g_stop{false};
std::atomic<bool> g_print_counters{false};
std::atomic<bool> g_reload{false};

void onSignal(int signal) {
  if (signal == SIGUSR1) {
    g_print_counters.store(true);
  } else if (signal == SIGHUP) {
    g_reload.store(true);
  } else {
    g_stop.store(true);
  }
}

void installSignalHandlers() {
  struct sigaction action;
  std::memset(&action, 0, sizeof(action));
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  for (int signal : {SIGINT, SIGTERM, SIGUSR1, SIGHUP}) sigaction(signal, &action, nullptr);
}

int fail(absl::string_view message) {
  std::fprintf(stderr, "berthd: %.*s\n", static_cast<int>(message.size()), message.data());
  return 1;
}

absl::StatusOr<berth::ControlSocketPaths> controlSocketPaths() {
  berth::ControlSocketPaths paths;
  paths.control = absl::GetFlag(FLAGS_control_socket);
  paths.read_only = absl::GetFlag(FLAGS_read_only_socket);
  if (paths.read_only.empty()) paths.read_only = berth::defaultReadOnlySocketPath(paths.control);
  if (paths.read_only == "off") paths.read_only.clear();
  if (paths.read_only == paths.control) {
    return absl::InvalidArgumentError("--read-only-socket must differ from --control-socket");
  }
  if (const std::string name = absl::GetFlag(FLAGS_read_only_group); !name.empty()) {
    std::vector<char> buffer(16384);
    group entry;
    group* found = nullptr;
    if (getgrnam_r(name.c_str(), &entry, buffer.data(), buffer.size(), &found) != 0 ||
        found == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--read-only-group: no group named '", name, "'"));
    }
    paths.read_only_group = found->gr_gid;
  }
  return paths;
}

std::string drainStatePath(const std::string& control_socket) {
  std::string path = absl::GetFlag(FLAGS_drain_state);
  if (path == "off") return "";
  if (!path.empty()) return path;
  const size_t slash = control_socket.rfind('/');
  return slash == std::string::npos ? "berth-drains.json"
                                    : control_socket.substr(0, slash + 1) + "berth-drains.json";
}

// The fleet version cached by the last run, or none (logged: absent, unreadable, not berth's).
std::optional<berth::FleetVersionText> cachedFleetVersion(const berth::Config& config) {
  const std::string& path = config.fleet->cache;
  const absl::StatusOr<std::string> contents = berth::readFileWhole(path);
  if (!contents.ok()) {
    std::fprintf(stderr, "berthd: fleet: no cached version at %s\n", path.c_str());
    return std::nullopt;
  }
  absl::StatusOr<berth::CachedVersion> cached = berth::parseVersionCache(*contents);
  if (!cached.ok()) {
    std::fprintf(stderr, "berthd: fleet: the cache %s is not usable: %s\n", path.c_str(),
                 std::string(cached.status().message()).c_str());
    return std::nullopt;
  }
  std::fprintf(stderr,
               "berthd: fleet: serving fleet version %lu from the cache %s until etcd "
               "answers\n",
               static_cast<unsigned long>(cached->head.version), path.c_str());
  return berth::FleetVersionText{
      cached->head, std::move(cached->text),
      absl::StrCat("fleet version ", cached->head.version, " (cached in ", path, ")")};
}

// The table generation cached by the last run, or none (logged when present but unusable).
std::shared_ptr<const berth::FleetGeneration> cachedFleetGeneration(const berth::Config& config) {
  const std::string path = berth::generationCachePath(*config.fleet);
  const absl::StatusOr<std::string> contents = berth::readFileWhole(path);
  if (!contents.ok()) return nullptr;
  absl::StatusOr<berth::FleetGeneration> cached = berth::parseGenerationCache(*contents);
  if (!cached.ok()) {
    std::fprintf(stderr, "berthd: fleet: the generation cache %s is not usable: %s\n", path.c_str(),
                 std::string(cached.status().message()).c_str());
    return nullptr;
  }
  std::fprintf(stderr, "berthd: fleet: serving table generation %lu from the cache %s\n",
               static_cast<unsigned long>(cached->manifest.generation), path.c_str());
  return std::make_shared<const berth::FleetGeneration>(*std::move(cached));
}

// In a fleet, the services come from the last version this instance applied, cached on disk,
// until etcd gives a newer one (docs/scale-out.md): `config` composed with it, and what the
// control plane starts the fleet from.
struct FleetStart {
  berth::Config local;  // the local file's part; no fleet section without a fleet
  std::optional<berth::FleetVersionText> cached;
  std::shared_ptr<const berth::FleetGeneration> cached_generation;
};

FleetStart startFromCache(berth::Config& config) {
  FleetStart start;
  if (!config.fleet) return start;
  start.local = config;
  start.cached = cachedFleetVersion(config);
  if (!start.cached) return start;
  start.cached_generation = cachedFleetGeneration(config);
  absl::StatusOr<berth::Config> composed =
      berth::composeFleetConfig(start.local, start.cached->text, start.cached->source);
  if (composed.ok()) {
    config = *std::move(composed);
  } else {
    std::fprintf(stderr,
                 "berthd: fleet: the cached version does not apply (%s); starting "
                 "without services until etcd gives one that does\n",
                 std::string(composed.status().message()).c_str());
    start.cached.reset();
  }
  return start;
}

// The merged EAL arguments, as berthd gives them to rte_eal_init.
std::string ealArgsText(const std::vector<std::string>& eal_args) {
  return absl::StrJoin(eal_args.begin() + 1, eal_args.end(), " ");
}

// Whether another process holds the write lock the EAL takes on the prefix's config file (root's
// runtime directory, /var/run/dpdk).
bool filePrefixHeld(const std::string& prefix) {
  if (prefix.empty()) return false;
  const std::string path = absl::StrCat("/var/run/dpdk/", prefix, "/config");
  const int descriptor = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (descriptor < 0) return false;
  struct flock lock {};
  lock.l_type = F_WRLCK;
  lock.l_whence = SEEK_SET;
  const bool held = fcntl(descriptor, F_GETLK, &lock) == 0 && lock.l_type != F_UNLCK;
  close(descriptor);
  return held;
}

// Why the EAL did not start, with the arguments it was given and the likely causes on this host.
absl::Status ealFailure(int error, const std::vector<std::string>& eal_args) {
  berth::EalFailure failure;
  failure.error = error;
  failure.args = eal_args;
  failure.euid = geteuid();
  std::error_code ignored;
  for (const auto& size :
       std::filesystem::directory_iterator("/sys/kernel/mm/hugepages", ignored)) {
    std::ifstream count(size.path() / "nr_hugepages");
    uint64_t pages = 0;
    if (count >> pages) failure.hugepages_reserved += pages;
  }
  std::ifstream mounts("/proc/mounts");
  for (std::string line; std::getline(mounts, line);) {
    if (line.find(" hugetlbfs ") != std::string::npos) failure.hugetlbfs_mounted = true;
  }
  failure.file_prefix_held = filePrefixHeld(berth::ealFilePrefix(eal_args));
  // Some failures leave rte_errno at 0; the EAL's own message, above, then says what failed.
  std::string message = absl::StrCat(
      error != 0 ? rte_strerror(error) : "initialisation failed (the EAL's message is above)",
      "; the EAL was given: ", ealArgsText(eal_args),
      " (berthd's command line, then dataplane.eal)");
  for (const std::string& advice : berth::ealFailureAdvice(failure)) {
    absl::StrAppend(&message, "\n  likely: ", advice);
  }
  return absl::InvalidArgumentError(message);
}

// The start-up table: each step's start in this order, and on a failure, or at the end, the
// stops of the steps that started, in reverse. The control plane's steps are documented at
// ControlPlane (daemon/control_plane.h).
std::vector<berth::StartStep> startUpSteps(berth::ControlPlane& control,
                                           const std::vector<std::string>& eal_args,
                                           std::vector<char*>& eal_argv, bool& eal_up) {
  return {
      {"EAL",
       [&]() -> absl::Status {
         if (rte_eal_init(static_cast<int>(eal_argv.size()), eal_argv.data()) < 0) {
           return ealFailure(rte_errno, eal_args);
         }
         eal_up = true;
         return absl::OkStatus();
       },
       [&] {
         if (eal_up) rte_eal_cleanup();
         eal_up = false;
       }},
      {"lcores", [&] { return control.startLcores(); }, [&] { control.stopLcores(); }},
      {"ports", [&] { return control.openPorts(); }, [&] { control.closePorts(); }},
      {"workers", [&] { return control.createWorkers(); }, [&] { control.destroyWorkers(); }},
      {"exception path", [&] { return control.startExceptionPath(); },
       [&] { control.stopExceptionPath(); }},
      {"services", [&] { return control.startServices(); }, [&] { control.stopServices(); }},
      {"control socket", [&] { return control.openControlSocket(); },
       [&] { control.closeControlSocket(); }},
      {"metrics", [&] { return control.openMetrics(); }, [&] { control.closeMetrics(); }},
      {"telemetry", [&] { return control.openTelemetry(); }, [&] { control.closeTelemetry(); }},
      {"fleet", [&] { return control.startFleet(); }, [&] { control.stopFleet(); }},
      {"launch", [&] { return control.launchWorkers(); }, [&] { control.stopWorkers(); }},
  };
}

constexpr char kUsage[] =
    "berth's load balancer daemon.\n\n"
    "  berthd [EAL options] -- --config FILE [--control-socket PATH] [--read-only-socket PATH]\n"
    "         [--read-only-group NAME] [--drain-state FILE] [--counters-json FILE]\n\n"
    "EAL options may also be given in the config as dataplane.eal; those on the command line "
    "come first. SIGINT/SIGTERM stop it; SIGUSR1 prints the counters; SIGHUP reloads the "
    "config file.";

}  // namespace

int main(int argc, char** argv) {
  // First of all, so that a SIGUSR1 during the seconds the EAL takes to start does not kill the
  // process (its default action); the EAL installs no handlers of its own for these signals.
  installSignalHandlers();
  if (berth::answerHelpOrVersion(argc, argv, "berthd", kUsage, true)) return 0;
  // Everything before "--" is the EAL's; berthd's own flags come after it. Without "--", every
  // argument is berthd's and the EAL options come from the config alone.
  berth::SplitCommandLine command_line = berth::splitAtDoubleDash(argc, argv, true);
  std::vector<char*> own_args = berth::argvOf(command_line.own);
  std::vector<std::string>& eal_args = command_line.eal;
  absl::SetProgramUsageMessage(kUsage);
  const std::vector<char*> positional =
      berth::parseProgramFlags(static_cast<int>(own_args.size()), own_args.data(), "berthd");
  if (positional.size() > 1) {
    return fail(absl::StrCat("unexpected argument '", positional[1], "'; see --help"));
  }
  if (absl::GetFlag(FLAGS_config).empty()) return fail("--config FILE is required; see --help");

  absl::StatusOr<berth::Config> config = berth::loadConfigFile(absl::GetFlag(FLAGS_config));
  if (!config.ok()) return fail(config.status().message());
  FleetStart fleet_start = startFromCache(*config);
  for (const std::string& warning : config->warnings) {
    std::fprintf(stderr, "berthd: warning: %s\n", warning.c_str());
  }
  for (const std::string& note : config->notes) {
    std::fprintf(stderr, "berthd: config: %s\n", note.c_str());
  }
  berth::retainFreedHeapMemory();

  for (const std::string& arg : config->dataplane.eal) eal_args.push_back(arg);
  // The config's own were checked with it; together with the command line's, before the EAL
  // answers a mistake with its whole usage text.
  if (const std::vector<std::string> problems =
          berth::ealArgumentProblems(absl::MakeConstSpan(eal_args).subspan(1));
      !problems.empty()) {
    return fail(absl::StrCat("EAL arguments (berthd's command line, then dataplane.eal): ",
                             ealArgsText(eal_args), "\n  ", absl::StrJoin(problems, "\n  ")));
  }
  std::vector<char*> eal_argv = berth::argvOf(eal_args);

  absl::StatusOr<berth::ControlSocketPaths> sockets = controlSocketPaths();
  if (!sockets.ok()) return fail(sockets.status().message());
  std::string drain_state = drainStatePath(sockets->control);
  berth::ControlPlane control(absl::GetFlag(FLAGS_config), std::move(drain_state),
                              *std::move(sockets), *std::move(config),
                              {g_stop, g_print_counters, g_reload});
  control.setTestingHoldFile(absl::GetFlag(FLAGS_testing_hold_file));
  if (fleet_start.local.fleet) {
    control.setFleetStart(std::move(fleet_start.local), std::move(fleet_start.cached),
                          std::move(fleet_start.cached_generation));
  }
  bool eal_up = false;
  berth::StartSequence start_up(startUpSteps(control, eal_args, eal_argv, eal_up));
  if (absl::Status status = start_up.start(); !status.ok()) return fail(status.message());

  int exit_code = 0;
  control.run();
  std::fputs(control.countersText().c_str(), stdout);
  std::fflush(stdout);
  if (const std::string path = absl::GetFlag(FLAGS_counters_json); !path.empty()) {
    std::ofstream out(path);
    out << control.countersJson();
    if (!out) exit_code = fail(absl::StrCat("--counters-json: could not write ", path));
  }
  start_up.stop();
  return exit_code;
}
