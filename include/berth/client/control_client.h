#pragma once

#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace berth {

// The client side of berthd's control socket (request.h has the protocol), for berthctl and
// berth-announcer.

// Sends one request line and returns berthd's reply line, waiting at most `timeout` for each
// read and write. Errors say what an operator can do: no socket (berthd not running, or another
// --socket), permission denied, nobody listening.
absl::StatusOr<std::string> sendControlRequest(const std::string& socket_path,
                                               const std::string& request_json,
                                               absl::Duration timeout = absl::Seconds(10));

// A command's arguments, by the request's field names; empty values are left out.
using ControlFields = std::vector<std::pair<std::string, std::string>>;

// The request line for a command and its arguments, as JSON.
std::string controlRequestJson(const std::string& command, const ControlFields& fields);

}  // namespace berth
