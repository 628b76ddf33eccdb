// The TCP of a health probe that takes the data path (health/path_conversation.h). Pinned: a
// TCP check passes on the SYN-ACK that acknowledges berth's SYN and resets the connection; a
// reset that does is "refused"; an HTTP check sends its request with the handshake's ACK, sends
// it again when the SYN-ACK comes again, reads the status line in order across segments and
// resets after it; a close or a reset before a status line fails. Forged answers (SYN-ACKs
// acknowledging anything else, resets and data off the expected sequence) change nothing, even
// a million of them carrying a 200.

#include "berth/health/path_conversation.h"

#include <gtest/gtest.h>

#include <random>
#include <string>

#include "berth/health/http_probe.h"
#include "berth/net/packet_parser.h"

namespace berth {
namespace {

constexpr uint32_t kInitial = 0xfffffff0;  // the sequence wraps during the conversation
constexpr uint32_t kPeerInitial = 0x12345678;

TcpSegment synAck(uint32_t acknowledgement = kInitial + 1) {
  return TcpSegment{kTcpSyn | kTcpAck, kPeerInitial, acknowledgement, {}};
}

TcpSegment data(uint32_t sequence, absl::string_view payload, uint8_t flags = kTcpAck) {
  return TcpSegment{flags, sequence, kInitial + 1, payload};
}

TEST(PathConversationTest, ATcpCheckPassesOnTheHandshakeAndResetsIt) {
  PathConversation conversation(kInitial);
  const TcpSegment syn = conversation.opening();
  EXPECT_EQ(syn.flags, kTcpSyn);
  EXPECT_EQ(syn.sequence, kInitial);
  EXPECT_FALSE(conversation.closing().has_value()) << "nothing to reset before an answer";
  EXPECT_EQ(conversation.timeoutDetail(), "no answer");

  const PathConversation::Step step = conversation.receive(synAck());
  ASSERT_TRUE(step.verdict.has_value());
  EXPECT_TRUE(step.verdict->success);
  EXPECT_EQ(step.verdict->detail, "answered");
  ASSERT_TRUE(step.send.has_value());
  EXPECT_EQ(step.send->flags, kTcpRst);
  EXPECT_EQ(step.send->sequence, kInitial + 1);
  EXPECT_EQ(conversation.phase(), PathConversation::Phase::kDone);
  EXPECT_FALSE(conversation.receive(synAck()).verdict.has_value()) << "one verdict";
}

TEST(PathConversationTest, AResetThatAcknowledgesTheSynIsRefused) {
  PathConversation conversation(kInitial);
  const PathConversation::Step step =
      conversation.receive(TcpSegment{kTcpRst | kTcpAck, 0, kInitial + 1, {}});
  ASSERT_TRUE(step.verdict.has_value());
  EXPECT_FALSE(step.verdict->success);
  EXPECT_EQ(step.verdict->detail, "refused");
  EXPECT_FALSE(step.send.has_value());
  EXPECT_FALSE(conversation.closing().has_value()) << "the backend closed it itself";
}

TEST(PathConversationTest, ForgedAnswersToTheSynChangeNothing) {
  PathConversation conversation(kInitial);
  std::mt19937 random(7);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t acknowledgement = static_cast<uint32_t>(random());
    if (acknowledgement == kInitial + 1) ++acknowledgement;
    const uint8_t flags = i % 3 == 0 ? kTcpRst | kTcpAck : i % 3 == 1 ? kTcpSyn | kTcpAck : kTcpRst;
    const PathConversation::Step step = conversation.receive(TcpSegment{
        flags, static_cast<uint32_t>(random()), i % 3 == 2 ? kInitial + 1 : acknowledgement, {}});
    ASSERT_FALSE(step.verdict.has_value()) << i;
    ASSERT_FALSE(step.send.has_value()) << i;
  }
  // An ACK without SYN that acknowledges the SYN is no handshake either.
  EXPECT_FALSE(conversation.receive(TcpSegment{kTcpAck, 1, kInitial + 1, {}}).verdict);
  EXPECT_EQ(conversation.phase(), PathConversation::Phase::kConnecting);
  EXPECT_TRUE(conversation.receive(synAck()).verdict->success) << "the real answer still counts";
}

TEST(PathConversationTest, AnHttpCheckSendsItsRequestAndReadsTheStatusInOrder) {
  const std::string request = httpProbeRequest("/healthz", IpAddress::v4(198, 18, 100, 1), 80);
  PathConversation conversation(kInitial, request, 200, 399);
  PathConversation::Step step = conversation.receive(synAck());
  EXPECT_FALSE(step.verdict.has_value());
  ASSERT_TRUE(step.send.has_value());
  EXPECT_EQ(step.send->flags, kTcpAck | kTcpPsh);
  EXPECT_EQ(step.send->sequence, kInitial + 1);
  EXPECT_EQ(step.send->acknowledgement, kPeerInitial + 1);
  EXPECT_EQ(step.send->payload, request);
  EXPECT_EQ(conversation.phase(), PathConversation::Phase::kRequested);
  EXPECT_EQ(conversation.timeoutDetail(), "connected, no answer to the request");

  // The SYN-ACK again: the request was lost, and goes again.
  step = conversation.receive(synAck());
  ASSERT_TRUE(step.send.has_value());
  EXPECT_EQ(step.send->payload, request);

  // A segment ahead of the next byte is not read; the status line across two segments is.
  EXPECT_FALSE(conversation.receive(data(kPeerInitial + 9, "1.1 200 OK\r\n")).send);
  EXPECT_FALSE(conversation.receive(data(kPeerInitial + 1, "HTTP/1.1")).verdict);
  EXPECT_EQ(conversation.timeoutDetail(), "connected, no complete HTTP status line");
  step = conversation.receive(data(kPeerInitial + 9, " 200 OK\r\nServer: x\r\n"));
  ASSERT_TRUE(step.verdict.has_value());
  EXPECT_TRUE(step.verdict->success);
  EXPECT_EQ(step.verdict->detail, "HTTP 200");
  ASSERT_TRUE(step.send.has_value());
  EXPECT_EQ(step.send->flags, kTcpRst);
  EXPECT_EQ(step.send->sequence, static_cast<uint32_t>(kInitial + 1 + request.size()))
      << "after the request";
}

TEST(PathConversationTest, AnUnexpectedStatusACloseOrAResetFailsAnHttpCheck) {
  const std::string request = "GET / HTTP/1.0\r\n\r\n";
  {
    PathConversation conversation(kInitial, request, 200, 299);
    conversation.receive(synAck());
    const PathConversation::Step step =
        conversation.receive(data(kPeerInitial + 1, "HTTP/1.0 503 Busy\r\n"));
    EXPECT_FALSE(step.verdict->success);
    EXPECT_EQ(step.verdict->detail, "HTTP status 503");
    EXPECT_EQ(step.send->flags, kTcpRst);
  }
  {
    PathConversation conversation(kInitial, request, 200, 299);
    conversation.receive(synAck());
    const PathConversation::Step step =
        conversation.receive(data(kPeerInitial + 1, "nonsense", kTcpAck | kTcpFin));
    EXPECT_EQ(step.verdict->detail, "connection closed without an HTTP status line");
  }
  {
    PathConversation conversation(kInitial, request, 200, 299);
    conversation.receive(synAck());
    EXPECT_FALSE(conversation.receive(TcpSegment{kTcpRst, kPeerInitial + 5, 0, {}}).verdict)
        << "a reset off the next byte";
    const PathConversation::Step step =
        conversation.receive(TcpSegment{kTcpRst, kPeerInitial + 1, 0, {}});
    EXPECT_EQ(step.verdict->detail, "connection reset without an HTTP status line");
    EXPECT_FALSE(conversation.closing().has_value());
  }
  {
    PathConversation conversation(kInitial, request, 200, 299);
    conversation.receive(synAck());
    const std::string long_line(kHttpResponseLimit, 'x');
    const PathConversation::Step step = conversation.receive(data(kPeerInitial + 1, long_line));
    EXPECT_EQ(step.verdict->detail, "no HTTP status line in the first 1024 bytes");
  }
}

TEST(PathConversationTest, ForgedDataOffTheSequenceCannotPassAnHttpCheck) {
  PathConversation conversation(kInitial, "GET / HTTP/1.0\r\n\r\n", 200, 399);
  conversation.receive(synAck());
  std::mt19937 random(11);
  for (int i = 0; i < 1000000; ++i) {
    uint32_t sequence = static_cast<uint32_t>(random());
    if (sequence == kPeerInitial + 1) ++sequence;
    const PathConversation::Step step =
        conversation.receive(data(sequence, "HTTP/1.1 200 OK\r\n", kTcpAck | kTcpPsh));
    ASSERT_FALSE(step.verdict.has_value()) << i;
  }
  EXPECT_EQ(conversation.phase(), PathConversation::Phase::kRequested);
  // At the timeout the caller resets what the backend holds.
  ASSERT_TRUE(conversation.closing().has_value());
  EXPECT_EQ(conversation.closing()->sequence, kInitial + 1 + 18);
}

}  // namespace
}  // namespace berth
