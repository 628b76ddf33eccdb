#include "berth/health/path_conversation.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "berth/health/http_probe.h"
#include "berth/net/packet_parser.h"

namespace berth {

PathConversation::PathConversation(uint32_t initial_sequence, std::string request,
                                   uint16_t expect_low, uint16_t expect_high)
    : initial_sequence_(initial_sequence),
      request_(std::move(request)),
      expect_low_(expect_low),
      expect_high_(expect_high) {}

TcpSegment PathConversation::opening() const {
  return TcpSegment{kTcpSyn, initial_sequence_, 0, {}};
}

TcpSegment PathConversation::requestSegment() const {
  return TcpSegment{kTcpAck | kTcpPsh, initial_sequence_ + 1, peer_next_, request_};
}

PathConversation::Step PathConversation::finish(ProbeVerdict verdict) {
  phase_ = Phase::kDone;
  return Step{closing(), std::move(verdict)};
}

PathConversation::Step PathConversation::receive(const TcpSegment& segment) {
  if (phase_ == Phase::kDone) return {};
  const bool acknowledges_syn =
      (segment.flags & kTcpAck) != 0 && segment.acknowledgement == initial_sequence_ + 1;
  const bool reset = (segment.flags & kTcpRst) != 0;
  if (phase_ == Phase::kConnecting) {
    // RFC 793, SYN-SENT: only what acknowledges the SYN counts, a reset included (RFC 5961, 3.2).
    if (!acknowledges_syn) return {};
    if (reset) {
      reset_by_peer_ = true;
      return finish({false, "refused"});
    }
    if ((segment.flags & kTcpSyn) == 0) return {};
    connected_ = true;
    peer_next_ = segment.sequence + 1;
    if (request_.empty()) return finish({true, "answered"});
    phase_ = Phase::kRequested;
    return Step{requestSegment(), std::nullopt};
  }
  // Requested: the backend's SYN-ACK again means the request's segment was lost: once more.
  if ((segment.flags & kTcpSyn) != 0) {
    if (acknowledges_syn && segment.sequence + 1 == peer_next_ && response_.empty()) {
      return Step{requestSegment(), std::nullopt};
    }
    return {};
  }
  // Otherwise only the backend's next bytes, in order, count; a reset only exactly there
  // (RFC 5961, 3.2). What the request's acknowledgement says is not needed: an answer is proof.
  if (segment.sequence != peer_next_) return {};
  if (reset) {
    reset_by_peer_ = true;
    return finish({false, std::string(kHttpResetDetail)});
  }
  if ((segment.flags & kTcpAck) == 0) return {};
  absl::StrAppend(&response_, segment.payload.substr(0, kHttpResponseLimit - response_.size()));
  peer_next_ += static_cast<uint32_t>(segment.payload.size());
  if (std::optional<ProbeVerdict> verdict =
          httpVerdictOf(response_, (segment.flags & kTcpFin) != 0, expect_low_, expect_high_)) {
    return finish(*std::move(verdict));
  }
  return {};
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
