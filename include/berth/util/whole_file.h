#pragma once

#include <sys/types.h>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace berth {

// Writes `contents` to `path` whole: a new file of a unique name beside it, with `mode`, synced,
// renamed over `path`, and the directory synced, so that a reader (BIRD, or berthd after a crash
// or power loss) finds the old file or the new one, never half of one. A link at `path` is
// replaced, never followed. Errors (Unavailable) name the file and the system's reason.
absl::Status writeFileWhole(const std::string& path, absl::string_view contents, mode_t mode);

// The whole of the file at `path`: NotFound when there is none, Unavailable naming the system's
// reason when it cannot be read.
absl::StatusOr<std::string> readFileWhole(const std::string& path);

}  // namespace berth
