#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/control/request.h"

namespace berth {

// berthctl's commands against a running berthd, over its control socket.

// Sends one request line and returns berthd's reply line. Errors say what an operator can do:
// no socket (berthd not running, or another --socket), permission denied, nobody listening.
absl::StatusOr<std::string> sendControlRequest(const std::string& socket_path,
                                               const std::string& request_json);

// A command's arguments, by the request's field names; empty values are left out.
using ControlFields = std::vector<std::pair<std::string, std::string>>;

// The request line for a command and its arguments, as JSON.
std::string controlRequestJson(const std::string& command, const ControlFields& fields);

// Runs a live command and prints berthd's answer: its text, or with `json` its JSON reply.
// Returns the process exit code: 0, or 1 with the error on stderr.
int runLiveCommand(const std::string& socket_path, const std::string& command,
                   const ControlFields& fields, bool json);

}  // namespace berth
