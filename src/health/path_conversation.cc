#include "berth/health/path_conversation.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "berth/health/http_probe.h"
#include "berth/net/packet_parser.h"

namespace berth {

PathConversation::PathConversation(TcpEndpoints endpoints, uint32_t initial_sequence,
                                   std::string request, uint16_t expect_low, uint16_t expect_high)
    : endpoints_(std::move(endpoints)),
      initial_sequence_(initial_sequence),
      request_(std::move(request)),
      expect_low_(expect_low),
      expect_high_(expect_high) {}

TcpSegment PathConversation::opening() const {
  return TcpSegment{kTcpSyn, initial_sequence_, 0, {}};
}

PathConversation::Step PathConversation::receive(const TcpSegment& segment) {
  Step step;
  if (phase_ == Phase::kDone) return step;
  const bool acknowledges_syn =
      (segment.flags & kTcpAck) != 0 && segment.acknowledgement == initial_sequence_ + 1;
  if (phase_ == Phase::kConnecting) {
    // RFC 793, SYN-SENT: only what acknowledges the SYN counts, a reset included (RFC 5961, 3.2).
    if (!acknowledges_syn) return step;
    if ((segment.flags & kTcpRst) != 0) {
      reset_by_peer_ = true;
      phase_ = Phase::kDone;
      step.verdict = PathVerdict{false, "refused"};
      return step;
    }
    if ((segment.flags & kTcpSyn) == 0) return step;
    connected_ = true;
    peer_next_ = segment.sequence + 1;
    if (request_.empty()) {
      phase_ = Phase::kDone;
      step.verdict = PathVerdict{true, "answered"};
      step.send = closing();
      return step;
    }
    phase_ = Phase::kRequested;
    step.send = TcpSegment{kTcpAck | kTcpPsh, initial_sequence_ + 1, peer_next_, request_};
    return step;
  }
  // Requested: the backend's SYN-ACK again means the request's segment was lost: once more.
  if ((segment.flags & kTcpSyn) != 0) {
    if (acknowledges_syn && segment.sequence + 1 == peer_next_ && response_.empty()) {
      step.send = TcpSegment{kTcpAck | kTcpPsh, initial_sequence_ + 1, peer_next_, request_};
    }
    return step;
  }
  // Otherwise only the backend's next bytes, in order, count; a reset only exactly there
  // (RFC 5961, 3.2). What the request's acknowledgement says is not needed: an answer is proof.
  if (segment.sequence != peer_next_) return step;
  if ((segment.flags & kTcpRst) != 0) {
    reset_by_peer_ = true;
    phase_ = Phase::kDone;
    step.verdict = PathVerdict{false, "connection reset without an HTTP status line"};
    return step;
  }
  if ((segment.flags & kTcpAck) == 0) return step;
  const size_t room = kHttpResponseLimit - response_.size();
  absl::StrAppend(&response_, segment.payload.substr(0, room));
  peer_next_ += static_cast<uint32_t>(segment.payload.size());
  const int status = httpStatusOf(response_);
  if (status >= 0) {
    const bool expected = status >= expect_low_ && status <= expect_high_;
    phase_ = Phase::kDone;
    step.verdict = PathVerdict{expected, absl::StrCat(expected ? "HTTP " : "HTTP status ", status)};
    step.send = closing();
    return step;
  }
  if ((segment.flags & kTcpFin) != 0 || response_.size() >= kHttpResponseLimit) {
    phase_ = Phase::kDone;
    step.verdict = PathVerdict{false, (segment.flags & kTcpFin) != 0
                                          ? "connection closed without an HTTP status line"
                                          : "no HTTP status line in the first 1024 bytes"};
    step.send = closing();
  }
  return step;
}

std::optional<TcpSegment> PathConversation::closing() const {
  if (!connected_ || reset_by_peer_) return std::nullopt;
  const uint32_t sent =
      phase_ == Phase::kConnecting || request_.empty() ? 0 : static_cast<uint32_t>(request_.size());
  return TcpSegment{kTcpRst, initial_sequence_ + 1 + sent, 0, {}};
}

std::string PathConversation::timeoutDetail() const {
  if (!connected_) return "no answer";
  return response_.empty() ? "connected, no answer to the request"
                           : "connected, no complete HTTP status line";
}

}  // namespace berth
