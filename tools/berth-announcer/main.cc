// berth-announcer: keeps BIRD announcing exactly the VIPs that berthd serves now.
//
// Every --interval it asks berthd (`announce` on its read-only socket, which needs no admin rights)
// which VIP routes it wants announced: none while its datapath is stalled or its BGP port is down,
// and none for a service without a healthy backend. It writes them as BIRD static routes into the
// files the config from `berthctl bird-config` includes, and runs `birdc configure` when they
// change. When berthd stops answering for --berthd_timeout (killed, hung, gone), and when
// berth-announcer itself is stopped, it withdraws every route. It runs apart from berthd so that a
// berthd killed outright still has its routes withdrawn.

#include <fcntl.h>
#include <poll.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "berth/api/request.h"
#include "berth/client/announcer.h"
#include "berth/client/control_client.h"
#include "berth/util/program_info.h"
#include "berth/util/whole_file.h"

ABSL_FLAG(std::string, socket, "/run/berth/berth-ro.sock",
          "berthd's read-only socket (berthd --read-only-socket), or its control socket");
ABSL_FLAG(std::string, bird_socket, "/run/bird/bird.ctl", "BIRD's control socket (birdc -s)");
ABSL_FLAG(std::string, birdc, "birdc", "the birdc program");
ABSL_FLAG(std::string, routes_dir, "/run/berth-announcer",
          "where to write bird-routes4.conf and bird-routes6.conf (as in berthctl bird-config)");
ABSL_FLAG(int, interval_ms, 200, "how often to ask berthd, in milliseconds");
ABSL_FLAG(int, berthd_timeout_ms, 1000,
          "withdraw every route when berthd has not answered for this long, in milliseconds");
ABSL_FLAG(int, birdc_timeout_ms, 1000,
          "a birdc that has not answered in this long is killed and run once more, in "
          "milliseconds");

namespace {

std::atomic<bool> g_stop{false};

// The deadline of each birdc of the withdrawal at a stop.
constexpr absl::Duration kFinalBirdcTimeout = absl::Milliseconds(700);

void onSignal(int) { g_stop.store(true); }

void log(const std::string& line) {
  std::fprintf(stderr, "berth-announcer: %s %s\n",
               absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::UTCTimeZone()).c_str(),
               line.c_str());
  std::fflush(stderr);
}

// `birdc -s SOCKET configure`, killed when it has not answered by `deadline` or when
// berth-announcer is told to stop; BIRD answers "Reconfigured" (or "Reconfiguration in progress")
// when the new routes are in. Anything else is an error, with BIRD's words.
absl::Status birdConfigure(absl::Time deadline, bool stop_counts) {
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC) != 0) return absl::InternalError("pipe failed");
  const std::string birdc = absl::GetFlag(FLAGS_birdc);
  const std::string bird_socket = absl::GetFlag(FLAGS_bird_socket);
  const pid_t child = fork();
  if (child < 0) {
    close(pipe_fds[0]);
    close(pipe_fds[1]);
    return absl::InternalError("fork failed");
  }
  if (child == 0) {
    dup2(pipe_fds[1], STDOUT_FILENO);
    dup2(pipe_fds[1], STDERR_FILENO);
    execlp(birdc.c_str(), birdc.c_str(), "-s", bird_socket.c_str(), "configure",
           static_cast<char*>(nullptr));
    _exit(127);
  }
  close(pipe_fds[1]);
  std::string output;
  bool ended = false;
  bool stopped = false;
  while (!ended) {
    if (stop_counts && g_stop.load()) {
      stopped = true;
      break;
    }
    const absl::Duration left = deadline - absl::Now();
    if (left <= absl::ZeroDuration()) break;
    pollfd readable{pipe_fds[0], POLLIN, 0};
    // Short waits, so that a stop signal is seen within 50 ms.
    if (poll(&readable, 1,
             static_cast<int>(std::min<int64_t>(absl::ToInt64Milliseconds(left) + 1, 50))) <= 0) {
      continue;
    }
    char buffer[1024];
    const ssize_t got = read(pipe_fds[0], buffer, sizeof(buffer));
    if (got > 0) {
      output.append(buffer, static_cast<size_t>(got));
    } else if (got == 0 || errno != EINTR) {
      ended = true;
    }
  }
  close(pipe_fds[0]);
  if (!ended) kill(child, SIGKILL);
  int status = 0;
  while (waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
  if (!ended) {
    return absl::DeadlineExceededError(
        absl::StrCat(birdc, " -s ", bird_socket,
                     " configure: ", stopped ? "stopped" : "no answer in time", "; killed"));
  }
  if (output.find("Reconfigured") != std::string::npos ||
      output.find("Reconfiguration in progress") != std::string::npos) {
    return absl::OkStatus();
  }
  while (!output.empty() && (output.back() == '\n' || output.back() == ' ')) output.pop_back();
  return absl::UnavailableError(absl::StrCat(
      birdc, " -s ", bird_socket, " configure: ", output.empty() ? "no answer" : output));
}

// Writes the route files, then tells BIRD: a birdc that overruns its deadline is killed and
// run once more, so BIRD hears of a change within two deadlines even when one birdc hangs. A
// stop signal cuts birdc short, except for the final withdrawal (`final`).
absl::Status apply(const std::vector<berth::VipRoute>& routes, bool final = false) {
  const std::string directory = absl::GetFlag(FLAGS_routes_dir);
  for (berth::IpFamily family : {berth::IpFamily::kIpv4, berth::IpFamily::kIpv6}) {
    // Whole files, so BIRD never reads half of one.
    absl::Status written = berth::writeFileWhole(berth::routesFile(directory, family),
                                                 berth::birdStaticRoutes(routes, family), 0644);
    if (!written.ok()) return written;
  }
  // A stop withdraws within 2 s: at most a round (two intervals), then two short deadlines.
  const absl::Duration timeout = std::min(absl::Milliseconds(absl::GetFlag(FLAGS_birdc_timeout_ms)),
                                          final ? kFinalBirdcTimeout : absl::InfiniteDuration());
  absl::Status told = birdConfigure(absl::Now() + timeout, !final);
  if (absl::IsDeadlineExceeded(told) && (final || !g_stop.load())) {
    log(absl::StrCat(told.message(), "; running it once more"));
    told = birdConfigure(absl::Now() + timeout, !final);
  }
  return told;
}

std::string describe(const std::vector<berth::VipRoute>& routes) {
  if (routes.empty()) return "none";
  std::vector<std::string> parts;
  for (const berth::VipRoute& route : routes) {
    parts.push_back(absl::StrCat(route.vip.toString(), " via ", route.next_hop.toString()));
  }
  return absl::StrJoin(parts, ", ");
}

}  // namespace

int main(int argc, char** argv) {
  constexpr char kUsage[] =
      "berth-announcer [--socket PATH] [--bird-socket PATH] [--routes-dir DIR]: keeps BIRD "
      "announcing the VIPs berthd serves (docs/scale-out.md)";
  if (berth::answerHelpOrVersion(argc, argv, "berth-announcer", kUsage, true)) return 0;
  absl::SetProgramUsageMessage(kUsage);
  berth::parseProgramFlags(argc, argv, "berth-announcer");
  const absl::Duration interval = absl::Milliseconds(absl::GetFlag(FLAGS_interval_ms));
  const absl::Duration berthd_timeout = absl::Milliseconds(absl::GetFlag(FLAGS_berthd_timeout_ms));
  if (interval <= absl::ZeroDuration() || berthd_timeout < interval) {
    std::fprintf(stderr,
                 "berth-announcer: --interval-ms must be positive and --berthd-timeout-ms at "
                 "least as long\n");
    return 1;
  }
  if (absl::GetFlag(FLAGS_birdc_timeout_ms) <= 0) {
    std::fprintf(stderr, "berth-announcer: --birdc-timeout-ms must be positive\n");
    return 1;
  }
  // BIRD's config includes the route files by their path in double quotes.
  if (const std::string directory = absl::GetFlag(FLAGS_routes_dir);
      directory.find_first_of("\"\n\r\\") != std::string::npos) {
    std::fprintf(stderr,
                 "berth-announcer: --routes-dir must not hold a quote, a backslash or a line "
                 "break: BIRD's config names the route files in quotes\n");
    return 1;
  }
  std::signal(SIGTERM, onSignal);
  std::signal(SIGINT, onSignal);
  const std::string socket = absl::GetFlag(FLAGS_socket);

  std::vector<berth::VipRoute> wanted;
  std::vector<berth::VipRoute> applied;
  bool applied_once = false;
  absl::Time last_answer = absl::Now();
  std::string last_problem;
  std::string last_apply_error;
  while (!g_stop.load()) {
    const absl::Time round = absl::Now();
    // Once BIRD holds what was last applied, say how many routes that is: a 0 while berthd is
    // stopping lets it finish its stop (control/stop_withdrawal.h).
    const std::string request = berth::controlRequestJson(
        "announce", applied_once ? berth::ControlFields{{"announced", absl::StrCat(applied.size())}}
                                 : berth::ControlFields{});
    absl::StatusOr<std::string> reply = berth::sendControlRequest(socket, request, interval);
    absl::StatusOr<berth::ControlReply> parsed =
        reply.ok() ? berth::parseControlReply(*reply) : reply.status();
    absl::StatusOr<std::vector<berth::VipRoute>> routes =
        parsed.ok() && parsed->ok ? berth::parseRouteList(parsed->strings["route_list"])
        : parsed.ok()             ? absl::UnavailableError(parsed->strings["error"])
                                  : parsed.status();
    if (routes.ok()) {
      last_answer = round;
      wanted = *std::move(routes);
      last_problem.clear();
    } else {
      const std::string problem(routes.status().message());
      if (problem != last_problem) log(absl::StrCat("berthd: ", problem));
      last_problem = problem;
      if (round - last_answer >= berthd_timeout && !wanted.empty()) {
        log(absl::StrFormat("berthd has not answered for %d ms: withdrawing every route",
                            absl::ToInt64Milliseconds(round - last_answer)));
        wanted.clear();
      }
    }
    if (!applied_once || wanted != applied) {
      const absl::Status status = apply(wanted);
      if (status.ok()) {
        log(absl::StrCat("announcing: ", describe(wanted)));
        applied = wanted;
        applied_once = true;
        last_apply_error.clear();
        // Report what BIRD now holds at once rather than an interval later: a stopping berthd
        // is waiting for it.
        continue;
      }
      if (std::string(status.message()) != last_apply_error) {
        last_apply_error = std::string(status.message());
        log(last_apply_error);
      }
    }
    // In short steps, so that a stop is seen at once.
    while (!g_stop.load() && absl::Now() - round < interval) {
      absl::SleepFor(std::min(absl::Milliseconds(10), interval - (absl::Now() - round)));
    }
  }
  const absl::Status status = apply({}, true);
  log(status.ok() ? "stopped: every route withdrawn"
                  : absl::StrCat("stopping, but the withdrawal failed: ", status.message()));
  return status.ok() ? 0 : 1;
}
