// The /berth/... telemetry answers from report rows (metrics/telemetry.h). Pinned: status's
// figures; tables go a page of kTelemetryRows at a time, column by column, with the total and the
// first row; a bad first row, an unknown service and an unknown port are errors that say what was
// expected; ports without a reading yet say so.

#include "berth/metrics/telemetry.h"

#include <gtest/gtest.h>

#include "absl/strings/str_cat.h"

#include <string>
#include <vector>

namespace berth {
namespace {

// The value of entry `name`, which must hold a T.
template <typename T>
T entry(const TelemetryAnswer& answer, const std::string& name) {
  for (const auto& [key, value] : answer.entries) {
    if (key == name) return std::get<T>(value);
  }
  ADD_FAILURE() << "no entry " << name;
  return T();
}

TEST(TelemetryTest, StatusCarriesTheReportsFigures) {
  StatusReport report;
  report.version = "1.0";
  report.uptime_s = 12.7;
  report.snapshot_generation = 5;
  report.backends = 9;
  const TelemetryAnswer answer = statusTelemetry(report);
  EXPECT_EQ(entry<std::string>(answer, "version"), "1.0");
  EXPECT_EQ(entry<uint64_t>(answer, "uptime_s"), 12u);
  EXPECT_EQ(entry<uint64_t>(answer, "snapshot_generation"), 5u);
  EXPECT_EQ(entry<uint64_t>(answer, "backends"), 9u);
}

TEST(TelemetryTest, ServicesComeAPageAtATime) {
  std::vector<ServiceRow> rows(kTelemetryRows + 6);
  for (size_t r = 0; r < rows.size(); ++r) rows[r].name = absl::StrCat("s", r);
  const TelemetryAnswer first = servicesTelemetry(rows, "");
  EXPECT_EQ(entry<uint64_t>(first, "total"), rows.size());
  EXPECT_EQ(entry<std::vector<std::string>>(first, "name").size(), kTelemetryRows);
  const TelemetryAnswer rest = servicesTelemetry(rows, absl::StrCat(kTelemetryRows));
  EXPECT_EQ(entry<std::vector<std::string>>(rest, "name"),
            (std::vector<std::string>{"s64", "s65", "s66", "s67", "s68", "s69"}));
  EXPECT_EQ(servicesTelemetry(rows, "x").error, "parameter: the first row, a number");
}

TEST(TelemetryTest, BackendsAreOneServicesAndAnUnknownServiceIsNamed) {
  std::vector<BackendRow> rows(3);
  rows[0].service = "web";
  rows[0].name = "web-1";
  rows[1].service = "dns";
  rows[1].name = "dns-1";
  rows[2].service = "web";
  rows[2].name = "web-2";
  const auto known = [](absl::string_view name) { return name == "web" || name == "dns"; };
  const TelemetryAnswer web = backendsTelemetry(rows, "web", known);
  EXPECT_EQ(entry<std::string>(web, "service"), "web");
  EXPECT_EQ(entry<std::vector<std::string>>(web, "name"),
            (std::vector<std::string>{"web-1", "web-2"}));
  EXPECT_EQ(backendsTelemetry(rows, "mail", known).error, "no service named 'mail'");
  EXPECT_EQ(backendsTelemetry(rows, "", known).error, "parameters: service[,first row]");
}

TEST(TelemetryTest, PortsNameThemselvesOrSayWhatIsMissing) {
  const absl::Time now = absl::FromUnixSeconds(1000);
  EXPECT_EQ(portsTelemetry(nullptr, PortRates(), "", now, 512).error,
            "no port statistics read yet");
  PortStatsReading reading;
  reading.at = now - absl::Milliseconds(250);
  PortStats outside_port;
  outside_port.port = "outside";
  outside_port.driver = "net_null";
  reading.ports.push_back(outside_port);
  const TelemetryAnswer names = portsTelemetry(&reading, PortRates(), "", now, 512);
  EXPECT_EQ(entry<uint64_t>(names, "read_ms_ago"), 250u);
  EXPECT_EQ(entry<std::vector<std::string>>(names, "ports"), std::vector<std::string>{"outside"});
  const TelemetryAnswer outside = portsTelemetry(&reading, PortRates(), "outside", now, 512);
  EXPECT_EQ(entry<std::string>(outside, "driver"), "net_null");
  EXPECT_NE(portsTelemetry(&reading, PortRates(), "inside", now, 512).error.find("no port named"),
            std::string::npos);
}

}  // namespace
}  // namespace berth
