// The control socket's commands (daemon/control_commands.h) over a loop that never started: no
// EAL, a fake CommandTarget in the loop's place. Pinned:
// - every command of the table has a handler, and an unknown command or a field the command
//   does not take is refused naming the choices;
// - drain and undrain need a backend (the command table says so), go to the loop through setDrained
// with the service and
//   backend given, and reply with what changed and the snapshot in use, or with the loop's error;
// - announce refuses a count that is not one, hands a count to the loop, and answers with the
//   routes the loop's forwarding state allows;
// - status is the loop's report; table renders a service's live table and names the services
//   when asked for another; services and backends render the loop's rows.

#include "berth/daemon/control_commands.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "berth/config/loader.h"

namespace berth {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

constexpr char kConfig[] = R"(dataplane:
  ports:
    - name: uplink
      device: net_null0
      ipv4: 198.18.0.1
      gateway: 198.18.0.254
bgp:
  asn: 65001
  router_id: 198.18.0.1
  port: uplink
  neighbors:
    - { address: 198.18.0.254, asn: 65000 }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: 251
    announce: bgp
    backends:
      - { name: web-1, address: 198.18.1.2 }
      - { name: web-2, address: 198.18.1.3 }
)";

Config parsed() {
  absl::StatusOr<Config> config = parseConfig(kConfig, "commands.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
  return *std::move(config);
}

class FakeLoop : public CommandTarget {
 public:
  explicit FakeLoop(const ServiceTables& tables) : tables_(tables) {}

  StatusReport statusReport() const override {
    StatusReport report;
    report.version = "test-version";
    report.services = tables_.states().size();
    return report;
  }
  CountersReport countersReport() const override { return {}; }
  std::vector<ServiceRow> serviceRows() const override {
    return berth::serviceRows(tables_.states(), ids_,
                              [](uint32_t, bool) { return TrafficTotals{}; });
  }
  std::vector<BackendRow> backendRows() const override {
    return berth::backendRows(tables_.states(), ids_,
                              [](uint32_t, bool) { return TrafficTotals{}; });
  }
  absl::StatusOr<ServiceTables::DrainOutcome> setDrained(const std::string& service,
                                                         const std::string& backend,
                                                         bool drain) override {
    drains.push_back(absl::StrCat(drain ? "drain " : "undrain ", service, "/", backend));
    if (!drain_error.ok()) return drain_error;
    ServiceTables::DrainOutcome outcome;
    outcome.changed = {absl::StrCat("web/", backend)};
    return outcome;
  }
  uint64_t requestReload() override { return ++reloads; }
  void routesAnnounced(uint32_t routes) override { announced.push_back(routes); }
  ForwardingState forwardingState() const override {
    ForwardingState state;
    state.workers_running = true;
    return state;
  }

  std::vector<std::string> drains;
  absl::Status drain_error;
  uint64_t reloads = 0;
  std::vector<uint32_t> announced;

 private:
  const ServiceTables& tables_;
  CounterIds ids_;
};

class ControlCommandsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    absl::StatusOr<std::vector<ServiceState>> states = createServiceStates(config_.services);
    ASSERT_TRUE(states.ok()) << states.status();
    tables_.replace(*std::move(states), absl::Now());
  }

  Json ask(const std::string& command, std::map<std::string, std::string> fields = {}) {
    ControlRequest request;
    request.command = command;
    for (auto& [name, value] : fields) request.fields[name] = value;
    std::unique_ptr<ReplyStream> reply = commands_.handle(request);
    const std::string text = drainReply(*reply);
    Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
    EXPECT_FALSE(json.is_discarded()) << text;
    return json;
  }

  std::vector<std::string> log_;
  Datapath::Log log_line_ = [this](const std::string& line) { log_.push_back(line); };
  Config config_ = parsed();
  const std::string config_path_ = "commands.yaml";
  ServiceTables tables_{log_line_};
  Datapath datapath_{config_, log_line_};
  NeighborResolver neighbors_{NeighborSettings::of(config_.dataplane.neighbors), 1, log_line_};
  SnapshotRollouts rollouts_;
  ReplyChannels replies_{ControlSocketPaths{}, log_line_};
  RateMeter rates_;
  std::unique_ptr<ReloadQueue> reloads_;
  FakeLoop loop_{tables_};
  ControlCommands commands_{CommandParts{config_, config_path_, tables_, datapath_, neighbors_,
                                         rollouts_, replies_, rates_, reloads_},
                            loop_};
};

TEST_F(ControlCommandsTest, EveryCommandHasAHandlerAndOthersAreRefused) {
  EXPECT_TRUE(ControlCommands::checkHandlers().ok());
  const Json unknown = ask("restart");
  EXPECT_EQ(unknown["ok"], false);
  EXPECT_THAT(unknown["error"].get<std::string>(), HasSubstr("unknown command 'restart'"));
  EXPECT_THAT(unknown["error"].get<std::string>(), HasSubstr("drain"));
  const Json field = ask("status", {{"backend", "web-1"}});
  EXPECT_EQ(field["ok"], false);
  EXPECT_EQ(field["error"], "status takes no arguments, not 'backend'");
}

TEST_F(ControlCommandsTest, DrainsGoToTheLoopAndReplyWithWhatChanged) {
  EXPECT_THAT(ask("drain", {{"service", "web"}})["error"].get<std::string>(),
              HasSubstr("drain needs NAME"));
  const Json drained = ask("drain", {{"service", "web"}, {"backend", "web-1"}});
  EXPECT_EQ(drained["ok"], true);
  EXPECT_EQ(drained["changed"], Json::array({"web/web-1"}));
  EXPECT_EQ(drained["snapshot_generation"], rollouts_.generation());
  ask("undrain", {{"backend", "web-2"}});
  EXPECT_THAT(loop_.drains, ElementsAre("drain web/web-1", "undrain /web-2"));
  loop_.drain_error = absl::NotFoundError("no backend named 'web-9'");
  EXPECT_EQ(ask("drain", {{"backend", "web-9"}})["error"], "no backend named 'web-9'");
}

TEST_F(ControlCommandsTest, AnnounceHandsTheAnnouncersCountToTheLoop) {
  EXPECT_THAT(ask("announce", {{"announced", "many"}})["error"].get<std::string>(),
              HasSubstr("--announced takes a count of routes, not 'many'"));
  EXPECT_TRUE(loop_.announced.empty());
  const Json routes = ask("announce", {{"announced", "0"}});
  EXPECT_EQ(routes["ok"], true);
  EXPECT_EQ(routes["routes"].size(), 1u) << routes.dump();
  EXPECT_EQ(ask("announce")["ok"], true);
  EXPECT_THAT(loop_.announced, ElementsAre(0u)) << "no count: nothing to hand on";
}

TEST_F(ControlCommandsTest, StatusTableAndRowsComeFromTheLoopsParts) {
  const Json status = ask("status");
  EXPECT_EQ(status["version"], "test-version");
  EXPECT_EQ(status["services"], 1);
  const Json table = ask("table", {{"service", "web"}});
  EXPECT_EQ(table["ok"], true) << table.dump();
  EXPECT_THAT(ask("table", {{"service", "nope"}})["error"].get<std::string>(),
              HasSubstr("no service named 'nope'; berthd has: web"));
  const Json services = ask("services");
  ASSERT_EQ(services["services"].size(), 1u) << services.dump();
  EXPECT_EQ(services["services"][0]["name"], "web");
  const Json backends = ask("backends");
  EXPECT_EQ(backends["backends"].size(), 2u) << backends.dump();
}

}  // namespace
}  // namespace berth
