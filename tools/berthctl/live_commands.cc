#include "live_commands.h"

#include <cstdio>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/util/json_writer.h"

namespace berth {

int runLiveCommand(const std::string& socket_path, const std::string& command,
                   const ControlFields& fields, bool json) {
  absl::StatusOr<std::string> reply =
      sendControlRequest(socket_path, controlRequestJson(command, fields));
  if (!reply.ok()) {
    std::fprintf(stderr, "berthctl: %s\n", std::string(reply.status().message()).c_str());
    return 1;
  }
  absl::StatusOr<ControlReply> parsed = parseControlReply(*reply);
  if (!parsed.ok()) {
    std::fprintf(stderr, "berthctl: berthd's reply is not understood: %s\n",
                 std::string(parsed.status().message()).c_str());
    return 1;
  }
  if (!parsed->ok) {
    auto error = parsed->strings.find("error");
    std::fprintf(stderr, "berthctl: %s\n",
                 error == parsed->strings.end() ? "berthd refused" : error->second.c_str());
    return 1;
  }
  if (json) {
    std::printf("%s\n", reply->c_str());
  } else if (auto text = parsed->strings.find("text"); text != parsed->strings.end()) {
    std::fputs(text->second.c_str(), stdout);
  }
  return 0;
}

}  // namespace berth
