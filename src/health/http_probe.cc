#include "berth/health/http_probe.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace berth {

std::string httpProbeRequest(absl::string_view path, const IpAddress& host, uint16_t port) {
  return absl::StrCat("GET ", path, " HTTP/1.0\r\nHost: ", Endpoint{host, port}.toString(),
                      "\r\nUser-Agent: berth-health\r\nConnection: close\r\n\r\n");
}

int httpStatusOf(absl::string_view response) {
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

}  // namespace berth
