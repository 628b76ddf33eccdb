#include "berth/util/start_sequence.h"

#include "absl/strings/str_cat.h"

namespace berth {

absl::Status StartSequence::start() {
  for (const StartStep& step : steps_) {
    ++started_;
    if (absl::Status status = step.start(); !status.ok()) {
      stop();
      return absl::Status(status.code(), absl::StrCat(step.name, ": ", status.message()));
    }
  }
  return absl::OkStatus();
}

void StartSequence::stop() {
  for (; started_ > 0; --started_) {
    const StartStep& step = steps_[started_ - 1];
    if (step.stop) step.stop();
  }
}

}  // namespace berth
