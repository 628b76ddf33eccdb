#include "berth/metrics/prometheus.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

MetricsSnapshot sample() {
  MetricsSnapshot metrics;
  metrics.version = "0.1.0";
  metrics.uptime_s = 12.5;
  metrics.generation = 4;
  WorkerMetrics with_table{10, 640, 9, 600, 1, 3, 1024, 2, 1, 4096};
  WorkerMetrics without_table{
      5, 320, 5, 320, 0, std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
  metrics.workers = {with_table, without_table};
  metrics.sums = {
      {"rx_packets", 15},    {"drop_no_service", 1}, {"parse_truncated", 2},
      {"conntrack_hit", 7},  {"nat_opened", 6},      {"neighbor_refused_unsolicited", 9},
      {"arp_nd_replies", 3}, {"idle_sleeps", 40},    {"idle_sleep_us", 2500000}};
  ServiceRow service;
  service.name = "web";
  service.healthy = 1;
  service.traffic = {14, 920, 3};
  metrics.services = {service};
  BackendRow backend;
  backend.service = "web";
  backend.name = "web \"1\"";
  backend.weight = 2;
  backend.slots = 1009;
  backend.traffic = {14, 920, 3};
  metrics.backends = {backend};
  TableChangeHistory web_changes;
  SlotChange drain;
  drain.cause = TableChangeCause::kDrain;
  drain.movement = {65537, 65537, 660, 660 / 65537.0, 655 / 65537.0};
  web_changes.record(drain, absl::FromUnixSeconds(1));
  metrics.table_changes = {{"web", web_changes}, {"idle", TableChangeHistory()}};
  return metrics;
}

TEST(PrometheusTest, LabelsAreEscaped) {
  EXPECT_EQ(prometheusLabel("a\\b\"c\nd"), "a\\\\b\\\"c\\nd");
}

TEST(PrometheusTest, EveryFamilyOnceWithItsSamples) {
  const std::string text = prometheusText(sample());
  EXPECT_THAT(text, HasSubstr("# HELP berth_info berthd's version; always 1\n"
                              "# TYPE berth_info gauge\nberth_info{version=\"0.1.0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_uptime_seconds 12.5\n"));
  EXPECT_THAT(text, HasSubstr("berth_snapshot_generation 4\n"));
  EXPECT_THAT(text, HasSubstr("berth_worker_rx_packets_total{worker=\"0\"} 10\n"
                              "berth_worker_rx_packets_total{worker=\"1\"} 5\n"));
  EXPECT_THAT(text, HasSubstr("berth_worker_drops_total{worker=\"0\"} 1\n"));
  // A worker without a connection table has no conntrack samples.
  EXPECT_THAT(text, HasSubstr("berth_conntrack_capacity{worker=\"0\"} 1024\n"));
  EXPECT_THAT(text, Not(HasSubstr("berth_conntrack_capacity{worker=\"1\"}")));
  EXPECT_THAT(text, HasSubstr("berth_nat_sessions{worker=\"0\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("berth_nat_sessions_held{worker=\"0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_nat_sessions_capacity{worker=\"0\"} 4096\n"));
  EXPECT_THAT(text, Not(HasSubstr("berth_nat_sessions{worker=\"1\"}")));
  EXPECT_THAT(text, HasSubstr("berth_nat_events_total{event=\"opened\"} 6\n"));
  EXPECT_THAT(text, Not(HasSubstr("berth_nat_pool_ports"))) << "no fullnat service";
  MetricsSnapshot pooled = sample();
  pooled.nat_pool.push_back({"down", "198.18.1.20", "web", "web-1", 4000, {1990, 2010}});
  const std::string pool_text = prometheusText(pooled);
  EXPECT_THAT(pool_text, HasSubstr("berth_nat_pool_ports{port=\"down\",address=\"198.18.1.20\","
                                   "service=\"web\",backend=\"web-1\"} 4000\n"));
  EXPECT_THAT(pool_text,
              HasSubstr("berth_nat_pool_worker_ports{port=\"down\",address=\"198.18.1.20\","
                        "service=\"web\",backend=\"web-1\",worker=\"1\"} 2010\n"));
  EXPECT_THAT(pool_text, HasSubstr("berth_nat_pool_pairs_omitted 0\n"));
  EXPECT_THAT(text, HasSubstr("berth_drops_total{reason=\"no_service\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_parse_errors_total{error=\"truncated\"} 2\n"));
  EXPECT_THAT(text, HasSubstr("berth_conntrack_events_total{event=\"hit\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("berth_neighbor_events_total{event=\"refused_unsolicited\"} 9\n"));
  EXPECT_THAT(text, HasSubstr("berth_arp_nd_replies_total 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE berth_worker_idle_sleeps_total counter\n"
                              "berth_worker_idle_sleeps_total 40\n"));
  EXPECT_THAT(text, HasSubstr("berth_worker_idle_sleep_seconds_total 2.5\n"));
  EXPECT_THAT(text, HasSubstr("berth_service_packets_total{service=\"web\"} 14\n"));
  EXPECT_THAT(text,
              HasSubstr("berth_backend_slots{service=\"web\",backend=\"web \\\"1\\\"\"} 1009\n"));
  EXPECT_THAT(text,
              HasSubstr("berth_backend_weight{service=\"web\",backend=\"web \\\"1\\\"\"} 2\n"));
  // Slots moved per service and cause, every cause listed; the last change's ratio only where
  // there was one.
  EXPECT_THAT(text,
              HasSubstr("berth_table_slots_moved_total{service=\"web\",cause=\"health\"} 0\n"
                        "berth_table_slots_moved_total{service=\"web\",cause=\"drain\"} 660\n"));
  EXPECT_THAT(text,
              HasSubstr("berth_table_slots_moved_total{service=\"idle\",cause=\"reload\"} 0\n"));
  EXPECT_THAT(text,
              HasSubstr("berth_table_last_change_moved_over_minimum{service=\"web\"} 1.00763\n"));
  EXPECT_THAT(text, Not(HasSubstr("berth_table_last_change_moved_over_minimum{service=\"idle\"}")));
  // HELP and TYPE once per family.
  size_t helps = 0;
  for (size_t at = text.find("# HELP berth_backend_slots "); at != std::string::npos;
       at = text.find("# HELP berth_backend_slots ", at + 1)) {
    ++helps;
  }
  EXPECT_EQ(helps, 1u);
}

TEST(PrometheusTest, PortsShowTheirLinkTotalsQueuesAndXstats) {
  MetricsSnapshot metrics = sample();
  PortStats port;
  port.port = "wan";
  port.driver = "net_ice";
  port.link = {true, 100000, true, true};
  port.totals[kPortImissed] = 42;
  port.totals[kPortRxNombuf] = 7;
  port.rx_queues = {{10, 640, 1}};
  port.tx_queues = {{9, 600, 0}};
  port.xstats = {{"rx_crc_errors", 3}};
  metrics.ports = {port};
  const std::string text = prometheusText(metrics);
  EXPECT_THAT(text, HasSubstr("# TYPE berth_port_imissed_total counter\n"
                              "berth_port_imissed_total{port=\"wan\"} 42\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_rx_nombuf_total{port=\"wan\"} 7\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_ipackets_total{port=\"wan\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_link_up{port=\"wan\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_link_speed_mbps{port=\"wan\"} 100000\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_link_full_duplex{port=\"wan\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_queue_ipackets_total{port=\"wan\",queue=\"0\"} 10\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_queue_errors_total{port=\"wan\",queue=\"0\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_queue_obytes_total{port=\"wan\",queue=\"0\"} 600\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_xstat_total{port=\"wan\",name=\"rx_crc_errors\"} 3\n"));
}

TEST(PrometheusTest, APortWhoseDriverCountsNoDropsHasNoImissedSeries) {
  MetricsSnapshot metrics = sample();
  PortStats counted;
  counted.port = "wan";
  counted.driver = "net_ice";
  PortStats uncounted;
  uncounted.port = "lan";
  uncounted.driver = "net_af_packet";
  uncounted.drops_reported = false;
  metrics.ports = {counted, uncounted};
  const std::string text = prometheusText(metrics);
  EXPECT_THAT(text, HasSubstr("berth_port_imissed_total{port=\"wan\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("berth_port_imissed_total{port=\"lan\"}")));
  EXPECT_THAT(text, HasSubstr("berth_port_drops_reported{port=\"wan\"} 1\n"
                              "berth_port_drops_reported{port=\"lan\"} 0\n"));
  EXPECT_THAT(text, HasSubstr("berth_port_rx_nombuf_total{port=\"lan\"} 0\n"));
}

// Without a fleet section no fleet family appears; with one, the applied version and the agent's
// state do.
TEST(PrometheusTest, FlowSyncShowsItsEventsAndSizesWhereConfigured) {
  MetricsSnapshot metrics = sample();
  EXPECT_THAT(prometheusText(metrics), Not(HasSubstr("berth_sync")));
  metrics.sums.emplace_back("sync_records_sent", 5);
  metrics.sums.emplace_back("sync_refused_bad_mac", 2);
  metrics.sums.emplace_back("sync_peer_flows", 3);
  metrics.sums.emplace_back("sync_own_flows", 4);
  const std::string text = prometheusText(metrics);
  EXPECT_THAT(text, HasSubstr("# TYPE berth_sync_total counter\n"
                              "berth_sync_total{event=\"records_sent\"} 5\n"
                              "berth_sync_total{event=\"refused_bad_mac\"} 2\n"));
  EXPECT_THAT(text, Not(HasSubstr("berth_sync_total{event=\"peer_flows\"}")));
  EXPECT_THAT(text, HasSubstr("# TYPE berth_sync_peer_flows gauge\nberth_sync_peer_flows 3\n"));
  EXPECT_THAT(text, HasSubstr("# TYPE berth_sync_own_flows gauge\nberth_sync_own_flows 4\n"));
}

TEST(PrometheusTest, TheFleetShowsTheAppliedVersion) {
  MetricsSnapshot metrics = sample();
  EXPECT_THAT(prometheusText(metrics), Not(HasSubstr("berth_fleet_")));
  metrics.fleet = FleetMetrics{7, 8, false, true, true, 6, 1, 2};
  const std::string text = prometheusText(metrics);
  EXPECT_THAT(text, HasSubstr("# TYPE berth_fleet_version gauge\nberth_fleet_version 7\n"));
  EXPECT_THAT(text, HasSubstr("berth_fleet_head_version 8\n"));
  EXPECT_THAT(text, HasSubstr("berth_fleet_serving_cache 0\n"));
  EXPECT_THAT(text, HasSubstr("berth_fleet_etcd_reachable 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_fleet_versions_applied_total 6\n"));
  EXPECT_THAT(text, HasSubstr("berth_fleet_versions_refused_total 1\n"));
  EXPECT_THAT(text, HasSubstr("berth_fleet_etcd_errors_total 2\n"));
}

TEST(PrometheusTest, TheLastReloadsResultIsNamedAsPrometheusNamesItsOwn) {
  MetricsSnapshot metrics = sample();
  metrics.reloads.applied = 2;
  metrics.reloads.refused = 1;
  metrics.reloads.last_success_at = absl::FromUnixMillis(1'800'000'000'123);
  metrics.reloads.last_status = absl::InvalidArgumentError("berth.yaml:3:1: bad");
  std::string text = prometheusText(metrics);
  EXPECT_THAT(text, HasSubstr("# TYPE berth_config_last_reload_successful gauge\n"
                              "berth_config_last_reload_successful 0\n"));
  // To the millisecond, not rounded as %g would.
  EXPECT_THAT(text, HasSubstr("berth_config_last_reload_success_timestamp_seconds "
                              "1800000000.123\n"));
  EXPECT_THAT(text, HasSubstr("berth_config_reloads_total{result=\"applied\"} 2\n"
                              "berth_config_reloads_total{result=\"refused\"} 1\n"));
  metrics.reloads.last_status = absl::OkStatus();
  text = prometheusText(metrics);
  EXPECT_THAT(text, HasSubstr("berth_config_last_reload_successful 1\n"));
}

}  // namespace
}  // namespace berth
