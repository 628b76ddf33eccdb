#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/api/request.h"
#include "berth/client/control_client.h"

namespace berth {

// berthctl's commands against a running berthd, over its control socket.

// Runs a live command and prints berthd's answer: its text, or with `json` its JSON reply.
// Returns the process exit code: 0, or 1 with the error on stderr.
int runLiveCommand(const std::string& socket_path, const std::string& command,
                   const ControlFields& fields, bool json);

}  // namespace berth
