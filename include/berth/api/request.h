#pragma once

#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// The control socket's protocol: one request per line, a flat JSON object of string values with
// a "command" key, as berthctl sends them:
//
//   {"command": "drain", "service": "web", "backend": "web-1"}
//
// and one reply per line, a JSON object with "ok": true and the command's fields, or "ok": false
// and an "error" that says what was wrong. berthd closes the connection after the reply.
struct ControlRequest {
  std::string command;
  absl::flat_hash_map<std::string, std::string> fields;  // every key but "command"

  // The value of `key`, or "" when absent.
  const std::string& field(absl::string_view key) const;
};

// Requests longer than this are refused without being read further.
inline constexpr size_t kMaxControlRequestBytes = 4096;

// Parses one request line with nlohmann's JSON parser. Errors (InvalidArgument) say what is wrong
// and where: not an object, a value that is not a string, a bad escape, a repeated key, no
// "command". Accepts the JSON string escapes, \uXXXX included (as UTF-8, a surrogate only as half
// of a pair), and any whitespace between tokens.
absl::StatusOr<ControlRequest> parseControlRequest(absl::string_view line);

// What berthctl needs of a reply: whether it succeeded, and its top-level string fields ("error",
// and "text", the human rendering berthd includes). Other values are checked for well-formed
// JSON and skipped.
struct ControlReply {
  bool ok = false;
  absl::flat_hash_map<std::string, std::string> strings;
};
absl::StatusOr<ControlReply> parseControlReply(absl::string_view line);

}  // namespace berth
