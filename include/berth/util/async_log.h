#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <thread>

namespace berth {

// Log lines written to a file descriptor by a thread of their own, so that a slow reader of
// stderr (a pipe nobody drains, a journal under load) holds up that thread and never the caller:
// berthd's management loop must not wait on its log (docs/architecture.md, "The management
// loop"). The thread inherits the CPU placement of the thread that creates the log.
//
// Past kMaxQueuedLines waiting, new lines are dropped and counted, and the count is written
// once the writer catches up: a log that cannot keep up loses lines, never the caller's time.
class AsyncLog {
 public:
  static constexpr size_t kMaxQueuedLines = 4096;

  // `prefix` starts the line that reports dropped lines ("berthd: ").
  AsyncLog(int fd, std::string prefix);
  // Writes every line still queued, then stops the thread.
  ~AsyncLog();
  AsyncLog(const AsyncLog&) = delete;
  AsyncLog& operator=(const AsyncLog&) = delete;

  // Queues `line` (with its newline). Never waits for the writer.
  void write(std::string line);
  uint64_t dropped() const;

 private:
  void writeAll();

  const int fd_;
  const std::string prefix_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::string> queue_;
  uint64_t dropped_ = 0;             // in all
  uint64_t dropped_unreported_ = 0;  // since the writer last said so
  bool stopping_ = false;
  std::thread writer_;
};

}  // namespace berth
