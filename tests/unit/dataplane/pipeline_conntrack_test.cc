// The pipeline with a connection table: tracked flows keep their backend while the Maglev table
// changes under them, and move only when their backend is removed, unhealthy, or drained under
// the repick policy.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "berth/net/flow_hash.h"
#include "support/conntrack_harness.h"
#include "support/packet_builder.h"

namespace berth {
namespace {

using Harness = ConntrackHarness;

constexpr uint16_t kFirstPort = 20000;
constexpr uint16_t kFlows = 2000;

std::map<uint16_t, std::string> sendAll(Harness& harness, uint8_t flags = kTcpAck) {
  std::map<uint16_t, std::string> backends;
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
    backends[port] = harness.send(port, flags);
  }
  return backends;
}

TEST(PipelineConntrackTest, AMissIsPickedAndRecordedAndTheNextPacketHits) {
  Harness harness;
  harness.use(configWith({{1, 1}, {2, 1}}));
  const std::string first = harness.send(40000, kTcpSyn);
  EXPECT_EQ(harness.count(ConntrackEvent::kMiss), 1u);
  EXPECT_EQ(harness.count(ConntrackEvent::kInsert), 1u);
  EXPECT_EQ(harness.send(40000), first);
  EXPECT_EQ(harness.count(ConntrackEvent::kHit), 1u);
  EXPECT_EQ(first, harness.tablePick(40000));
}

// The attack the keyed bucket hash stops: flows computed offline, with the public flow hash, to
// share a tracked victim's bucket. When the bucket was the flow hash, eight such SYNs evicted
// the victim; now they land in buckets nobody can predict.
TEST(PipelineConntrackTest, SynsComputedToCollideWithAVictimDoNotEvictIt) {
  Harness harness;
  harness.use(configWith({{1, 1}, {2, 1}}));
  const uint32_t mask = ConnectionTable::bucketsFor(1 << 16) - 1;
  const auto bucketByFlowHash = [&](const IpAddress& client, uint16_t port) {
    const FlowKey flow = FlowKey::make(client, kVip, port, 80, kProtocolTcp);
    return flowHash(flow, HashFields::kFiveTuple, kDefaultFlowHashSeed) & mask;
  };
  const std::string victim = harness.sendFrom(kClient, 40000, kTcpSyn);
  harness.sendFrom(kClient, 40000, kTcpAck);
  const uint32_t target = bucketByFlowHash(kClient, 40000);
  int colliding = 0;
  for (uint32_t i = 0; colliding < 64 && i < (1u << 24); ++i) {
    const IpAddress client = IpAddress::v4(198, 19, static_cast<uint8_t>(i >> 16 & 0xff),
                                           static_cast<uint8_t>(i >> 8 & 0xff));
    const auto port = static_cast<uint16_t>(1024 + (i & 0xff) * 251);
    if (bucketByFlowHash(client, port) != target) continue;
    ++colliding;
    harness.sendFrom(client, port, kTcpSyn);
  }
  ASSERT_EQ(colliding, 64);
  EXPECT_EQ(harness.count(ConntrackEvent::kEviction), 0u);
  const uint64_t hits = harness.count(ConntrackEvent::kHit);
  EXPECT_EQ(harness.sendFrom(kClient, 40000, kTcpAck), victim);
  EXPECT_EQ(harness.count(ConntrackEvent::kHit), hits + 1) << "the victim is still tracked";
}

// A flow first seen mid-way (a lone ACK) is unconfirmed: if it is spoofed it is gone after the
// opening timeout; if ECMP moved a real one here, its next packet confirms it and it keeps its
// backend as any established connection does.
TEST(PipelineConntrackTest, ALoneAckExpiresQuicklyWhileAMovedFlowIsConfirmed) {
  Harness harness;
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  std::map<uint16_t, std::string> first;
  harness.state.now_ms = 1'000;
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
    first[port] = harness.send(port, kTcpAck);
  }
  EXPECT_EQ(harness.count(ConntrackEvent::kUnconfirmedInsert), kFlows);
  harness.state.now_ms = 1'010;
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; port += 2) {
    EXPECT_EQ(harness.send(port, kTcpAck), first[port]);
  }
  EXPECT_EQ(harness.count(ConntrackEvent::kConfirmation), kFlows / 2);
  // Past the opening timeout, a backend joins: the confirmed flows stay, the lone ACKs' entries
  // are gone and their next packets take the new table's pick.
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  harness.state.now_ms = 1'010 + 5'001;
  size_t moved_lone = 0;
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) {
    const std::string now = harness.send(port, kTcpAck);
    if (port % 2 == 0) {
      EXPECT_EQ(now, first[port]) << "confirmed flow " << port;
    } else {
      EXPECT_EQ(now, harness.tablePick(port)) << "expired lone ACK " << port;
      moved_lone += now != first[port];
    }
  }
  EXPECT_GT(moved_lone, kFlows / 20) << "the new table moved some of them";
  EXPECT_EQ(harness.count(ConntrackEvent::kExpiry), kFlows / 2);
}

TEST(PipelineConntrackTest, FlowsStayOnTheirBackendWhenAnotherBackendJoins) {
  Harness harness;
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  const std::map<uint16_t, std::string> before = sendAll(harness, kTcpSyn);
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  size_t table_moves = 0;
  for (const auto& [port, backend] : before) table_moves += harness.tablePick(port) != backend;
  EXPECT_GT(table_moves, kFlows / 10) << "the new table reassigns about a fifth of these flows";
  EXPECT_EQ(sendAll(harness), before) << "tracked flows keep their backend";
  // A new flow can go to the new backend.
  size_t to_new = 0;
  for (uint16_t port = 1000; port < 1500; ++port)
    to_new += harness.send(port, kTcpSyn) == "198.18.5.2";
  EXPECT_GT(to_new, 0u);
}

TEST(PipelineConntrackTest, OnlyTheFlowsOfARemovedBackendMove) {
  Harness harness;
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  const std::map<uint16_t, std::string> before = sendAll(harness, kTcpSyn);
  harness.use(configWith({{1, 1}, {3, 1}, {4, 1}}));
  const std::map<uint16_t, std::string> after = sendAll(harness);
  size_t moved = 0;
  for (const auto& [port, backend] : before) {
    if (backend == "198.18.2.2") {
      EXPECT_EQ(after.at(port), harness.tablePick(port)) << "re-picked from the current table";
      ++moved;
    } else {
      EXPECT_EQ(after.at(port), backend) << "port " << port;
    }
  }
  EXPECT_EQ(harness.count(ConntrackEvent::kRepick), moved);
  EXPECT_GT(moved, 0u);
}

TEST(PipelineConntrackTest, FlowsOfAnUnhealthyBackendMoveAndComeBackOnlyAsNewFlows) {
  Harness harness;
  const std::string config = configWith({{1, 1}, {2, 1}, {3, 1}});
  harness.use(config);
  const std::map<uint16_t, std::string> before = sendAll(harness, kTcpSyn);
  harness.use(config, {"web-3"});
  const std::map<uint16_t, std::string> during = sendAll(harness);
  for (const auto& [port, backend] : before) {
    EXPECT_NE(during.at(port), "198.18.3.2");
    if (backend != "198.18.3.2") {
      EXPECT_EQ(during.at(port), backend);
    }
  }
  // web-3 recovers: the moved flows stay where they went, as connections do.
  harness.use(config);
  EXPECT_EQ(sendAll(harness), during);
}

TEST(PipelineConntrackTest, PerBackendConnectionCountsFollowFlowsAsTheyMove) {
  Harness harness;
  const std::string config = configWith({{1, 1}, {2, 1}, {3, 1}});
  harness.use(config);
  std::map<std::string, uint64_t> shares;
  for (const auto& [port, backend] : sendAll(harness, kTcpSyn)) ++shares[backend];
  EXPECT_EQ(harness.serviceConnections(), kFlows);
  for (int b = 1; b <= 3; ++b) {
    EXPECT_EQ(harness.connectionsOf(absl::StrCat("web-", b)),
              shares[absl::StrCat("198.18.", b, ".2")]);
  }
  // web-3 fails: its connections are re-picked on their next packet, and counted where they went.
  harness.use(config, {"web-3"});
  shares.clear();
  for (const auto& [port, backend] : sendAll(harness)) ++shares[backend];
  EXPECT_EQ(harness.connectionsOf("web-3"), 0u);
  EXPECT_EQ(harness.connectionsOf("web-1"), shares["198.18.1.2"]);
  EXPECT_EQ(harness.connectionsOf("web-2"), shares["198.18.2.2"]);
  EXPECT_EQ(harness.serviceConnections(), kFlows);
}

TEST(PipelineConntrackTest, ExplainNamesTheBackendThePipelineThenSendsTheNextPacketTo) {
  for (const std::string policy : {"keep_established", "repick"}) {
    SCOPED_TRACE(policy);
    Harness harness;
    const std::string config = configWith({{1, 1}, {2, 1}, {3, 1}}, policy);
    auto agree = [&](const char* stage) {
      for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; port += 7) {
        const std::string explained = harness.explain(port);
        ASSERT_EQ(explained, harness.send(port)) << stage << ", port " << port;
      }
    };
    harness.use(config);
    agree("new flows");
    agree("tracked flows");
    harness.use(config, {"web-2"});
    agree("web-2 unhealthy");
    harness.use(configWith({{1, 1}, {2, 1}, {3, 0}}, policy));
    agree("web-3 drained");
    harness.use(configWith({{1, 1}, {3, 1}}, policy));
    agree("web-2 removed");
    harness.state.now_ms += 400'000;
    agree("every entry expired");
    harness.use(config, {"web-1", "web-2", "web-3"});
    agree("every backend down");
  }
}

TEST(PipelineConntrackTest, ADrainedBackendKeepsItsConnectionsUnlessTheServiceRepicks) {
  for (const std::string policy : {"keep_established", "repick"}) {
    SCOPED_TRACE(policy);
    Harness harness;
    harness.use(configWith({{1, 1}, {2, 1}, {3, 1}}, policy));
    const std::map<uint16_t, std::string> before = sendAll(harness, kTcpSyn);
    harness.use(configWith({{1, 1}, {2, 0}, {3, 1}}, policy));
    const std::map<uint16_t, std::string> after = sendAll(harness);
    for (const auto& [port, backend] : before) {
      if (backend == "198.18.2.2" && policy == "repick") {
        EXPECT_NE(after.at(port), backend);
      } else {
        EXPECT_EQ(after.at(port), backend);
      }
    }
    for (uint16_t port = 1000; port < 1500; ++port) {
      EXPECT_NE(harness.send(port, kTcpSyn), "198.18.2.2") << "no new flow to a drained backend";
    }
  }
}

TEST(PipelineConntrackTest, ASynAfterAClosedConnectionIsANewConnection) {
  Harness harness;
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  const std::map<uint16_t, std::string> before = sendAll(harness, kTcpSyn);
  for (uint16_t port = kFirstPort; port < kFirstPort + kFlows; ++port) harness.send(port, kTcpFin);
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  for (const auto& [port, backend] : before) {
    EXPECT_EQ(harness.send(port, kTcpSyn), harness.tablePick(port)) << "port " << port;
  }
  EXPECT_EQ(harness.count(ConntrackEvent::kRepick), 0u);
}

TEST(PipelineConntrackTest, IcmpErrorsFollowTheConnectionAndCreateNone) {
  Harness harness;
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}}));
  auto icmpAbout = [](uint16_t port) {
    const Bytes embedded = concat({ipv4(kVip, kClient, kProtocolTcp, 20), tcp(80, port)});
    return concat({ethernet(kEtherTypeIpv4),
                   ipv4(IpAddress::v4(198, 18, 9, 9), kVip, kProtocolIcmp, 8 + embedded.size()),
                   icmp(3, 4), embedded});
  };
  const std::map<uint16_t, std::string> before = sendAll(harness, kTcpSyn);
  harness.use(configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}, {5, 1}}));
  for (const auto& [port, backend] : before) EXPECT_EQ(harness.deliver(icmpAbout(port)), backend);
  const uint64_t inserts = harness.count(ConntrackEvent::kInsert);
  harness.deliver(icmpAbout(9));
  EXPECT_EQ(harness.count(ConntrackEvent::kInsert), inserts) << "an untracked flow's error";
}

// Four equal backends under bounded_load: 1.25.
std::string boundedConfig() {
  std::string yaml = configWith({{1, 1}, {2, 1}, {3, 1}, {4, 1}});
  const std::string marker = "    backends:\n";
  yaml.insert(yaml.find(marker), "    bounded_load: 1.25\n");
  return yaml;
}

TEST(PipelineBoundedLoadTest, NewFlowsPassABackendAtItsBoundAndTrackedOnesStay) {
  Harness harness;
  harness.use(boundedConfig());
  // 400 connections before any load is published, about a quarter of them on web-1.
  std::map<uint16_t, std::string> tracked;
  uint32_t tracked_on_web_1 = 0;
  for (uint16_t port = kFirstPort; port < kFirstPort + 400; ++port) {
    tracked[port] = harness.send(port, kTcpSyn);
    tracked_on_web_1 += tracked[port] == "198.18.1.2";
  }
  EXPECT_GT(tracked_on_web_1, 80u);
  const uint64_t fallbacks_before = harness.count(ConntrackEvent::kBoundedLoadFallback);
  // Other workers have loaded web-1 far past 1.25 x the mean.
  harness.publishLoads({{"web-1", 3000}, {"web-2", 100}, {"web-3", 100}, {"web-4", 100}});
  uint32_t picked_web_1 = 0;
  for (uint16_t port = kFirstPort + 400; port < kFirstPort + 2400; ++port) {
    const std::string backend = harness.send(port, kTcpSyn);
    EXPECT_NE(backend, "198.18.1.2") << port;
    picked_web_1 += harness.tablePick(port) == "198.18.1.2";
  }
  EXPECT_GT(picked_web_1, 400u);
  EXPECT_GE(harness.count(ConntrackEvent::kBoundedLoadFallback) - fallbacks_before, picked_web_1);
  // Load never moves a tracked connection, web-1's included.
  for (const auto& [port, backend] : tracked) EXPECT_EQ(harness.send(port), backend) << port;
}

// explain models bounded load: for a new flow whose table pick is at its bound it names the
// fallback, the backend the pipeline then sends the flow to.
TEST(PipelineBoundedLoadTest, ExplainNamesTheFallbackThePipelineTakes) {
  Harness harness;
  harness.use(boundedConfig());
  harness.publishLoads({{"web-1", 3000}, {"web-2", 100}, {"web-3", 100}, {"web-4", 100}});
  uint32_t fell_back = 0;
  for (uint16_t port = kFirstPort; port < kFirstPort + 200; ++port) {
    const std::string explained = harness.explain(port);
    const bool past_web_1 = harness.tablePick(port) == "198.18.1.2";
    if (past_web_1) {
      EXPECT_NE(explained, "198.18.1.2") << port;
      EXPECT_THAT(harness.last_explanation_, ::testing::HasSubstr("at its bound")) << port;
      ++fell_back;
    } else {
      EXPECT_THAT(harness.last_explanation_, ::testing::HasSubstr("under its bounded-load limit"));
    }
    // The worker's own new flows since the publication count too, and explain cannot see them:
    // the one flow sent per port keeps this worker's counts far below the published 3000.
    EXPECT_EQ(harness.send(port, kTcpSyn), explained) << port;
  }
  EXPECT_GT(fell_back, 20u);
}

TEST(PipelineBoundedLoadTest, OneWorkerCountsItsOwnNewFlowsAndNeverPassesTheBound) {
  // Nothing published: the worker's own counts alone keep every backend within
  // 1.25 x mean + 1 as the connections arrive, whatever the table's picks.
  Harness harness;
  harness.use(boundedConfig());
  std::map<std::string, uint32_t> load;
  uint32_t total = 0;
  for (uint16_t port = kFirstPort; port < kFirstPort + 4000; ++port) {
    const std::string backend = harness.send(port, kTcpSyn);
    ASSERT_NE(backend, "");
    ++total;
    ASSERT_LE(++load[backend], 1.25 * total / 4 + 1) << backend << " after " << total;
  }
  EXPECT_EQ(harness.connectionsOf("web-1") + harness.connectionsOf("web-2") +
                harness.connectionsOf("web-3") + harness.connectionsOf("web-4"),
            4000u);
}

TEST(PipelineBoundedLoadTest, WorkersThatSeeTheSameLoadsMakeTheSameChoices) {
  Harness first;
  Harness second;
  const std::map<std::string, uint32_t> loads = {
      {"web-1", 900}, {"web-2", 20}, {"web-3", 700}, {"web-4", 380}};
  for (Harness* harness : {&first, &second}) {
    harness->use(boundedConfig());
    harness->publishLoads(loads);
  }
  for (uint16_t port = kFirstPort; port < kFirstPort + 500; ++port) {
    EXPECT_EQ(first.send(port, kTcpSyn), second.send(port, kTcpSyn)) << port;
  }
  EXPECT_GT(first.count(ConntrackEvent::kBoundedLoadFallback), 0u);
}

}  // namespace
}  // namespace berth
