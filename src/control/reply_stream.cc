#include "berth/control/reply_stream.h"

#include <utility>

namespace berth {
namespace {

class WholeReply : public ReplyStream {
 public:
  explicit WholeReply(std::string reply) : reply_(std::move(reply)) {}
  Progress next(std::string& out, size_t) override {
    out += reply_;
    reply_.clear();
    return Progress::kDone;
  }

 private:
  std::string reply_;
};

class PollingReply : public ReplyStream {
 public:
  explicit PollingReply(std::function<std::optional<std::string>()> poll)
      : poll_(std::move(poll)) {}
  Progress next(std::string& out, size_t) override {
    std::optional<std::string> reply = poll_();
    if (!reply) return Progress::kWaiting;
    out += *reply;
    return Progress::kDone;
  }

 private:
  std::function<std::optional<std::string>()> poll_;
};

}  // namespace

std::unique_ptr<ReplyStream> pollingReply(std::function<std::optional<std::string>()> poll) {
  return std::make_unique<PollingReply>(std::move(poll));
}

std::unique_ptr<ReplyStream> wholeReply(std::string reply) {
  return std::make_unique<WholeReply>(std::move(reply));
}

std::string drainReply(ReplyStream& stream, size_t budget) {
  std::string out;
  while (stream.next(out, budget) != ReplyStream::Progress::kDone) {
  }
  return out;
}

}  // namespace berth
