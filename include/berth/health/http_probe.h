#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "berth/net/ip_address.h"

namespace berth {

// What an HTTP health probe says and reads, whichever way it travels: over a kernel socket
// (prober.h) or along the data path (path_conversation.h).

// Enough for any status line; the rest of the response is not read.
inline constexpr size_t kHttpResponseLimit = 1024;

// `GET path HTTP/1.0` to `host`:`port`, closing after the answer.
std::string httpProbeRequest(absl::string_view path, const IpAddress& host, uint16_t port);

// The status code of the HTTP status line ("HTTP/1.1 200 OK") that starts `response`, or -1
// while the line is incomplete or is not one.
int httpStatusOf(absl::string_view response);

}  // namespace berth
