#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "absl/strings/string_view.h"
#include "berth/health/http_probe.h"
#include "berth/net/tcp_segment.h"

namespace berth {

// A health probe that takes the data path: berth opens a TCP connection from its port's own
// address to the service's VIP and port, each segment sent to one backend the way the service's
// traffic goes (encapsulated, or at the backend's MAC), and the backend answers from the VIP
// straight back to berth's address, as it answers clients. The connection is berth's own, made of
// crafted segments rather than a kernel socket's: this is that connection's TCP, from berth's
// side. Pure: the caller sends what it gives and hands it what arrives on its endpoints; the
// clock is the caller's too.
//
// A TCP check passes when the backend completes the handshake; an HTTP check sends its request
// with the handshake's last ACK and passes on an expected status line. Either way the
// conversation ends with a reset, so the backend keeps nothing of it. Segments that do not
// follow the conversation (a SYN-ACK that does not acknowledge berth's random initial sequence,
// data not at the next expected sequence, a reset outside it) change nothing, so a flood of
// forged answers cannot pass a probe: it would have to guess 32 random bits.

class PathConversation {
 public:
  enum class Phase : uint8_t {
    kConnecting,  // the SYN is out
    kRequested,   // HTTP: connected, the request is out, the status line not complete
    kDone,        // a verdict was given
  };

  // `request`: empty for a TCP check; an HTTP check's request (http_probe.h), answered by a
  // status in [expect_low, expect_high]. The endpoints are the caller's, which matches what
  // arrives on them.
  explicit PathConversation(uint32_t initial_sequence, std::string request = {},
                            uint16_t expect_low = 200, uint16_t expect_high = 399);

  Phase phase() const { return phase_; }

  // The SYN that opens it, with the MSS this end takes.
  TcpSegment opening() const;
  static constexpr uint16_t kMaximumSegmentSize = 1400;

  // What a segment from the VIP's end of the connection makes berth send, and the verdict it
  // gives, if any. A segment that does not belong changes nothing and asks nothing.
  struct Step {
    std::optional<TcpSegment> send;  // its payload points into this conversation
    std::optional<ProbeVerdict> verdict;
  };
  Step receive(const TcpSegment& segment);

  // The reset that ends the connection at the backend: once it answered the SYN and has not
  // reset the connection itself. Sent with a verdict, or when the caller gives up on one.
  std::optional<TcpSegment> closing() const;

  // Why a probe that got no verdict in its time failed: what was missing, given the phase.
  std::string timeoutDetail() const;

 private:
  // The verdict, with the reset that ends the connection where it is still up.
  Step finish(ProbeVerdict verdict);
  // The request, with the acknowledgement of the backend's SYN.
  TcpSegment requestSegment() const;

  uint32_t initial_sequence_;
  std::string request_;
  uint16_t expect_low_;
  uint16_t expect_high_;
  Phase phase_ = Phase::kConnecting;
  bool connected_ = false;      // the backend acknowledged the SYN
  bool reset_by_peer_ = false;  // the backend reset the connection
  uint32_t peer_next_ = 0;      // the next byte expected from the backend
  std::string response_;        // HTTP: the answer's first bytes, in order
};

}  // namespace berth
