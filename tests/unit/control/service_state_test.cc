#include "berth/control/service_state.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
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
  EXPECT_EQ(failed->movement.size_after, 1009u);
  EXPECT_EQ(movedSlots(before, state.liveTable()), slotsOf(before, "web-03"));
  EXPECT_EQ(failed->movement.moved_slots, slotsOf(before, "web-03").size());
  EXPECT_THAT(slotsOf(state.liveTable(), "web-03"), IsEmpty());
  EXPECT_EQ(state.healthyCount(), 4u);
  for (uint32_t slot = 0; slot < before.size(); ++slot) {
    if (ownerOf(before, slot) != "web-03") {
      EXPECT_EQ(ownerOf(state.liveTable(), slot), ownerOf(before, slot)) << slot;
    }
  }

  absl::StatusOr<SlotChange> recovered = state.setHealth({true, true, true, true, true});
  ASSERT_TRUE(recovered.ok());
  EXPECT_EQ(recovered->movement.moved_slots, failed->movement.moved_slots);
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
  // Exactly the drained backend's own slots moved.
  EXPECT_EQ(movedSlots(before, state.liveTable()), slotsOf(before, "web-02"));
  EXPECT_EQ((*drained)->movement.moved_slots, slotsOf(before, "web-02").size());
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

// On a 1,000-backend service a drain moves exactly the drained backend's slots, a failure after
// it exactly the failed backend's, and the result equals the table computed from both sets at
// once: any instance that agrees on the sets agrees on the table.
TEST(ServiceStateTest, DrainsOfAThousandBackendsMoveOnlyTheirOwnSlots) {
  for (uint32_t table_size : {65537u, 655373u}) {
    ServiceState state =
        *ServiceState::create(service(1000, table_size), std::vector<bool>(1000, true));
    const Table before = state.liveTable();
    absl::StatusOr<std::optional<SlotChange>> drained = state.setDrained("web-417", true);
    ASSERT_TRUE(drained.ok()) << drained.status();
    EXPECT_EQ(movedSlots(before, state.liveTable()), slotsOf(before, "web-417"));
    EXPECT_EQ((*drained)->movement.moved_slots, slotsOf(before, "web-417").size());

    std::vector<bool> healthy(1000, true);
    healthy[10] = false;  // config order is reversed: web-989
    const Table drained_table = state.liveTable();
    absl::StatusOr<SlotChange> failed = state.setHealth(healthy);
    ASSERT_TRUE(failed.ok());
    EXPECT_EQ(movedSlots(drained_table, state.liveTable()), slotsOf(drained_table, "web-989"));

    absl::StatusOr<ServiceState> direct =
        ServiceState::create(service(1000, table_size), healthy, {"web-417"});
    ASSERT_TRUE(direct.ok());
    EXPECT_EQ(slotsChanged(direct->liveTable(), state.liveTable()), 0u);
    EXPECT_EQ(direct->liveFingerprint(), state.liveFingerprint());
  }
}

// weight: 0 in the config drains as berthctl drain does: the same table, built from the
// service's median weight, so setting an equal-weight backend's weight to 0 moves only its slots.
TEST(ServiceStateTest, WeightZeroInTheConfigIsADrain) {
  ServiceConfig config = service(100, 65537);
  ServiceState running = *ServiceState::create(config, std::vector<bool>(100, true));
  config.backends[30].weight = 0;
  ServiceState reloaded = *ServiceState::create(config, std::vector<bool>(100, true));
  EXPECT_EQ(movedSlots(running.liveTable(), reloaded.liveTable()),
            slotsOf(running.liveTable(), config.backends[30].name));
  ASSERT_TRUE(running.setDrained(config.backends[30].name, true).ok());
  EXPECT_EQ(slotsChanged(running.liveTable(), reloaded.liveTable()), 0u);
}

// A reload names the one kind of change it made, and measures it against the least.
TEST(ServiceStateTest, AReloadSaysWhatItMovedAndWhy) {
  const ServiceConfig base = service(100, 65537);
  const ServiceState before = *ServiceState::create(base, std::vector<bool>(100, true));
  auto changeTo = [&](const ServiceConfig& next) {
    return reloadChange(before,
                        *ServiceState::create(next, std::vector<bool>(next.backends.size(), true)));
  };
  EXPECT_FALSE(changeTo(base).has_value());

  ServiceConfig added = base;
  added.backends.push_back(added.backends[0]);
  added.backends.back().name = "web-new";
  const std::optional<SlotChange> add = changeTo(added);
  ASSERT_TRUE(add.has_value());
  EXPECT_EQ(add->cause, TableChangeCause::kAdded);
  EXPECT_NEAR(add->movement.minimumSlots(), 65537.0 / 101, 1e-6);
  EXPECT_GE(add->movement.moved_slots, add->movement.minimumSlots());

  ServiceConfig removed = base;
  removed.backends.pop_back();
  EXPECT_EQ(changeTo(removed)->cause, TableChangeCause::kRemoved);
  ServiceConfig weighted = base;
  weighted.backends[5].weight = 2;
  EXPECT_EQ(changeTo(weighted)->cause, TableChangeCause::kWeight);
  ServiceConfig zeroed = base;
  zeroed.backends[5].weight = 0;
  const std::optional<SlotChange> drain = changeTo(zeroed);
  EXPECT_EQ(drain->cause, TableChangeCause::kDrain);
  EXPECT_EQ(drain->movement.moved_slots,
            before.liveTable().slotCounts()[*before.liveTable().indexOf(base.backends[5].name)]);
  ServiceConfig resized = base;
  resized.table_size = 65539;
  const std::optional<SlotChange> resize = changeTo(resized);
  EXPECT_EQ(resize->cause, TableChangeCause::kReload);
  EXPECT_FALSE(resize->movement.sameSize());
  EXPECT_THAT(describe(*resize), ::testing::StartsWith("M 65537 -> 65539: moved "));
  ServiceConfig mixed = added;
  mixed.backends[0].weight = 3;
  EXPECT_EQ(changeTo(mixed)->cause, TableChangeCause::kReload);
}

TEST(ServiceStateTest, HistoryCountsSlotsPerCauseAndKeepsTheLastChange) {
  ServiceState state = *ServiceState::create(service(10, 65537), std::vector<bool>(10, true));
  TableChangeHistory history;
  const absl::Time at = absl::FromUnixSeconds(1000);
  const SlotChange drained = **state.setDrained("web-03", true);
  history.record(drained, at);
  const SlotChange undrained = **state.setDrained("web-03", false);
  history.record(undrained, at + absl::Seconds(1));
  EXPECT_EQ(history.slots_moved[static_cast<size_t>(TableChangeCause::kDrain)],
            drained.movement.moved_slots + undrained.movement.moved_slots);
  EXPECT_EQ(history.slots_moved[static_cast<size_t>(TableChangeCause::kHealth)], 0u);
  ASSERT_TRUE(history.last.has_value());
  EXPECT_EQ(history.last_at, at + absl::Seconds(1));
  EXPECT_THAT(describe(*history.last),
              ::testing::MatchesRegex("moved [0-9]+ of 65537 slots \\([0-9.]+%\\), least [0-9]+ "
                                      "\\(1.00x\\): drain"));
}

// The service fingerprint covers what decides a flow's backend beyond the table, and is pinned:
// a change of the value without a new kFingerprintVersion would make two releases disagree.
TEST(ServiceStateTest, TheFingerprintCoversEverythingThatDecidesABackend) {
  const ServiceConfig base = service(6, 65537);
  auto fingerprint = [](const ServiceConfig& config) {
    return ServiceState::create(config, std::vector<bool>(config.backends.size(), true))
        ->liveFingerprint();
  };
  const uint64_t pinned = fingerprint(base);
  EXPECT_EQ(fingerprintText(pinned), "v2-" + absl::StrFormat("%016x", pinned));
  EXPECT_EQ(fingerprintText(pinned), "v2-0a69c74d3add32b7");
  std::vector<ServiceConfig> variants(6, base);
  variants[0].vip = IpAddress::v4(198, 18, 100, 2);
  variants[1].port = 81;
  variants[2].protocol = Protocol::kUdp;
  variants[3].hash_fields = HashFields::kSourceOnly;
  variants[4].backends[2].address = IpAddress::v4(198, 18, 9, 9);
  variants[5].bounded_load = 1.25;
  for (size_t v = 0; v < variants.size(); ++v) {
    EXPECT_NE(fingerprint(variants[v]), pinned) << "variant " << v;
  }
  ServiceConfig reordered = base;
  std::reverse(reordered.backends.begin(), reordered.backends.end());
  EXPECT_EQ(fingerprint(reordered), pinned) << "the config's order does not matter";
}

TEST(ServiceStateTest, ABadConfigNamesTheService) {
  ServiceConfig bad = service(3);
  bad.table_size = 1000;  // not prime
  absl::StatusOr<ServiceState> state = ServiceState::create(bad, {true, true, true});
  ASSERT_FALSE(state.ok());
  EXPECT_THAT(std::string(state.status().message()), ::testing::StartsWith("service 'web': "));
}

// In a fleet, the base table is the generation's: with every backend healthy the live table is
// the generation exactly, a local failure on top moves only that backend's slots, and a new
// generation (a backend added) moves what it moved and is recorded as such.
TEST(ServiceStateTest, AGenerationIsTheBaseHealthAndDrainsApplyTo) {
  const ServiceConfig config = service(100, 65537);
  absl::StatusOr<Table> first = build(config.hashingBackends(), 65537);
  ASSERT_TRUE(first.ok());
  absl::StatusOr<Table> generation =
      nextGeneration(*first, config.hashingBackends(), {"web-05"}, {});
  ASSERT_TRUE(generation.ok());
  absl::StatusOr<ServiceState> state =
      ServiceState::create(config, std::vector<bool>(100, true), {}, *generation);
  ASSERT_TRUE(state.ok()) << state.status();
  EXPECT_TRUE(state->fromGeneration());
  EXPECT_EQ(slotsChanged(state->liveTable(), *generation), 0u);

  std::vector<bool> healthy(100, true);
  healthy[10] = false;  // config order is reversed: web-89
  ASSERT_TRUE(state->setHealth(healthy).ok());
  EXPECT_EQ(movedSlots(*generation, state->liveTable()), slotsOf(*generation, "web-89"));

  ServiceConfig grown = config;
  BackendConfig added = grown.backends.front();
  added.name = "web-100";
  grown.backends.push_back(added);
  absl::StatusOr<Table> next = nextGeneration(*generation, grown.hashingBackends(), {"web-05"}, {});
  ASSERT_TRUE(next.ok());
  const Table before = state->liveTable();
  absl::StatusOr<SlotChange> change = state->setGeneration(*next, healthy);
  ASSERT_FALSE(change.ok());  // the generation names a backend the state's config lacks
  ASSERT_TRUE(ServiceState::create(grown, std::vector<bool>(101, true), {}, *next).ok());
  absl::StatusOr<SlotChange> back = state->setGeneration(std::nullopt, healthy);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_FALSE(state->fromGeneration());
  EXPECT_EQ(back->cause, TableChangeCause::kGeneration);
  EXPECT_EQ(slotsChanged(before, state->liveTable()), back->movement.moved_slots);
}

}  // namespace
}  // namespace berth
