// The health and tables subsystem (control/service_tables.h). Pinned:
// - a reload notes each table it changed with what it moved, and a service's history is kept by
//   its name across reloads;
// - verdicts fail a live table over, logged with what moved and counted; the same verdicts
//   again change nothing and log nothing; a change that cannot be built is logged and leaves the
//   service serving as it was;
// - a table generation becomes each service's base, a service whose base cannot be had keeps its
//   table, and a generation that moves nothing is not noted;
// - a drain changes every service that has the backend on copies, puts them in force only if the
//   publish succeeds, and names what it changed; an unknown backend is NotFound naming it.

#include "berth/control/service_tables.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

const absl::Time kNow = absl::FromUnixSeconds(1000);

ServiceConfig service(const std::string& name, size_t count) {
  ServiceConfig config;
  config.name = name;
  config.vip = IpAddress::v4(198, 18, 100, name == "web" ? 1 : 2);
  config.port = 80;
  config.table_size = 1009;
  for (size_t i = 0; i < count; ++i) {
    BackendConfig backend;
    backend.name = absl::StrFormat("%s-%d", name, i);
    backend.address = IpAddress::v4(198, 18, 1, static_cast<uint8_t>(i + 1));
    config.backends.push_back(backend);
  }
  return config;
}

std::vector<ServiceState> states(std::vector<ServiceConfig> configs) {
  absl::StatusOr<std::vector<ServiceState>> made = createServiceStates(configs);
  EXPECT_TRUE(made.ok()) << made.status();
  return *std::move(made);
}

class ServiceTablesTest : public testing::Test {
 protected:
  std::vector<std::string> log_;
  ServiceTables tables_{[this](const std::string& line) { log_.push_back(line); }};
};

TEST_F(ServiceTablesTest, AReloadNotesWhatItMovedAndHistoryIsKeptByName) {
  tables_.replace(states({service("web", 4), service("api", 2)}), kNow);
  EXPECT_THAT(log_, IsEmpty());
  EXPECT_EQ(tables_.history("web"), nullptr);
  tables_.replace(states({service("web", 5), service("api", 2)}), kNow);
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_THAT(log_[0], HasSubstr("table: service 'web': moved "));
  EXPECT_THAT(log_[0], HasSubstr(": added"));
  ASSERT_NE(tables_.history("web"), nullptr);
  EXPECT_EQ(tables_.history("web")->last->cause, TableChangeCause::kAdded);
  EXPECT_EQ(tables_.history("api"), nullptr);
  // A reload without web keeps its history for when it comes back.
  tables_.replace(states({service("api", 2)}), kNow);
  EXPECT_NE(tables_.history("web"), nullptr);
}

TEST_F(ServiceTablesTest, VerdictsFailOverLoggedOnceAndABadChangeKeepsTheTable) {
  tables_.replace(states({service("web", 4), service("api", 2)}), kNow);
  std::vector<bool> web = {true, false, true, true};
  const auto verdicts = [&](const ServiceState& state, size_t) {
    return state.name() == "web" ? web : state.healthy();
  };
  EXPECT_TRUE(tables_.serveVerdicts(verdicts, kNow));
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_THAT(log_[0], HasSubstr("table: service 'web': moved "));
  EXPECT_THAT(log_[0], HasSubstr(": health"));
  EXPECT_EQ(tables_.states()[0].healthy(), web);
  const uint64_t moved = tables_.history("web")->slots_moved[0];
  EXPECT_GT(moved, 0u);
  // The same verdicts: nothing.
  EXPECT_FALSE(tables_.serveVerdicts(std::vector<size_t>{0, 1}, verdicts, kNow));
  EXPECT_EQ(log_.size(), 1u);
  // Verdicts of the wrong length cannot be built: logged, and web serves as it was.
  const uint64_t fingerprint = tables_.states()[0].liveFingerprint();
  web = {true};
  EXPECT_FALSE(tables_.serveVerdicts(std::vector<size_t>{0}, verdicts, kNow));
  ASSERT_EQ(log_.size(), 2u);
  EXPECT_THAT(log_[1], HasSubstr("health: table not rebuilt, the previous one keeps serving"));
  EXPECT_EQ(tables_.states()[0].liveFingerprint(), fingerprint);
  EXPECT_EQ(tables_.history("web")->slots_moved[0], moved);
}

TEST_F(ServiceTablesTest, AGenerationBecomesTheBaseAndAFailedBaseKeepsTheTable) {
  tables_.replace(states({service("web", 4), service("api", 2)}), kNow);
  const auto all_up = [](const ServiceConfig& config, size_t, const Table*) {
    return std::vector<bool>(config.backends.size(), true);
  };
  // web's generation table: its own, built again (moves nothing, so not noted); api's cannot be
  // had.
  const auto base_of = [](const ServiceState& state) -> absl::StatusOr<std::optional<Table>> {
    if (state.name() == "api") return absl::DataLossError("piece 3 of api lost");
    return std::optional<Table>(state.baseTable());
  };
  EXPECT_TRUE(tables_.serveGeneration(7, base_of, all_up, kNow));
  ASSERT_EQ(log_.size(), 1u);
  EXPECT_EQ(log_[0],
            "fleet: table generation 7 not applied to service 'api', its table keeps serving: "
            "piece 3 of api lost");
  EXPECT_TRUE(tables_.states()[0].fromGeneration());
  EXPECT_FALSE(tables_.states()[1].fromGeneration());
  EXPECT_EQ(tables_.history("web"), nullptr);
}

TEST_F(ServiceTablesTest, ADrainTakesEffectOnlyWhenPublishedAndNamesWhatChanged) {
  ServiceConfig api = service("api", 2);
  api.backends[1].name = "web-1";  // a backend of both services
  tables_.replace(states({service("web", 4), api}), kNow);

  const uint64_t web_fingerprint = tables_.states()[0].liveFingerprint();
  absl::StatusOr<ServiceTables::DrainOutcome> failed = tables_.setDrained(
      "", "web-1", true, [] { return absl::UnavailableError("no mbufs"); }, kNow);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_FALSE(tables_.states()[0].drained("web-1"));
  EXPECT_FALSE(tables_.states()[1].drained("web-1"));
  EXPECT_EQ(tables_.states()[0].liveFingerprint(), web_fingerprint);

  int published = 0;
  const auto publish = [&] {
    ++published;
    return absl::OkStatus();
  };
  absl::StatusOr<ServiceTables::DrainOutcome> drained =
      tables_.setDrained("", "web-1", true, publish, kNow);
  ASSERT_TRUE(drained.ok()) << drained.status();
  EXPECT_EQ(published, 1);
  EXPECT_THAT(drained->changed, ElementsAre("web/web-1", "api/web-1"));
  EXPECT_THAT(drained->moved[0], HasSubstr("web/web-1 moved "));
  EXPECT_TRUE(tables_.states()[0].drained("web-1"));
  EXPECT_EQ(tables_.history("api")->last->cause, TableChangeCause::kDrain);
  EXPECT_THAT(log_, IsEmpty());  // the caller logs the outcome

  // Already so: nothing changes, nothing is published.
  absl::StatusOr<ServiceTables::DrainOutcome> again =
      tables_.setDrained("web", "web-1", true, publish, kNow);
  ASSERT_TRUE(again.ok());
  EXPECT_THAT(again->changed, IsEmpty());
  EXPECT_EQ(published, 1);

  EXPECT_EQ(tables_
                .setDrained(
                    "", "web-9", true, [] { return absl::OkStatus(); }, kNow)
                .status(),
            absl::NotFoundError("no backend named 'web-9'"));
  EXPECT_EQ(tables_
                .setDrained(
                    "api", "web-0", true, [] { return absl::OkStatus(); }, kNow)
                .status(),
            absl::NotFoundError("no backend named 'web-0' in service 'api'"));
}

}  // namespace
}  // namespace berth
