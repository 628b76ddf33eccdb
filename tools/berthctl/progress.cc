#include "progress.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace berth {

TerminalProgress::TerminalProgress(FILE* out)
    : out_(out),
      terminal_(isatty(fileno(out)) == 1),
      started_(absl::Now()),
      delay_(absl::Seconds(1)) {
  int64_t delay_ms = 0;
  if (const char* setting = std::getenv("BERTHCTL_PROGRESS_AFTER_MS");
      setting != nullptr && absl::SimpleAtoi(setting, &delay_ms) && delay_ms >= 0) {
    delay_ = absl::Milliseconds(delay_ms);
  }
}

TerminalProgress::~TerminalProgress() { finish(); }

void TerminalProgress::finish() {
  // "\r" and erase-line: the terminal is as it was before the first update.
  if (shown_) std::fputs("\r\033[K", out_);
  shown_ = false;
  std::fflush(out_);
}

void TerminalProgress::update(absl::string_view phase, size_t done, size_t total) {
  if (!terminal_) return;
  const absl::Time now = absl::Now();
  // A new phase shows at once; within one, ten updates a second are enough.
  const bool new_phase = phase != phase_;
  if (now - started_ < delay_ || (!new_phase && now - last_shown_ < absl::Milliseconds(100))) {
    return;
  }
  phase_ = std::string(phase);
  last_shown_ = now;
  shown_ = true;
  const double seconds = absl::ToDoubleSeconds(now - started_);
  if (total == 0) {
    absl::FPrintF(out_, "\r\033[K%s (%.0f s)", phase, seconds);
  } else {
    absl::FPrintF(out_, "\r\033[K%s: %u of %u (%.0f%%, %.0f s)", phase, done, total,
                  100.0 * static_cast<double>(done) / static_cast<double>(total), seconds);
  }
  std::fflush(out_);
}

ProgressReport TerminalProgress::report() {
  if (!terminal_) return nullptr;
  return [this](absl::string_view phase, size_t done, size_t total) { update(phase, done, total); };
}

}  // namespace berth
