#pragma once

#include <cstdint>

#include "absl/strings/string_view.h"

namespace berth {

// A line of berthd's log on stderr. Between startLogThread() and stopLogThread() (while the
// lcores run) it is written by a thread of its own, so that the management loop never waits on
// stderr (util/async_log.h); outside them, at once.
void logLine(absl::string_view line);
// Lines the log thread dropped because stderr did not keep up.
uint64_t logLinesDropped();
// Called on the main lcore, whose CPU the log thread then shares.
void startLogThread();
void stopLogThread();

}  // namespace berth
