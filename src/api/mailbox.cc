#include "berth/api/mailbox.h"

#include <algorithm>

namespace berth {

bool ManagementMailbox::run(const std::function<void()>& task, absl::Duration patience) {
  std::unique_lock<std::mutex> lock(mutex_);
  if (!open_) return false;
  Task pending{&task};
  queue_.push_back(&pending);
  finished_.wait_for(lock, absl::ToChronoMilliseconds(patience), [&] { return pending.done; });
  if (!pending.done) {
    // Not started (serve() runs tasks under the lock): take it back.
    std::erase(queue_, &pending);
  }
  return pending.done;
}

void ManagementMailbox::serve() {
  std::lock_guard<std::mutex> lock(mutex_);
  if (queue_.empty()) return;
  while (!queue_.empty()) {
    Task* task = queue_.front();
    queue_.pop_front();
    (*task->work)();
    task->done = true;
  }
  finished_.notify_all();
}

void ManagementMailbox::setOpen(bool open) {
  std::lock_guard<std::mutex> lock(mutex_);
  open_ = open;
  if (!open) queue_.clear();  // their callers see done == false when they wake
  finished_.notify_all();
}

}  // namespace berth
