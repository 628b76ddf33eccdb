#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>

#include "absl/time/time.h"

namespace berth {

// Runs work on the management thread for other threads: DPDK's telemetry thread calls berth's
// /berth/... commands, and their answers come from state only the management thread may read.
// A caller queues a task and waits; the management loop runs queued tasks between its other
// work. A task runs with the mailbox's lock held, so a caller that gave up waiting has either
// seen its task finish or taken it back unrun: a task may safely point into its caller's frame.
class ManagementMailbox {
 public:
  // From any thread: runs `task` on the management thread. False if the mailbox is closed or the
  // management thread did not get to it within `patience`.
  bool run(const std::function<void()>& task, absl::Duration patience);
  // The management thread: runs every queued task.
  void serve();
  // Opens or closes the mailbox; a closed one refuses new tasks and takes back queued ones.
  void setOpen(bool open);

 private:
  struct Task {
    const std::function<void()>* work;
    bool done = false;
  };
  std::mutex mutex_;
  std::condition_variable finished_;
  std::deque<Task*> queue_;
  bool open_ = false;
};

}  // namespace berth
