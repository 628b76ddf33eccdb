// The records peers sent, as the management side keeps them (sync/peer_flow_store.h). Pinned:
// - names travel as hashes of "service" and "service/backend" and resolve to this instance's ids,
//   both ways; an unknown name is counted and dropped;
// - a record is kept until withdrawn or past its lifetime under an injected clock (which may
//   wrap); a refresh restarts the lifetime and is no change; a later record of the flow replaces
//   it, whoever sent it;
// - the store holds at most max_records and changes at most max_changes_per_second, each counted;
// - the expiry sweep does a bounded part per call and reaches every record;
// - flows() is what workers read: live records only, in local ids and states.

#include "berth/sync/peer_flow_store.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "support/sync_service.h"

namespace berth {
namespace {

constexpr uint64_t kSender = 0x1111;
constexpr uint64_t kOtherSender = 0x2222;

class PeerFlowStoreTest : public ::testing::Test {
 protected:
  PeerFlowStoreTest() : ids_(service_.ids), names_(service_.names) {}

  FlowRecord record(uint32_t client, const std::string& backend = "web/web-1",
                    FlowRecordState state = FlowRecordState::kTcpEstablished,
                    uint32_t lifetime_ms = 300'000) const {
    FlowRecord r;
    r.service = flowRecordName("web");
    r.backend = flowRecordName(backend);
    r.source = {198, 18, static_cast<uint8_t>(client >> 8), static_cast<uint8_t>(client)};
    r.source_port = static_cast<uint16_t>(client * 7);
    r.family = 4;
    r.state = state;
    r.lifetime_ms = lifetime_ms;
    return r;
  }
  uint16_t backendId(const std::string& qualified) const {
    const size_t slash = qualified.find('/');
    return static_cast<uint16_t>(
        *ids_.findBackend(qualified.substr(0, slash), qualified.substr(slash + 1)));
  }

  SyncService service_;
  const CounterIds& ids_;
  const FlowRecordNames& names_;
};

TEST_F(PeerFlowStoreTest, NamesResolveBothWays) {
  const uint16_t web = static_cast<uint16_t>(*ids_.findService("web"));
  const uint16_t dns = static_cast<uint16_t>(*ids_.findService("dns6"));
  EXPECT_EQ(names_.service(flowRecordName("web")), web);
  EXPECT_EQ(names_.serviceName(web), flowRecordName("web"));
  EXPECT_EQ(names_.serviceFamily(web), 4);
  EXPECT_EQ(names_.serviceFamily(dns), 6);
  EXPECT_EQ(names_.backend(flowRecordName("web/web-2")), backendId("web/web-2"));
  EXPECT_EQ(names_.backendName(backendId("dns6/dns-1")), flowRecordName("dns6/dns-1"));
  EXPECT_FALSE(names_.backend(flowRecordName("web-2")).has_value()) << "qualified names only";
  EXPECT_FALSE(names_.service(flowRecordName("mail")).has_value());
  EXPECT_EQ(names_.serviceName(999), 0u);
}

TEST_F(PeerFlowStoreTest, RecordsLiveUntilWithdrawnOrPastTheirLifetime) {
  PeerFlowStore store({});
  const uint32_t start = UINT32_MAX - 1'000;  // the clock wraps during the test
  store.apply(kSender, {record(1), record(2, "web/web-2", FlowRecordState::kTcpClosing, 10'000)},
              names_, start);
  EXPECT_EQ(store.size(), 2u);
  EXPECT_EQ(store.count(PeerFlowEvent::kApplied), 2u);
  EXPECT_TRUE(store.takeChanged());
  EXPECT_FALSE(store.takeChanged());

  std::vector<PeerFlow> flows = store.flows(names_, start + 1);
  ASSERT_EQ(flows.size(), 2u);
  EXPECT_EQ(flows[1].backend, backendId("web/web-2"));
  EXPECT_EQ(flows[1].state, ConnectionState::kTcpClosing);
  EXPECT_EQ(flows[1].expires_ms, start + 10'000);
  EXPECT_EQ(flows[0].source_port, 7);

  // Past the closing flow's lifetime: gone from flows() at once, and from the store on a sweep.
  EXPECT_EQ(store.flows(names_, start + 10'000).size(), 1u);
  store.expire(start + 10'000, 100);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.count(PeerFlowEvent::kExpired), 1u);
  EXPECT_TRUE(store.takeChanged());

  // A refresh restarts the lifetime and changes nothing the workers read but the expiry.
  store.apply(kSender, {record(1)}, names_, start + 200'000);
  EXPECT_EQ(store.count(PeerFlowEvent::kRefreshed), 1u);
  EXPECT_FALSE(store.takeChanged());
  store.expire(start + 300'000, 100);
  EXPECT_EQ(store.size(), 1u) << "the refresh moved its expiry";
  EXPECT_EQ(store.flows(names_, start + 300'000)[0].expires_ms, start + 500'000);

  store.apply(kSender, {record(1, "web/web-1", FlowRecordState::kWithdrawn, 0)}, names_,
              start + 300'001);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.count(PeerFlowEvent::kWithdrawn), 1u);
  EXPECT_TRUE(store.flows(names_, start + 300'001).empty());
}

TEST_F(PeerFlowStoreTest, ALaterRecordOfTheFlowReplacesItWhoeverSentIt) {
  PeerFlowStore store({});
  store.apply(kSender, {record(1, "web/web-1")}, names_, 0);
  store.apply(kOtherSender, {record(1, "web/web-2")}, names_, 10);
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.count(PeerFlowEvent::kApplied), 2u);
  EXPECT_EQ(store.flows(names_, 20)[0].backend, backendId("web/web-2"));
}

TEST_F(PeerFlowStoreTest, UnknownNamesAreDroppedAndCounted) {
  PeerFlowStore store({});
  FlowRecord unknown_service = record(1);
  unknown_service.service = flowRecordName("mail");
  store.apply(kSender, {unknown_service, record(2, "web/web-9")}, names_, 0);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.count(PeerFlowEvent::kUnknownName), 2u);
  EXPECT_FALSE(store.takeChanged());
}

TEST_F(PeerFlowStoreTest, ItHoldsAtMostMaxRecords) {
  PeerFlowStore store({.max_records = 100, .max_changes_per_second = 0});
  std::vector<FlowRecord> records;
  for (uint32_t client = 0; client < 150; ++client) records.push_back(record(client));
  store.apply(kSender, records, names_, 0);
  EXPECT_EQ(store.size(), 100u);
  EXPECT_EQ(store.count(PeerFlowEvent::kFull), 50u);
  // Full, a known flow still moves, and a withdrawal makes room.
  store.apply(kSender, {record(0, "web/web-2")}, names_, 1);
  EXPECT_EQ(store.count(PeerFlowEvent::kApplied), 101u);
  store.apply(kSender, {record(0, "web/web-2", FlowRecordState::kWithdrawn, 0), record(120)},
              names_, 2);
  EXPECT_EQ(store.size(), 100u);
  EXPECT_EQ(store.count(PeerFlowEvent::kFull), 50u);
}

TEST_F(PeerFlowStoreTest, ItChangesAtMostMaxChangesPerSecond) {
  PeerFlowStore store({.max_records = 10'000, .max_changes_per_second = 1'000});
  std::vector<FlowRecord> records;
  for (uint32_t client = 0; client < 3'000; ++client) records.push_back(record(client));
  store.apply(kSender, records, names_, 5'000);
  EXPECT_EQ(store.size(), 1'000u) << "a second's worth at once";
  EXPECT_EQ(store.count(PeerFlowEvent::kRateLimited), 2'000u);
  // Refreshes are no change: they pass when the bucket is empty.
  store.apply(kSender, {record(0), record(1)}, names_, 5'000);
  EXPECT_EQ(store.count(PeerFlowEvent::kRefreshed), 2u);
  EXPECT_EQ(store.count(PeerFlowEvent::kRateLimited), 2'000u);
  // Half a second later, half a second's worth more.
  store.apply(kSender, records, names_, 5'500);
  EXPECT_EQ(store.size(), 1'500u);
}

TEST_F(PeerFlowStoreTest, TheSweepIsBoundedAndReachesEveryRecord) {
  PeerFlowStore store({.max_records = 10'000, .max_changes_per_second = 0});
  std::vector<FlowRecord> records;
  for (uint32_t client = 0; client < 1'000; ++client) {
    records.push_back(record(client, "web/web-1", FlowRecordState::kTcpEstablished, 1'000));
  }
  store.apply(kSender, records, names_, 0);
  store.expire(2'000, 100);
  EXPECT_EQ(store.size(), 900u) << "a hundred slots a call";
  for (int call = 0; call < 9; ++call) store.expire(2'000, 100);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.count(PeerFlowEvent::kExpired), 1'000u);
  // Freed slots are used again.
  store.apply(kSender, records, names_, 3'000);
  EXPECT_EQ(store.size(), 1'000u);
  EXPECT_EQ(store.flows(names_, 3'001).size(), 1'000u);
}

TEST_F(PeerFlowStoreTest, StatesTravelAsTheWireHasThem) {
  for (ConnectionState state :
       {ConnectionState::kTcpEstablished, ConnectionState::kTcpClosing, ConnectionState::kUdp}) {
    EXPECT_EQ(connectionStateOf(flowRecordStateOf(state)), state);
  }
  for (ConnectionState state : {ConnectionState::kTcpOpening, ConnectionState::kTcpUnconfirmed,
                                ConnectionState::kUdpUnconfirmed, ConnectionState::kEmpty}) {
    EXPECT_EQ(flowRecordStateOf(state), FlowRecordState::kWithdrawn);
  }
}

}  // namespace
}  // namespace berth
