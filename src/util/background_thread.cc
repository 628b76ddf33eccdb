#include "berth/util/background_thread.h"

#include <utility>

namespace berth {

BackgroundThread::BackgroundThread(size_t max_queued)
    : max_queued_(max_queued), thread_([this] { run(); }) {}

BackgroundThread::~BackgroundThread() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
    jobs_.clear();
  }
  wake_.notify_one();
  thread_.join();
}

bool BackgroundThread::post(std::function<void()> job) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (jobs_.size() >= max_queued_) return false;
    jobs_.push_back(std::move(job));
  }
  wake_.notify_one();
  return true;
}

void BackgroundThread::run() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !jobs_.empty(); });
    if (stopping_) return;
    std::function<void()> job = std::move(jobs_.front());
    jobs_.pop_front();
    lock.unlock();
    job();
    job = nullptr;  // what it captured is freed off the caller's thread too
    lock.lock();
  }
}

}  // namespace berth
