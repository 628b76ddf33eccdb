// The neighbour cache's decisions, with the workers' part played by writing the slots directly
// (what the pipeline records is pinned in dataplane/pipeline_neighbor_test.cc): learning only
// from answers to its own requests, keeping the MAC in use while it answers, the lock time, the
// refresh and its retries, a real gateway change, flush, and the bounds under a flood.

#include "berth/control/neighbor_cache.h"

#include <gtest/gtest.h>

#include <vector>

namespace berth {
namespace {

const IpAddress kGateway = IpAddress::v4(198, 18, 0, 254);
const MacAddress kGatewayMac = *MacAddress::parse("02:00:00:00:00:fe");
const MacAddress kReplacementMac = *MacAddress::parse("02:00:00:00:00:ef");
const MacAddress kAttackerMac = *MacAddress::parse("02:00:00:00:0b:ad");

PortConfig port(bool learn_announcements = false) {
  PortConfig config;
  config.name = "p0";
  config.learn_announcements = learn_announcements;
  return config;
}

NextHopToResolve hop(const IpAddress& address, uint16_t port_index = 0) {
  return {port_index, address, IpAddress::v4(198, 18, 0, 10)};
}

// The cache on a clock the test moves, with every request it sends recorded.
class CacheHarness {
 public:
  explicit CacheHarness(NeighborSettings settings = {}, bool learn_announcements = false)
      : cache(settings), ports_{port(learn_announcements), port(learn_announcements)} {}

  void track(std::vector<NextHopToResolve> hops) { cache.track(hops, ports_, now); }
  // One management-loop turn at the current time; true when the snapshot must be published.
  bool turn() {
    news.clear();
    const bool changed = cache.turn(
        now,
        [this](const NextHopToResolve& asked) {
          if (refuse_sends) return false;
          requests.push_back(asked);
          return true;
        },
        news);
    publishes += changed ? 1 : 0;
    return changed;
  }
  // Turns every millisecond for `duration`, calling `each` before each turn.
  template <typename Each>
  void run(absl::Duration duration, Each each) {
    const absl::Time end = now + duration;
    while (now < end) {
      now += absl::Milliseconds(1);
      each();
      turn();
    }
  }
  void run(absl::Duration duration) {
    run(duration, [] {});
  }
  NeighborSlot& slot(const IpAddress& address = kGateway, uint16_t port_index = 0) {
    return *cache.table().resolving(port_index, address).slot;
  }
  std::optional<MacAddress> mac(const IpAddress& address = kGateway) const {
    return cache.table().find(0, address);
  }
  // A worker saw the answer of `from` to the request out (as the pipeline records it).
  void answer(const MacAddress& from) {
    NeighborSlot& s = slot();
    ASSERT_TRUE(s.asking()) << "no request waits";
    if (mac() == from) {
      s.recordKnownAnswered();
    } else {
      s.recordOtherAnswer(from);
    }
  }
  NeighborRow row() const { return cache.rows(now).at(0); }

  NeighborCache cache;
  absl::Time now = absl::FromUnixSeconds(1'000'000);
  std::vector<NextHopToResolve> requests;
  std::vector<NeighborNews> news;
  bool refuse_sends = false;
  int publishes = 0;

 private:
  std::vector<PortConfig> ports_;
};

// Learned at the first turn's request, answered at once.
void learnGateway(CacheHarness& harness) {
  harness.track({hop(kGateway)});
  harness.turn();
  harness.answer(kGatewayMac);
  ASSERT_TRUE(harness.turn());
  ASSERT_EQ(harness.mac(), kGatewayMac);
  harness.publishes = 0;
}

TEST(NeighborCacheTest, ANewNextHopIsAskedForAtOnceAndLearnedFromTheAnswer) {
  CacheHarness harness;
  harness.track({hop(kGateway)});
  EXPECT_FALSE(harness.turn());
  ASSERT_EQ(harness.requests.size(), 1u);
  EXPECT_EQ(harness.requests[0].address, kGateway);
  EXPECT_TRUE(harness.slot().asking());
  EXPECT_EQ(harness.row().state, NeighborState::kUnresolved);

  harness.now += absl::Milliseconds(3);
  harness.answer(kGatewayMac);
  EXPECT_TRUE(harness.turn()) << "learned: publish";
  EXPECT_EQ(harness.mac(), kGatewayMac);
  EXPECT_FALSE(harness.slot().asking()) << "the request's window closes with its answer";
  ASSERT_EQ(harness.news.size(), 1u);
  EXPECT_EQ(describe(harness.news[0]), "next hop 198.18.0.254 is at 02:00:00:00:00:fe");
  EXPECT_EQ(harness.row().state, NeighborState::kReachable);
  EXPECT_EQ(harness.cache.count(NeighborEvent::kChange), 1u);
}

TEST(NeighborCacheTest, AnUnansweredNextHopIsAskedEveryRequestTimeout) {
  CacheHarness harness;
  harness.track({hop(kGateway)});
  harness.turn();
  harness.run(absl::Seconds(5));
  EXPECT_EQ(harness.requests.size(), 6u) << "at 0 s and after each 1 s timeout";
  EXPECT_EQ(harness.row().state, NeighborState::kUnresolved);
  EXPECT_EQ(harness.row().unanswered, 5u);
  EXPECT_EQ(harness.publishes, 0);
}

TEST(NeighborCacheTest, AKnownNextHopIsRefreshedWithinTheInterval) {
  CacheHarness harness;
  learnGateway(harness);
  harness.requests.clear();
  harness.run(absl::Seconds(30) + absl::Milliseconds(500), [&] {
    if (harness.slot().asking()) harness.answer(kGatewayMac);
  });
  ASSERT_EQ(harness.requests.size(), 1u) << "once in 30 s, in the last quarter of it";
  EXPECT_EQ(harness.cache.count(NeighborEvent::kConfirmation), 1u);
  EXPECT_EQ(harness.publishes, 0) << "a confirmation changes nothing";
  EXPECT_EQ(harness.row().state, NeighborState::kReachable);
  EXPECT_LT(*harness.row().age, absl::Seconds(8));
}

TEST(NeighborCacheTest, TheMacInUseStaysWhenItAnswersBesideAnother) {
  NeighborSettings settings;
  settings.refresh_interval = absl::Seconds(5);
  CacheHarness harness(settings);
  learnGateway(harness);
  harness.run(absl::Seconds(5) + absl::Milliseconds(500), [&] {
    if (harness.slot().asking() && !harness.slot().otherAnswer()) {
      harness.answer(kAttackerMac);  // first, as a flood would be
      harness.answer(kGatewayMac);
    }
  });
  EXPECT_EQ(harness.mac(), kGatewayMac);
  EXPECT_EQ(harness.cache.count(NeighborEvent::kRefusedConflict), 1u);
  EXPECT_EQ(harness.row().refused, 1u);
  EXPECT_EQ(harness.publishes, 0);
}

TEST(NeighborCacheTest, ARealGatewayChangeIsFollowedAtTheNextRefresh) {
  NeighborSettings settings;
  settings.refresh_interval = absl::Seconds(4);
  CacheHarness harness(settings);
  learnGateway(harness);
  // The gateway is replaced: the old MAC answers no more, the new one does.
  const absl::Time replaced = harness.now;
  absl::Time followed = absl::InfinitePast();
  harness.run(absl::Seconds(10), [&] {
    if (harness.slot().asking() && !harness.slot().otherAnswer()) {
      harness.answer(kReplacementMac);
    }
    if (followed == absl::InfinitePast() && harness.mac() == kReplacementMac) {
      followed = harness.now;
    }
  });
  EXPECT_EQ(harness.mac(), kReplacementMac);
  EXPECT_LE(followed - replaced, settings.refresh_interval +
                                     kAnswersToReplace * settings.request_timeout +
                                     absl::Milliseconds(2))
      << "the refresh, and the timeouts of the two requests the MAC in use left unanswered";
  EXPECT_EQ(harness.cache.count(NeighborEvent::kChange), 2u);
  EXPECT_EQ(harness.publishes, 1);
  EXPECT_EQ(harness.row().changes, 2u);
}

// Under a flood berth may miss the real answer to one request while a forged one arrives: that
// alone replaces nothing. The real gateway's answer to the next request keeps its MAC, and
// forgers that answer with a new MAC each time never win two requests in a row.
TEST(NeighborCacheTest, ForgedAnswersToRequestsWhoseRealAnswerWasLostReplaceNothing) {
  NeighborSettings settings;
  settings.refresh_interval = absl::Seconds(2);
  settings.refresh_retries = 10;  // so that the gateway is not lost while the forgers answer
  CacheHarness harness(settings);
  learnGateway(harness);
  // One request's real answer lost, a forged one seen; the gateway answers the next.
  harness.requests.clear();
  bool forged = false;
  harness.run(absl::Seconds(6), [&] {
    if (!harness.slot().asking() || harness.slot().otherAnswer() || harness.slot().knownAnswered())
      return;
    if (harness.requests.size() == 1) {
      harness.answer(kAttackerMac);  // the refresh: only the forged answer is seen
      forged = true;
    } else if (harness.requests.size() > 1) {
      harness.answer(kGatewayMac);  // the request right after its timeout, and later refreshes
    }
  });
  EXPECT_TRUE(forged);
  EXPECT_EQ(harness.mac(), kGatewayMac);
  EXPECT_EQ(harness.publishes, 0);
  // Every real answer lost for a while, each request answered by a different forged MAC.
  uint8_t forger = 0;
  harness.run(absl::Seconds(6), [&] {
    if (harness.slot().asking() && !harness.slot().otherAnswer()) {
      harness.answer(MacAddress{{0x02, 0x66, 0, 0, 0, ++forger}});
    }
  });
  EXPECT_GE(forger, 3);
  EXPECT_NE(harness.mac().value_or(kGatewayMac), MacAddress({0x02, 0x66, 0, 0, 0, forger}));
  EXPECT_EQ(harness.cache.count(NeighborEvent::kChange), 1u) << "only the first learning";
}

TEST(NeighborCacheTest, AnUnansweredRefreshKeepsTheMacThroughItsRetriesThenLosesIt) {
  NeighborSettings settings;
  settings.refresh_interval = absl::Seconds(4);
  CacheHarness harness(settings);
  learnGateway(harness);
  harness.requests.clear();
  // The gateway goes silent. Find the refresh, then count what follows it.
  const absl::Time learned = harness.now;
  while (harness.requests.empty()) harness.run(absl::Milliseconds(1));
  EXPECT_LE(harness.now - learned, settings.refresh_interval);
  harness.run(absl::Seconds(3) + absl::Milliseconds(500));
  EXPECT_EQ(harness.requests.size(), 4u) << "the refresh and three retries";
  EXPECT_EQ(harness.mac(), kGatewayMac) << "kept while the retries last";
  EXPECT_EQ(harness.row().state, NeighborState::kProbing);
  EXPECT_EQ(harness.publishes, 0);
  harness.run(absl::Seconds(1));
  EXPECT_EQ(harness.mac(), std::nullopt) << "the fourth request unanswered";
  EXPECT_EQ(harness.row().state, NeighborState::kUnresolved);
  EXPECT_EQ(harness.cache.count(NeighborEvent::kLost), 1u);
  EXPECT_EQ(harness.publishes, 1);
  // Unresolved, it is asked every second, and an answer resolves it again.
  harness.run(absl::Seconds(2));
  EXPECT_EQ(harness.requests.size(), 7u);
  harness.answer(kGatewayMac);
  EXPECT_TRUE(harness.turn());
  EXPECT_EQ(harness.mac(), kGatewayMac);
}

TEST(NeighborCacheTest, AChangeWithinTheLockTimeIsRefused) {
  NeighborSettings settings;
  settings.refresh_interval = absl::Seconds(2);
  settings.lock_time = absl::Seconds(60);
  CacheHarness harness(settings);
  learnGateway(harness);
  // The refresh within 2 s, then the two requests the attacker alone answers, 1 s each.
  harness.run(absl::Seconds(4) + absl::Milliseconds(500), [&] {
    if (harness.slot().asking() && !harness.slot().otherAnswer()) harness.answer(kAttackerMac);
  });
  EXPECT_EQ(harness.mac(), kGatewayMac);
  EXPECT_GE(harness.cache.count(NeighborEvent::kRefusedLocked), 1u);
  EXPECT_EQ(harness.publishes, 0);
}

TEST(NeighborCacheTest, FlushAsksEveryNextHopNowAndWaivesTheLock) {
  NeighborSettings settings;
  settings.lock_time = absl::Seconds(60);
  CacheHarness harness(settings);
  const IpAddress backend = IpAddress::v4(198, 18, 0, 21);
  harness.track({hop(kGateway), hop(backend)});
  harness.turn();
  harness.answer(kGatewayMac);
  harness.slot(backend).recordOtherAnswer(*MacAddress::parse("02:00:00:00:00:21"));
  harness.turn();
  harness.requests.clear();
  harness.now += absl::Seconds(1);
  harness.cache.flush(harness.now);
  harness.turn();
  EXPECT_EQ(harness.requests.size(), 2u);
  EXPECT_EQ(harness.mac(), kGatewayMac) << "serves until answered";
  harness.answer(kReplacementMac);
  harness.now += settings.request_timeout;
  EXPECT_TRUE(harness.turn());
  EXPECT_EQ(harness.mac(), kReplacementMac) << "within the lock time, after a flush";
}

TEST(NeighborCacheTest, ARandomMacAnnouncementFloodPublishesAtMostOncePerLockTime) {
  CacheHarness harness({}, /*learn_announcements=*/true);
  learnGateway(harness);
  harness.publishes = 0;
  uint32_t sequence = 0;
  size_t news = 0;
  harness.run(absl::Seconds(10), [&] {
    // Every millisecond, workers see 100 announcements with random MACs; the slot keeps one.
    for (int i = 0; i < 100; ++i, ++sequence) {
      harness.slot().recordAnnouncement(
          MacAddress{{0x02, 0x20, static_cast<uint8_t>(sequence >> 16),
                      static_cast<uint8_t>(sequence >> 8), static_cast<uint8_t>(sequence), 0}});
    }
    news += harness.news.size();
  });
  EXPECT_LE(harness.publishes, 10) << "one per next hop per 1 s lock time";
  EXPECT_GE(harness.publishes, 9);
  EXPECT_EQ(harness.cache.count(NeighborEvent::kChange), 1u + harness.publishes);
  EXPECT_GT(harness.cache.count(NeighborEvent::kRefusedLocked), 9000u);
}

TEST(NeighborCacheTest, AnnouncementsAreIgnoredOnPortsThatDoNotLearnThem) {
  CacheHarness harness;
  learnGateway(harness);
  harness.slot().recordAnnouncement(kReplacementMac);  // as no worker would, on this port
  harness.now += absl::Seconds(5);
  EXPECT_FALSE(harness.turn());
  EXPECT_EQ(harness.mac(), kGatewayMac);
}

TEST(NeighborCacheTest, RequestsPerTurnAreBoundedAndAFailedSendIsRetried) {
  CacheHarness harness;
  std::vector<NextHopToResolve> hops;
  for (int i = 0; i < 200; ++i) {
    hops.push_back(hop(IpAddress::v4(198, 18, 2, static_cast<uint8_t>(i))));
  }
  harness.track(hops);
  harness.refuse_sends = true;
  harness.turn();
  EXPECT_TRUE(harness.requests.empty());
  harness.refuse_sends = false;
  harness.turn();
  EXPECT_EQ(harness.requests.size(), NeighborCache::kMaxRequestsPerTurn);
  harness.turn();
  harness.turn();
  harness.turn();
  EXPECT_EQ(harness.requests.size(), 200u);
  EXPECT_EQ(harness.cache.count(NeighborEvent::kRequest), 200u);
}

TEST(NeighborCacheTest, TheSameAddressBehindTwoPortsIsTwoNextHops) {
  CacheHarness harness;
  harness.track({hop(kGateway, 0), hop(kGateway, 1)});
  harness.turn();
  EXPECT_EQ(harness.requests.size(), 2u);
  harness.slot(kGateway, 1).recordOtherAnswer(kGatewayMac);
  harness.turn();
  EXPECT_EQ(harness.cache.table().find(1, kGateway), kGatewayMac);
  EXPECT_EQ(harness.cache.table().find(0, kGateway), std::nullopt);
}

TEST(NeighborCacheTest, KeepOnlyForgetsNextHopsNoLongerConfigured) {
  CacheHarness harness;
  learnGateway(harness);
  const std::shared_ptr<NeighborSlot> held = harness.cache.table().resolving(0, kGateway).slot;
  harness.cache.flush(harness.now);
  harness.turn();
  ASSERT_TRUE(held->asking());
  const IpAddress backend = IpAddress::v4(198, 18, 0, 21);
  harness.track({hop(backend)});
  harness.cache.keepOnly(std::vector<NextHopToResolve>{hop(backend)});
  EXPECT_EQ(harness.cache.table().size(), 1u);
  EXPECT_EQ(harness.cache.table().find(0, kGateway), std::nullopt);
  EXPECT_FALSE(held->asking()) << "an old snapshot's slot records nothing more";
  harness.requests.clear();
  harness.run(absl::Seconds(40));
  for (const NextHopToResolve& asked : harness.requests) EXPECT_EQ(asked.address, backend);
  ASSERT_EQ(harness.cache.rows(harness.now).size(), 1u);
}

TEST(NeighborCacheTest, RowsAndSumsCarryTheCounts) {
  CacheHarness harness;
  learnGateway(harness);
  harness.slot().countRefused();
  const NeighborRow row = harness.row();
  EXPECT_EQ(row.address, kGateway);
  EXPECT_EQ(row.mac, kGatewayMac);
  EXPECT_EQ(row.refused, 1u);
  EXPECT_EQ(row.changes, 1u);
  const auto sums = harness.cache.sums();
  ASSERT_EQ(sums.size(), kNeighborEventCount);
  EXPECT_EQ(sums[0].first, "neighbor_requests");
  EXPECT_EQ(sums[0].second, 1u);
}

TEST(NeighborCacheTest, SettingsComeFromTheConfig) {
  NeighborConfig config;
  config.lock_time_ms = 2500;
  config.refresh_interval_ms = 10'000;
  config.request_timeout_ms = 200;
  config.refresh_retries = 5;
  const NeighborSettings settings = NeighborSettings::of(config);
  EXPECT_EQ(settings.lock_time, absl::Milliseconds(2500));
  EXPECT_EQ(settings.refresh_interval, absl::Seconds(10));
  EXPECT_EQ(settings.request_timeout, absl::Milliseconds(200));
  EXPECT_EQ(settings.refresh_retries, 5u);
}

}  // namespace
}  // namespace berth
