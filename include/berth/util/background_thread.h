#pragma once

#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace berth {

// A thread that runs posted jobs one at a time, in order: what berthd does away from its
// management loop, which must not wait on it (docs/architecture.md, "The management loop").
//   - The thread takes the CPU placement of the thread that creates it; berthd creates its
//     background threads on the management lcore, so they never take a worker's CPU.
//   - It runs at its creator's priority. The loop sleeps between turns, so the scheduler runs it
//     first when it wakes; a lower priority was measured to gain nothing there, and starved a
//     reload's build for tens of seconds when a compiler shared the CPU.
//   - At most `max_queued` jobs wait; post() refuses more rather than let a queue grow without
//     bound.
class BackgroundThread {
 public:
  explicit BackgroundThread(size_t max_queued);
  // Drops the jobs that have not started and waits for the one running.
  ~BackgroundThread();
  BackgroundThread(const BackgroundThread&) = delete;
  BackgroundThread& operator=(const BackgroundThread&) = delete;

  // Queues `job`; false, and `job` dropped, when max_queued jobs already wait. Never waits.
  bool post(std::function<void()> job);

 private:
  void run();

  const size_t max_queued_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::deque<std::function<void()>> jobs_;
  std::thread thread_;
};

}  // namespace berth
