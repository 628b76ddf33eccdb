#include "berth/control/service_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "berth/maglev/analysis.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A service of `count` backends listed in reverse name order, so that config order and the
// table's name order differ, as they may in a real file.
ServiceConfig service(size_t count, uint32_t table_size = 1009) {
  ServiceConfig config;
  config.name = "web";
  config.vip = IpAddress::v4(198, 18, 100, 1);
  config.port = 80;
  config.table_size = table_size;
  for (size_t i = count; i-- > 0;) {
    BackendConfig backend;
    backend.name = absl::StrFormat("web-%02d", i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(i + 1));
    backend.weight = 1;
    config.backends.push_back(backend);
  }
  return config;
}

std::string ownerOf(const Table& table, uint32_t slot) {
  const uint16_t entry = table.entries()[slot];
  return entry == kNoBackend ? "" : table.backends()[entry].name;
}

// The slots `backend` owns in `table`.
std::vector<uint32_t> slotsOf(const Table& table, absl::string_view backend) {
  std::vector<uint32_t> slots;
  for (uint32_t slot = 0; slot < table.size(); ++slot) {
    if (ownerOf(table, slot) == backend) slots.push_back(slot);
  }
  return slots;
}

ServiceState created(size_t count, std::vector<bool> healthy = {}) {
  if (healthy.empty()) healthy.assign(count, true);
  absl::StatusOr<ServiceState> state = ServiceState::create(service(count), healthy);
  EXPECT_TRUE(state.ok()) << state.status();
  return *std::move(state);
}

TEST(ServiceStateTest, StartsWithTheLiveTableEqualToTheBase) {
  const ServiceState state = created(5);
  EXPECT_EQ(state.name(), "web");
  EXPECT_EQ(state.healthyCount(), 5u);
  EXPECT_TRUE(state.serving());
  EXPECT_EQ(slotsChanged(state.baseTable(), state.liveTable()), 0u);
  EXPECT_THAT(state.drainedBackends(), IsEmpty());
}

// Health → table: a failed backend's slots, and only those, move; recovery moves them back.
TEST(ServiceStateTest, AFailureMovesExactlyTheFailedBackendsSlots) {
  ServiceState state = created(5);
  const Table before = state.liveTable();
  // Config order is web-04 .. web-00: index 1 is web-03.
  absl::StatusOr<SlotChange> failed = state.setHealth({true, false, true, true, true});
  ASSERT_TRUE(failed.ok()) << failed.status();
  EXPECT_EQ(failed->table_size, 1009u);
  EXPECT_EQ(failed->moved, slotsOf(before, "web-03"));
  EXPECT_THAT(slotsOf(state.liveTable(), "web-03"), IsEmpty());
  EXPECT_EQ(state.healthyCount(), 4u);
  for (uint32_t slot = 0; slot < before.size(); ++slot) {
    if (ownerOf(before, slot) != "web-03") {
      EXPECT_EQ(ownerOf(state.liveTable(), slot), ownerOf(before, slot)) << slot;
    }
  }

  absl::StatusOr<SlotChange> recovered = state.setHealth({true, true, true, true, true});
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->moved, failed->moved);
  EXPECT_EQ(slotsChanged(before, state.liveTable()), 0u);
}

TEST(ServiceStateTest, AWrongVerdictCountChangesNothing) {
  ServiceState state = created(3);
  const Table before = state.liveTable();
  absl::StatusOr<SlotChange> change = state.setHealth({false, false});
  EXPECT_FALSE(change.ok());
  EXPECT_THAT(std::string(change.status().message()), ::testing::HasSubstr("service 'web'"));
  EXPECT_EQ(state.healthyCount(), 3u);
  EXPECT_EQ(slotsChanged(before, state.liveTable()), 0u);
}

TEST(ServiceStateTest, NothingServesWithEveryBackendDown) {
  ServiceState state = created(2);
  ASSERT_TRUE(state.setHealth({false, false}).ok());
  EXPECT_FALSE(state.serving());
  EXPECT_EQ(slotsOf(state.liveTable(), "").size(), 1009u);
}

// Drain: weight 0 in force, the configured weight kept for undrain, no slots while drained, and
// undrain gives back the base table exactly.
TEST(ServiceStateTest, ADrainTakesTheBackendsSlotsAndUndrainGivesThemBack) {
  ServiceState state = created(4);
  const Table before = state.liveTable();
  absl::StatusOr<std::optional<SlotChange>> drained = state.setDrained("web-02", true);
  ASSERT_TRUE(drained.ok()) << drained.status();
  ASSERT_TRUE(drained->has_value());
  EXPECT_TRUE(state.drained("web-02"));
  EXPECT_THAT(state.drainedBackends(), ElementsAre("web-02"));
  EXPECT_EQ(state.config().backends[1].weight, 0);
  EXPECT_THAT(slotsOf(state.liveTable(), "web-02"), IsEmpty());
  // The drained backend's own slots all moved (a full rebuild may move some others too).
  for (uint32_t slot : slotsOf(before, "web-02")) {
    EXPECT_TRUE(std::binary_search((*drained)->moved.begin(), (*drained)->moved.end(), slot));
  }
  EXPECT_EQ((*drained)->moved, movedSlots(before, state.liveTable()));
  EXPECT_TRUE(state.serving());

  absl::StatusOr<std::optional<SlotChange>> undrained = state.setDrained("web-02", false);
  ASSERT_TRUE(undrained.ok());
  ASSERT_TRUE(undrained->has_value());
  EXPECT_FALSE(state.drained("web-02"));
  EXPECT_EQ(state.config().backends[1].weight, 1);
  EXPECT_EQ(slotsChanged(before, state.liveTable()), 0u);
}

TEST(ServiceStateTest, DrainingTwiceOrAnUnknownBackendChangesNothing) {
  ServiceState state = created(3);
  ASSERT_TRUE(state.setDrained("web-01", true).ok());
  absl::StatusOr<std::optional<SlotChange>> again = state.setDrained("web-01", true);
  ASSERT_TRUE(again.ok());
  EXPECT_FALSE(again->has_value());
  absl::StatusOr<std::optional<SlotChange>> never = state.setDrained("web-00", false);
  ASSERT_TRUE(never.ok());
  EXPECT_FALSE(never->has_value());
  absl::StatusOr<std::optional<SlotChange>> unknown = state.setDrained("db-1", true);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(state.drainedBackends(), ElementsAre("web-01"));
}

// A drained backend that loses its health check stays drained, and a drain keeps health.
TEST(ServiceStateTest, DrainAndHealthCompose) {
  ServiceState state = created(3);
  ASSERT_TRUE(state.setDrained("web-00", true).ok());
  ASSERT_TRUE(state.setHealth({false, true, true}).ok());  // web-02 down
  EXPECT_THAT(slotsOf(state.liveTable(), "web-00"), IsEmpty());
  EXPECT_THAT(slotsOf(state.liveTable(), "web-02"), IsEmpty());
  EXPECT_EQ(slotsOf(state.liveTable(), "web-01").size(), 1009u);
  ASSERT_TRUE(state.setHealth({false, false, true}).ok());  // web-01 down too
  EXPECT_FALSE(state.serving());
  ASSERT_TRUE(state.setDrained("web-00", false).ok());
  EXPECT_TRUE(state.serving());
  EXPECT_EQ(state.healthy(), (std::vector<bool>{false, false, true}));
}

// A reload keeps the drains of backends the new config still has, with its weights.
TEST(ServiceStateTest, AReloadKeepsDrainsByName) {
  ServiceConfig next = service(3);
  next.backends[0].weight = 5;  // web-02
  absl::StatusOr<ServiceState> state =
      ServiceState::create(next, {true, true, true}, {"web-02", "web-07"});
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_THAT(state->drainedBackends(), ElementsAre("web-02"));
  EXPECT_EQ(state->config().backends[0].weight, 0);
  ASSERT_TRUE(state->setDrained("web-02", false).ok());
  EXPECT_EQ(state->config().backends[0].weight, 5);
}

TEST(ServiceStateTest, ABadConfigNamesTheService) {
  ServiceConfig bad = service(3);
  bad.table_size = 1000;  // not prime
  absl::StatusOr<ServiceState> state = ServiceState::create(bad, {true, true, true});
  ASSERT_FALSE(state.ok());
  EXPECT_THAT(std::string(state.status().message()), ::testing::StartsWith("service 'web': "));
}

}  // namespace
}  // namespace berth
