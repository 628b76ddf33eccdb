#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/api/request.h"
#include "berth/client/control_client.h"

namespace berth {

// berthctl's commands against a running berthd, over its control socket.

// Runs a live command and prints berthd's answer: its text, or with `json` its JSON reply.
// Returns the process exit code: 0, or 1 with the error on stderr.
int runLiveCommand(const std::string& socket_path, const std::string& command,
                   const ControlFields& fields, bool json);

// berthd's answer: its JSON reply, and the text in it; an error for a refusal or no answer.
struct LiveReply {
  std::string json;
  std::string text;
};
absl::StatusOr<LiveReply> askBerthd(const std::string& socket_path, const std::string& command,
                                    const ControlFields& fields);

// --watch: asks again every `every` and shows each answer with a heading, replacing the last on
// a terminal; `times` answers (0: until interrupted). An answer that fails is shown and the
// watch goes on, as watch(1) does.
int watchLiveCommand(const std::string& socket_path, const std::string& command,
                     const ControlFields& fields, absl::Duration every, int64_t times);

}  // namespace berth
