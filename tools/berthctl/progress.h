#pragma once

#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>

#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace berth {

// What a long command reports as it goes: a phase ("service web: single failures") and how far
// it is, done of total (total 0 when unknown).
using ProgressReport = std::function<void(absl::string_view phase, size_t done, size_t total)>;

// Progress on a terminal for work that takes more than a second or so: one line on stderr,
// rewritten in place at most ten times a second, and erased when the work is done, so that the
// report on stdout is what it would be without it. Silent when stderr is not a terminal, and
// for the first second (BERTHCTL_PROGRESS_AFTER_MS sets that delay, for tests).
class TerminalProgress {
 public:
  explicit TerminalProgress(FILE* out = stderr);
  ~TerminalProgress();
  TerminalProgress(const TerminalProgress&) = delete;
  TerminalProgress& operator=(const TerminalProgress&) = delete;

  void update(absl::string_view phase, size_t done, size_t total);
  // Erases the line, before the report goes to stdout on the same terminal.
  void finish();
  // A ProgressReport that updates this line, or none when nothing would be shown.
  ProgressReport report();

 private:
  FILE* out_;
  bool terminal_;
  absl::Time started_;
  absl::Duration delay_;
  absl::Time last_shown_ = absl::InfinitePast();
  bool shown_ = false;
  std::string phase_;  // the last one shown
};

}  // namespace berth
