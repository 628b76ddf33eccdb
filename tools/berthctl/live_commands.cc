#include "live_commands.h"

#include <unistd.h>

#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "berth/util/json_writer.h"

namespace berth {

absl::StatusOr<LiveReply> askBerthd(const std::string& socket_path, const std::string& command,
                                    const ControlFields& fields) {
  absl::StatusOr<std::string> reply =
      sendControlRequest(socket_path, controlRequestJson(command, fields));
  if (!reply.ok()) return reply.status();
  absl::StatusOr<ControlReply> parsed = parseControlReply(*reply);
  if (!parsed.ok()) {
    return absl::InternalError(
        absl::StrCat("berthd's reply is not understood: ", parsed.status().message()));
  }
  if (!parsed->ok) {
    auto error = parsed->strings.find("error");
    return absl::FailedPreconditionError(error == parsed->strings.end() ? "berthd refused"
                                                                        : error->second);
  }
  LiveReply out;
  out.json = *std::move(reply);
  if (auto text = parsed->strings.find("text"); text != parsed->strings.end()) {
    out.text = text->second;
  }
  return out;
}

int runLiveCommand(const std::string& socket_path, const std::string& command,
                   const ControlFields& fields, bool json) {
  absl::StatusOr<LiveReply> reply = askBerthd(socket_path, command, fields);
  if (!reply.ok()) {
    std::fprintf(stderr, "berthctl: %s\n", std::string(reply.status().message()).c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", reply->json.c_str());
  } else {
    std::fputs(reply->text.c_str(), stdout);
  }
  return 0;
}

int watchLiveCommand(const std::string& socket_path, const std::string& command,
                     const ControlFields& fields, absl::Duration every, int64_t times) {
  // On a terminal each reply replaces the last, as watch(1) shows them; into a file or a pipe
  // they follow each other.
  const bool terminal = isatty(fileno(stdout)) == 1;
  for (int64_t shown = 0; times == 0 || shown < times; ++shown) {
    if (shown > 0) absl::SleepFor(every);
    absl::StatusOr<LiveReply> reply = askBerthd(socket_path, command, fields);
    const std::string heading = absl::StrCat(
        "every ", absl::FormatDuration(every), ": berthctl ", command, "    ",
        absl::FormatTime("%Y-%m-%d %H:%M:%S", absl::Now(), absl::LocalTimeZone()), "\n\n");
    std::fputs(terminal ? "\033[H\033[2J" : (shown > 0 ? "\n" : ""), stdout);
    std::fputs(heading.c_str(), stdout);
    // berthd restarting or refusing is shown and watched through, as watch(1) does.
    std::fputs(reply.ok() ? reply->text.c_str()
                          : absl::StrCat("berthctl: ", reply.status().message(), "\n").c_str(),
               stdout);
    std::fflush(stdout);
  }
  return 0;
}

}  // namespace berth
