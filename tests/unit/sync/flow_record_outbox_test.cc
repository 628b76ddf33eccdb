// This instance's own news for its peers (sync/flow_record_outbox.h). Pinned:
// - a worker's news goes out under the wire's names and states, once, in order; a withdrawal
//   goes out too, and forgets the flow;
// - news of a service or backend no longer configured, and news past the queue's room, is
//   counted and dropped;
// - kept flows are what a restarted peer is sent again, paced by the cursor, each with the
//   lifetime it has left; kept flows age out under an injected clock.

#include "berth/sync/flow_record_outbox.h"

#include <gtest/gtest.h>

#include <vector>

#include "support/sync_service.h"

namespace berth {
namespace {

class FlowRecordOutboxTest : public ::testing::Test {
 protected:
  FlowRecordOutboxTest() {
    web_ = service_.web;
    web_1_ = service_.web_1;
    web_2_ = service_.web_2;
    names_ = service_.names;
  }

  FlowExport news(uint32_t client, uint16_t backend,
                  ConnectionState state = ConnectionState::kTcpEstablished,
                  uint32_t lifetime_ms = 300'000) const {
    FlowExport e;
    e.source = {198, 18, static_cast<uint8_t>(client >> 8), static_cast<uint8_t>(client)};
    e.source_port = static_cast<uint16_t>(client + 1);
    e.service = web_;
    e.backend = backend;
    e.state = state;
    e.lifetime_ms = state == ConnectionState::kEmpty ? 0 : lifetime_ms;
    return e;
  }
  std::vector<FlowRecord> takeAll(FlowRecordOutbox& outbox) {
    std::vector<FlowRecord> out;
    outbox.takeQueued(out, SIZE_MAX);
    return out;
  }

  SyncService service_;
  FlowRecordNames names_;
  uint16_t web_ = 0;
  uint16_t web_1_ = 0;
  uint16_t web_2_ = 0;
};

TEST_F(FlowRecordOutboxTest, NewsGoesOutOnceUnderTheWiresNames) {
  FlowRecordOutbox outbox({});
  outbox.add(news(1, web_1_), names_, 0);
  outbox.add(news(2, web_2_, ConnectionState::kTcpClosing, 10'000), names_, 0);
  outbox.add(news(1, web_1_, ConnectionState::kEmpty), names_, 5);
  const std::vector<FlowRecord> sent = takeAll(outbox);
  ASSERT_EQ(sent.size(), 3u);
  EXPECT_EQ(sent[0].service, flowRecordName("web"));
  EXPECT_EQ(sent[0].backend, flowRecordName("web/web-1"));
  EXPECT_EQ(sent[0].family, 4);
  EXPECT_EQ(sent[0].source_port, 2);
  EXPECT_EQ(sent[0].state, FlowRecordState::kTcpEstablished);
  EXPECT_EQ(sent[0].lifetime_ms, 300'000u);
  EXPECT_EQ(sent[1].state, FlowRecordState::kTcpClosing);
  EXPECT_EQ(sent[2].state, FlowRecordState::kWithdrawn);
  EXPECT_EQ(sent[2].lifetime_ms, 0u);
  EXPECT_TRUE(takeAll(outbox).empty());
  EXPECT_EQ(outbox.kept(), 1u) << "the withdrawn flow is forgotten";
  EXPECT_EQ(outbox.count(FlowOutboxEvent::kQueued), 3u);
}

TEST_F(FlowRecordOutboxTest, UnnamedNewsAndNewsPastTheQueuesRoomAreCounted) {
  FlowRecordOutbox outbox({.max_records = 100, .max_queued = 2});
  outbox.add(news(1, 999), names_, 0);
  EXPECT_EQ(outbox.count(FlowOutboxEvent::kUnnamed), 1u);
  for (uint32_t client = 0; client < 5; ++client) outbox.add(news(client, web_1_), names_, 0);
  EXPECT_EQ(outbox.queued(), 2u);
  EXPECT_EQ(outbox.count(FlowOutboxEvent::kQueueFull), 3u);
  EXPECT_EQ(outbox.kept(), 5u) << "kept for a resend all the same";
}

TEST_F(FlowRecordOutboxTest, ARestartedPeerIsSentTheKeptFlowsAgainPaced) {
  FlowRecordOutbox outbox({.max_records = 3, .max_queued = 100});
  for (uint32_t client = 0; client < 4; ++client) outbox.add(news(client, web_1_), names_, 1'000);
  EXPECT_EQ(outbox.kept(), 3u);
  EXPECT_EQ(outbox.count(FlowOutboxEvent::kKeptFull), 1u);
  std::vector<FlowRecord> again;
  size_t cursor = outbox.resend(0, 101'000, again, 2);
  ASSERT_EQ(again.size(), 2u);
  ASSERT_NE(cursor, FlowRecordOutbox::kResendDone);
  cursor = outbox.resend(cursor, 101'000, again, 2);
  EXPECT_EQ(cursor, FlowRecordOutbox::kResendDone);
  ASSERT_EQ(again.size(), 3u);
  for (const FlowRecord& record : again) {
    EXPECT_EQ(record.lifetime_ms, 200'000u) << "what is left of it";
    EXPECT_EQ(record.state, FlowRecordState::kTcpEstablished);
  }
}

TEST_F(FlowRecordOutboxTest, KeptFlowsAgeOut) {
  FlowRecordOutbox outbox({});
  outbox.add(news(1, web_1_, ConnectionState::kUdp, 30'000), names_, 0);
  outbox.add(news(2, web_1_), names_, 0);
  outbox.expire(30'000, 10);
  EXPECT_EQ(outbox.kept(), 1u);
  EXPECT_EQ(outbox.count(FlowOutboxEvent::kExpired), 1u);
  // A refresh moves the expiry.
  outbox.add(news(2, web_1_), names_, 250'000);
  outbox.expire(400'000, 10);
  EXPECT_EQ(outbox.kept(), 1u);
  std::vector<FlowRecord> again;
  EXPECT_EQ(outbox.resend(0, 600'000, again, 10), FlowRecordOutbox::kResendDone);
  EXPECT_TRUE(again.empty()) << "past its lifetime, though not swept yet";
}

}  // namespace
}  // namespace berth
