#include "berth/health/http_probe.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth {
namespace {

// The status code of the HTTP status line ("HTTP/1.1 200 OK") that starts `response`, or -1
// while the line is incomplete or is not one.
int statusOf(absl::string_view response) {
  const size_t end = response.find('\n');
  if (end == absl::string_view::npos) return -1;
  absl::string_view line = response.substr(0, end);
  if (line.substr(0, 5) != "HTTP/") return -1;
  const size_t space = line.find(' ');
  if (space == absl::string_view::npos || line.size() < space + 4) return -1;
  int status = 0;
  if (!absl::SimpleAtoi(line.substr(space + 1, 3), &status)) return -1;
  return status;
}

}  // namespace

std::string httpProbeRequest(absl::string_view path, const IpAddress& host, uint16_t port) {
  return absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", Endpoint{host, port}.toString(),
                      "\r\nUser-Agent: berth-health\r\nConnection: close\r\n\r\n");
}

std::optional<ProbeVerdict> httpVerdictOf(absl::string_view response, bool closed,
                                          uint16_t expect_low, uint16_t expect_high) {
  if (const int status = statusOf(response); status >= 0) {
    const bool expected = status >= expect_low && status <= expect_high;
    return ProbeVerdict{expected, absl::StrCat(expected ? "HTTP " : "HTTP status ", status)};
  }
  if (closed) return ProbeVerdict{false, "connection closed without an HTTP status line"};
  if (response.size() >= kHttpResponseLimit) {
    return ProbeVerdict{false, "no HTTP status line in the first 1024 bytes"};
  }
  return std::nullopt;
}

}  // namespace berth
