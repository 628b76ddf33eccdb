// The `status` reply rendered from its rows (control/status_report.h). Pinned: the figures'
// members and the text's lines, the drain state's path and last write, each table's fingerprint
// and last change, the periodic jobs, the last reload's result and reason, and the fleet's lines,
// with the fleet's word on a backend some instances dissent on.

#include "berth/control/status_report.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

namespace berth {
namespace {

using ::testing::HasSubstr;

StatusReport report() {
  StatusReport report;
  report.version = "1.2.3";
  report.uptime_s = 61;
  report.config_path = "/etc/berth/berth.yaml";
  report.config_crc32c = 0xab;
  report.snapshot_generation = 7;
  report.workers = 2;
  report.services = 1;
  report.backends = 3;
  report.drained = {"web/web-2"};
  report.drain_state_path = "/var/lib/berth/drains.json";
  report.drain_state_written = absl::PermissionDeniedError("read-only file system");
  report.exception_interfaces = {"berth0 (port 'outside')"};
  report.port_spreads = {
      "port 'outside': RSS key 6d5a, 128-entry redirection table over 2 "
      "queue(s), ports hashed for tcp4 tcp6; Full-NAT: 1 local address(es), "
      "ports 1024-65535"};
  TableStatusRow table;
  table.service = "web";
  table.table_size = 65537;
  table.fingerprint = "00112233";
  report.tables.push_back(table);
  report.periodic_jobs.push_back({"rates", absl::Seconds(1), 5, absl::Milliseconds(2)});
  report.taken_at = absl::FromUnixSeconds(1'800'000'000);
  report.reloads.last_success_at = report.taken_at - absl::Seconds(61);
  return report;
}

TEST(StatusReportTest, FiguresAndTextAgree) {
  const nlohmann::json reply = nlohmann::json::parse(statusReplyJson(report()));
  EXPECT_EQ(reply["ok"], true);
  EXPECT_EQ(reply["config_crc32c"], "000000ab");
  EXPECT_EQ(reply["snapshot_generation"], 7);
  EXPECT_EQ(reply["drained"], nlohmann::json::array({"web/web-2"}));
  EXPECT_EQ(reply["drain_state"]["last_write_error"], "read-only file system");
  EXPECT_EQ(reply["tables"][0]["fingerprint"], "00112233");
  EXPECT_FALSE(reply["tables"][0].contains("last_change"));
  EXPECT_EQ(reply["periodic_jobs"][0]["name"], "rates");
  EXPECT_EQ(reply["periodic_jobs"][0]["longest_ms"], 2.0);
  EXPECT_FALSE(reply.contains("fleet"));
  const std::string text = reply["text"];
  EXPECT_THAT(text,
              HasSubstr("berthd 1.2.3, up 61 s\nconfig /etc/berth/berth.yaml (crc32c 000000ab)\n"
                        "reloads: none since start; config in force for 61 s\n"
                        "snapshot 7, 2 worker(s), 1 service(s), 3 backend(s)\n"
                        "drained: web/web-2\n"));
  EXPECT_THAT(text, HasSubstr("drain state: /var/lib/berth/drains.json (last write failed: "
                              "read-only file system)\n"));
  EXPECT_THAT(text, HasSubstr("kernel interface: berth0 (port 'outside')\n"));
  EXPECT_EQ(reply["port_spreads"][0], report().port_spreads[0]);
  EXPECT_THAT(text, HasSubstr("port 'outside': RSS key 6d5a, 128-entry redirection table over 2 "
                              "queue(s), ports hashed for tcp4 tcp6; Full-NAT: 1 local "
                              "address(es), ports 1024-65535\n"));
  EXPECT_THAT(text, HasSubstr("table web: maglev, M=65537, fingerprint 00112233\n"));
}

TEST(StatusReportTest, ARefusedReloadIsShownWithItsReasonUntilOneApplies) {
  StatusReport refused = report();
  ReloadHistory& reloads = refused.reloads;
  reloads.applied = 2;
  reloads.refused = 1;
  reloads.last_success_at = refused.taken_at - absl::Seconds(300);
  reloads.last_at = refused.taken_at - absl::Seconds(12);
  reloads.last_what = "/etc/berth/berth.yaml";
  reloads.last_status = absl::FailedPreconditionError("berth.yaml:9:5: services[0].port: bad");
  nlohmann::json reply = nlohmann::json::parse(statusReplyJson(refused));
  EXPECT_EQ(reply["reloads"]["last_successful"], false);
  EXPECT_EQ(reply["reloads"]["last_error"], "berth.yaml:9:5: services[0].port: bad");
  EXPECT_EQ(reply["reloads"]["applied"], 2);
  EXPECT_EQ(reply["reloads"]["refused"], 1);
  EXPECT_EQ(reply["reloads"]["last_at"], 1'800'000'000 - 12);
  EXPECT_EQ(reply["reloads"]["in_force_since"], 1'800'000'000 - 300);
  EXPECT_THAT(std::string(reply["text"]),
              HasSubstr("last reload: REFUSED 12 s ago (/etc/berth/berth.yaml): berth.yaml:9:5: "
                        "services[0].port: bad\n  the config in force has served for 300 s; 2 "
                        "applied, 1 refused\n"));

  reloads.applied = 3;
  reloads.last_status = absl::OkStatus();
  reloads.last_success_at = reloads.last_at;
  reply = nlohmann::json::parse(statusReplyJson(refused));
  EXPECT_EQ(reply["reloads"]["last_successful"], true);
  EXPECT_EQ(reply["reloads"]["last_error"], "");
  EXPECT_THAT(std::string(reply["text"]),
              HasSubstr("last reload: applied 12 s ago (/etc/berth/berth.yaml); 3 applied, 1 "
                        "refused\n"));
}

TEST(StatusReportTest, WithoutADrainStateFileItSaysSo) {
  StatusReport without = report();
  without.drain_state_path.reset();
  const nlohmann::json reply = nlohmann::json::parse(statusReplyJson(without));
  EXPECT_TRUE(reply["drain_state"].empty());
  EXPECT_THAT(std::string(reply["text"]), HasSubstr("drain state: not kept (--drain-state off)"));
}

TEST(StatusReportTest, TheFleetsPartNamesItsStateAndDissent) {
  StatusReport with_fleet = report();
  FleetStatusRow fleet;
  fleet.instance = "lb-a";
  fleet.agent.running_version = 4;
  fleet.agent.head_version = 4;
  fleet.agent.etcd_reachable = true;
  fleet.agent.registered = true;
  fleet.agent.elected = true;
  fleet.generation = 3;
  fleet.agreed.down["web"] = {"web-1"};
  fleet.agreed.dissent[{"web", "web-1"}] = {"lb-b"};
  with_fleet.fleet = fleet;
  const nlohmann::json reply = nlohmann::json::parse(statusReplyJson(with_fleet));
  EXPECT_EQ(reply["fleet"]["name"], "lb-a");
  EXPECT_EQ(reply["fleet"]["generation"], 3);
  EXPECT_EQ(reply["fleet"]["dissent"][0]["fleet_says"], "down");
  const std::string text = reply["text"];
  EXPECT_THAT(text, HasSubstr("fleet: instance lb-a, version 4, fleet head 4, etcd reachable\n"));
  EXPECT_THAT(text, HasSubstr("fleet: table generation 3, newest stored 0, made by this instance"));
  EXPECT_THAT(text, HasSubstr("fleet: service 'web' backend 'web-1' is down by the fleet's word; "
                              "lb-b sees it up\n"));
}

}  // namespace
}  // namespace berth
