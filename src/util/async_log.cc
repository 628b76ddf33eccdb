#include "berth/util/async_log.h"

#include <errno.h>
#include <unistd.h>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

void writeFully(int fd, const std::string& text) {
  size_t written = 0;
  while (written < text.size()) {
    const ssize_t n = ::write(fd, text.data() + written, text.size() - written);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;  // nowhere to write to: the line is lost, the writer goes on
    written += static_cast<size_t>(n);
  }
}

}  // namespace

AsyncLog::AsyncLog(int fd, std::string prefix)
    : fd_(fd), prefix_(std::move(prefix)), writer_([this] { writeAll(); }) {}

AsyncLog::~AsyncLog() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_one();
  writer_.join();
}

void AsyncLog::write(std::string line) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (queue_.size() >= kMaxQueuedLines) {
      ++dropped_;
      ++dropped_unreported_;
      return;
    }
    queue_.push_back(std::move(line));
  }
  wake_.notify_one();
}

uint64_t AsyncLog::dropped() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return dropped_;
}

void AsyncLog::writeAll() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [this] { return stopping_ || !queue_.empty(); });
    if (queue_.empty() && stopping_) return;
    std::deque<std::string> batch;
    batch.swap(queue_);
    const uint64_t dropped = dropped_unreported_;
    dropped_unreported_ = 0;
    lock.unlock();
    std::string text;
    for (const std::string& line : batch) text += line;
    if (dropped > 0) {
      absl::StrAppend(&text, prefix_, dropped,
                      " log line(s) dropped: the log was not being read fast enough\n");
    }
    writeFully(fd_, text);
    lock.lock();
  }
}

}  // namespace berth
