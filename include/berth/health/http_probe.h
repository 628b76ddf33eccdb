#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "berth/net/ip_address.h"

namespace berth {

// What an HTTP health probe says and reads, whichever way it travels: over a kernel socket
// (prober.h) or along the data path (path_conversation.h).

// Enough for any status line; the rest of the response is not read.
inline constexpr size_t kHttpResponseLimit = 1024;

// What a probe made of the backend, and why.
struct ProbeVerdict {
  bool success = false;
  std::string detail;  // "HTTP 200", "HTTP status 503", "refused", ...
};

// `GET path HTTP/1.0` to `host`:`port`, closing after the answer.
std::string httpProbeRequest(absl::string_view path, const IpAddress& host, uint16_t port);

// What the answer's first bytes, `response`, say: a verdict once its status line is complete (a
// status in [expect_low, expect_high] passes), or once the backend `closed` the connection or
// kHttpResponseLimit bytes came without one; nullopt while more may come.
std::optional<ProbeVerdict> httpVerdictOf(absl::string_view response, bool closed,
                                          uint16_t expect_low, uint16_t expect_high);

// Why an HTTP probe whose connection the backend reset before a status line failed.
inline constexpr absl::string_view kHttpResetDetail =
    "connection reset without an HTTP status line";

}  // namespace berth
