#pragma once

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace berth {

// An ordered start-up and teardown table, as DPVS keeps one in its main: each step has a name,
// a start and a stop. start() runs the starts in order; the first that fails names its step,
// and the steps before it are stopped in reverse. stop() stops every started step in reverse,
// once. A stop must undo its start and be safe to call after a start that failed half way.
struct StartStep {
  std::string name;
  std::function<absl::Status()> start;
  std::function<void()> stop;  // may be empty: nothing to undo
};

class StartSequence {
 public:
  explicit StartSequence(std::vector<StartStep> steps) : steps_(std::move(steps)) {}
  StartSequence(const StartSequence&) = delete;
  StartSequence& operator=(const StartSequence&) = delete;
  ~StartSequence() { stop(); }

  // The first failure as "STEP: message", with its code, after the steps before it are stopped.
  absl::Status start();
  void stop();

 private:
  std::vector<StartStep> steps_;
  size_t started_ = 0;  // steps whose start ran (the failed one included: its stop cleans up)
};

}  // namespace berth
