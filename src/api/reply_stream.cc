#include "berth/api/reply_stream.h"

#include <algorithm>
#include <utility>

namespace berth {
namespace {

// A reply handed out in pieces of the budget asked for, once `poll` has it: a whole reply of
// tens of megabytes (`backends` with 65,535 backends) goes out in pieces too, so the socket never
// holds, or shifts, more than a piece or two of it. The text is shared, never copied.
class SharedTextReply : public ReplyStream {
 public:
  explicit SharedTextReply(std::function<std::shared_ptr<const std::string>()> poll)
      : poll_(std::move(poll)) {}
  Progress next(std::string& out, size_t budget) override {
    if (text_ == nullptr) {
      text_ = poll_();
      if (text_ == nullptr) return Progress::kWaiting;
      poll_ = nullptr;
    }
    const size_t length = std::min(std::max<size_t>(budget, 1), text_->size() - offset_);
    out.append(*text_, offset_, length);
    offset_ += length;
    return offset_ == text_->size() ? Progress::kDone : Progress::kMore;
  }

 private:
  std::function<std::shared_ptr<const std::string>()> poll_;
  std::shared_ptr<const std::string> text_;
  size_t offset_ = 0;
};

}  // namespace

std::unique_ptr<ReplyStream> sharedTextReply(
    std::function<std::shared_ptr<const std::string>()> poll) {
  return std::make_unique<SharedTextReply>(std::move(poll));
}

std::unique_ptr<ReplyStream> pollingReply(std::function<std::optional<std::string>()> poll) {
  return sharedTextReply([poll = std::move(poll)]() -> std::shared_ptr<const std::string> {
    std::optional<std::string> reply = poll();
    if (!reply) return nullptr;
    return std::make_shared<const std::string>(std::move(*reply));
  });
}

std::unique_ptr<ReplyStream> wholeReply(std::string reply) {
  return sharedTextReply(
      [text = std::make_shared<const std::string>(std::move(reply))] { return text; });
}

std::string drainReply(ReplyStream& stream, size_t budget) {
  std::string out;
  while (stream.next(out, budget) != ReplyStream::Progress::kDone) {
  }
  return out;
}

}  // namespace berth
