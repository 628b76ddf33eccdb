#include "berth/config/loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <ostream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "berth/net/crc32c.h"

namespace berth {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

constexpr absl::string_view kValid = R"(services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    table_size: 65537
    hash_fields: 3-tuple
    backends:
      - { name: web-1, address: 198.18.1.2, weight: 2 }
      - name: web-2
        address: 198.18.2.2
  - name: dns
    vip: "2001:db8::53"
    port: 53
    protocol: udp
    backends: []
)";

TEST(ConfigLoaderTest, LoadsAValidConfigWithDefaults) {
  absl::StatusOr<Config> config = parseConfig(kValid, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->services.size(), 2u);
  const ServiceConfig& web = config->services[0];
  EXPECT_EQ(web.name, "web");
  EXPECT_EQ(web.vip, IpAddress::v4(198, 18, 100, 1));
  EXPECT_EQ(web.port, 80);
  EXPECT_EQ(web.protocol, Protocol::kTcp);
  EXPECT_EQ(web.hash_fields, HashFields::kThreeTuple);
  EXPECT_EQ(web.line.number, 2);
  ASSERT_EQ(web.backends.size(), 2u);
  EXPECT_EQ(web.backends[0].weight, 2);
  EXPECT_EQ(web.backends[1].weight, 1);
  EXPECT_EQ(web.backends[1].line.number, 10);
  const ServiceConfig& dns = config->services[1];
  EXPECT_EQ(dns.vip.family, IpFamily::kIpv6);
  EXPECT_EQ(dns.table_size, kDefaultTableSize);
  EXPECT_EQ(dns.hash_fields, HashFields::kFiveTuple);
  EXPECT_TRUE(dns.backends.empty());
  EXPECT_EQ(config->findService("dns"), &dns);
  EXPECT_EQ(config->findService("nope"), nullptr);
}

TEST(ConfigLoaderTest, ShippedConfigsLoad) {
  const char* root = std::getenv("BERTH_SOURCE_ROOT");
  ASSERT_NE(root, nullptr) << "meson test sets BERTH_SOURCE_ROOT to the source tree";
  for (const char* name : {"demo.yaml", "example.yaml"}) {
    absl::StatusOr<Config> config = loadConfigFile(absl::StrCat(root, "/config/", name));
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_FALSE(config->services.empty());
    for (const ServiceConfig& service : config->services) {
      EXPECT_TRUE(buildTable(service.hashingBackends(), service.tableOptions()).ok())
          << service.name;
    }
  }
}

TEST(ConfigLoaderTest, MissingFileIsNotFound) {
  EXPECT_EQ(loadConfigFile("/nonexistent/berth.yaml").status().code(), absl::StatusCode::kNotFound);
}

TEST(ConfigLoaderTest, SmallTableForManyBackendsWarnsWithFieldAndLine) {
  std::string yaml =
      "services:\n  - name: s\n    vip: 198.18.100.1\n    port: 80\n"
      "    protocol: tcp\n    table_size: 101\n    backends:\n"
      "      - { name: a, address: 198.18.1.2 }\n      - { name: b, address: 198.18.1.3 }\n";
  absl::StatusOr<Config> config = parseConfig(yaml, "w.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->warnings.size(), 1u);
  EXPECT_THAT(config->warnings[0],
              StartsWith("w.yaml:6: services[0].table_size: 101 is less than 100"));
  // The smallest prime that gives each backend 100 slots.
  EXPECT_THAT(config->warnings[0], EndsWith("consider a larger prime such as 211"));
}

// Each bad config names file:line:column, the field's path, and the problem, and no Config comes
// back at all: the loader never half-applies.
struct BadConfig {
  const char* description;
  const char* yaml;
  const char* location;  // "file:line:column: path"
  const char* message;
};

void PrintTo(const BadConfig& bad, std::ostream* out) { *out << bad.description; }

class ConfigLoaderErrorTest : public ::testing::TestWithParam<BadConfig> {};

TEST_P(ConfigLoaderErrorTest, NamesTheFieldAndTheLine) {
  const BadConfig& bad = GetParam();
  absl::StatusOr<Config> config = parseConfig(bad.yaml, "bad.yaml");
  ASSERT_FALSE(config.ok()) << bad.description;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()), StartsWith(bad.location)) << bad.description;
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(bad.message)) << bad.description;
}

#define PORT_HEAD "dataplane:\n  ports:\n    - name: p0\n      device: net_null0\n"
#define SERVICE_HEAD \
  "services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n    protocol: tcp\n"
#define ONE_BACKEND "    backends:\n      - { name: a, address: 198.18.1.2 }\n"

INSTANTIATE_TEST_SUITE_P(
    Cases, ConfigLoaderErrorTest,
    ::testing::Values(
        BadConfig{"empty file", "", "bad.yaml:1:1: config", "is empty"},
        BadConfig{"yaml syntax", "services: [\n  - {name: x\n", "bad.yaml:", "yaml:"},
        BadConfig{"top level not a map", "- a\n- b\n", "bad.yaml:1:1: ", "expected a map"},
        BadConfig{"unknown top-level key", "services: []\nlisten: 1\n", "bad.yaml:2:1: listen",
                  "unknown key; expected one of: dataplane, services, metrics, bgp"},
        BadConfig{
            "sync without peers or a fleet",
            "services: []\nsync: { listen: \"198.18.0.10:7410\", keys: [{ id: 1, file: k }] }\n",
            "bad.yaml:2:7: sync", "needs peers"},
        BadConfig{"sync peer of another IP version",
                  "services: []\nsync:\n  listen: \"198.18.0.10:7410\"\n"
                  "  peers: [\"198.18.0.11:7410\", \"[2001:db8::1]:7410\"]\n"
                  "  keys: [{ id: 1, file: k }]\n",
                  "bad.yaml:4:31: sync.peers[1]", "another IP version"},
        BadConfig{"sync peer is the listen endpoint",
                  "services: []\nsync:\n  listen: \"198.18.0.10:7410\"\n"
                  "  peers: [\"198.18.0.10:7410\"]\n  keys: [{ id: 1, file: k }]\n",
                  "bad.yaml:4:11: sync.peers[0]", "own sync.listen"},
        BadConfig{
            "sync without keys",
            "services: []\nsync: { listen: \"198.18.0.10:7410\", peers: [\"198.18.0.11:7410\"] }\n",
            "bad.yaml:2:7: sync", "needs one or two keys"},
        BadConfig{"sync with three keys",
                  "services: []\nsync:\n  listen: \"198.18.0.10:7410\"\n"
                  "  peers: [\"198.18.0.11:7410\"]\n"
                  "  keys: [{ id: 1, file: a }, { id: 2, file: b }, { id: 3, file: c }]\n",
                  "bad.yaml:5:9: sync.keys", "needs one or two keys"},
        BadConfig{"sync keys of one id",
                  "services: []\nsync:\n  listen: \"198.18.0.10:7410\"\n"
                  "  peers: [\"198.18.0.11:7410\"]\n"
                  "  keys: [{ id: 1, file: a }, { id: 1, file: b }]\n",
                  "bad.yaml:5:36: sync.keys[1].id", "two ids"},
        BadConfig{"sync key id out of range",
                  "services: []\nsync:\n  listen: \"198.18.0.10:7410\"\n"
                  "  peers: [\"198.18.0.11:7410\"]\n  keys: [{ id: 0, file: a }]\n",
                  "bad.yaml:5:16: sync.keys[0].id", "from 1 to 255"},
        BadConfig{"metrics listen without a port", "services: []\nmetrics: { listen: 127.0.0.1 }\n",
                  "bad.yaml:2:20: metrics.listen", "'127.0.0.1' is not an ADDRESS:PORT"},
        BadConfig{"unknown metrics key", "services: []\nmetrics: { path: /metrics }\n",
                  "bad.yaml:2:12: metrics.path", "unknown key; expected one of: listen"},
        BadConfig{"missing services", "{}\n", "bad.yaml:1:1: ", "missing required key 'services'"},
        BadConfig{"services not a list", "services: 3\n", "bad.yaml:1:11: services",
                  "expected a list of services"},
        BadConfig{"unknown service key", SERVICE_HEAD "    colour: blue\n" ONE_BACKEND,
                  "bad.yaml:6:5: services[0].colour", "unknown key"},
        BadConfig{"duplicate key", SERVICE_HEAD "    port: 81\n" ONE_BACKEND,
                  "bad.yaml:6:5: services[0].port", "key appears twice"},
        BadConfig{"missing name", "services:\n  - vip: 198.18.100.1\n    port: 80\n",
                  "bad.yaml:2:5: services[0]", "missing required key 'name'"},
        BadConfig{"name not a string", "services:\n  - name: [a, b]\n",
                  "bad.yaml:2:11: services[0].name", "expected a non-empty string"},
        BadConfig{"bad vip", "services:\n  - name: web\n    vip: 198.18.100.300\n",
                  "bad.yaml:3:10: services[0].vip",
                  "'198.18.100.300' is not an IPv4 or IPv6 address"},
        BadConfig{"port out of range",
                  "services:\n  - name: web\n    vip: 198.18.100.1\n    port: 70000\n",
                  "bad.yaml:4:11: services[0].port",
                  "must be an integer from 1 to 65535, got '70000'"},
        BadConfig{"port not a number",
                  "services:\n  - name: web\n    vip: 198.18.100.1\n    port: http\n",
                  "bad.yaml:4:11: services[0].port", "got 'http'"},
        BadConfig{
            "bad protocol",
            "services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n    protocol: sctp\n",
            "bad.yaml:5:15: services[0].protocol", "must be tcp or udp, got 'sctp'"},
        BadConfig{"table size not prime", SERVICE_HEAD "    table_size: 65536\n" ONE_BACKEND,
                  "bad.yaml:6:17: services[0].table_size", "65536 is not prime"},
        BadConfig{"table size too large", SERVICE_HEAD "    table_size: 16777259\n" ONE_BACKEND,
                  "bad.yaml:6:17: services[0].table_size", "from 2 to 16777213"},
        BadConfig{
            "table size not above N",
            SERVICE_HEAD
            "    table_size: 2\n    backends:\n"
            "      - { name: a, address: 198.18.1.2 }\n      - { name: b, address: 198.18.1.3 }\n",
            "bad.yaml:8:7: services[0].backends", "must be larger than the number of backends (2)"},
        BadConfig{"bad hash fields", SERVICE_HEAD "    hash_fields: 4-tuple\n" ONE_BACKEND,
                  "bad.yaml:6:18: services[0].hash_fields", "'4-tuple' is not a hash field set"},
        BadConfig{"missing backends", SERVICE_HEAD, "bad.yaml:2:5: services[0]",
                  "missing required key 'backends'"},
        BadConfig{"backends not a list", SERVICE_HEAD "    backends: {a: 1}\n",
                  "bad.yaml:6:15: services[0].backends", "expected a list of backends"},
        BadConfig{"backend not a map", SERVICE_HEAD "    backends:\n      - web-1\n",
                  "bad.yaml:7:9: services[0].backends[0]", "expected a map"},
        BadConfig{"unknown backend key",
                  SERVICE_HEAD
                  "    backends:\n      - { name: a, address: 198.18.1.2, port: 8080 }\n",
                  "bad.yaml:7:41: services[0].backends[0].port",
                  "unknown key; expected one of: name, address, weight"},
        BadConfig{"bad backend address",
                  SERVICE_HEAD "    backends:\n      - { name: a, address: backend.local }\n",
                  "bad.yaml:7:29: services[0].backends[0].address",
                  "is not an IPv4 or IPv6 address"},
        BadConfig{"negative weight",
                  SERVICE_HEAD
                  "    backends:\n      - { name: a, address: 198.18.1.2, weight: -1 }\n",
                  "bad.yaml:7:49: services[0].backends[0].weight",
                  "must be an integer from 0 to 1000000, got '-1'"},
        BadConfig{"weight not a number",
                  SERVICE_HEAD
                  "    backends:\n      - { name: a, address: 198.18.1.2, weight: heavy }\n",
                  "bad.yaml:7:49: services[0].backends[0].weight", "got 'heavy'"},
        BadConfig{"weight too small for the table",
                  SERVICE_HEAD "    table_size: 7\n    backends:\n"
                               "      - { name: a, address: 198.18.1.2, weight: 1000 }\n      - { "
                               "name: b, address: 198.18.1.3, weight: 1 }\n",
                  "bad.yaml:8:7: services[0].backends", "backend 'b' has weight 1 of a total 1001"},
        BadConfig{"duplicate backend name",
                  SERVICE_HEAD "    backends:\n      - { name: a, address: 198.18.1.2 }\n"
                               "      - { name: a, address: 198.18.1.3 }\n",
                  "bad.yaml:8:9: services[0].backends[1]",
                  "duplicate backend name 'a' in service 'web'"},
        BadConfig{"duplicate backend address",
                  SERVICE_HEAD "    backends:\n      - { name: a, address: 198.18.1.2 }\n"
                               "      - { name: b, address: 198.18.1.2 }\n",
                  "bad.yaml:8:9: services[0].backends[1]",
                  "backend address 198.18.1.2 is already used"},
        BadConfig{"duplicate service name",
                  SERVICE_HEAD ONE_BACKEND "  - name: web\n    vip: 198.18.100.2\n    port: 80\n   "
                                           " protocol: tcp\n    backends: []\n",
                  "bad.yaml:8:5: services[1]", "duplicate service name 'web'"},
        BadConfig{"duplicate listener",
                  SERVICE_HEAD ONE_BACKEND "  - name: web2\n    vip: 198.18.100.1\n    port: 80\n  "
                                           "  protocol: tcp\n    backends: []\n",
                  "bad.yaml:8:5: services[1]",
                  "tcp 198.18.100.1:80 is already served by service 'web'"},
        BadConfig{"port without an address", PORT_HEAD "services: []\n",
                  "bad.yaml:3:7: dataplane.ports[0]",
                  "a port needs an ipv4 or an ipv6 address, or both"},
        BadConfig{
            "IPv6 address in the ipv4 field", PORT_HEAD "      ipv4: 2001:db8::1\nservices: []\n",
            "bad.yaml:5:13: dataplane.ports[0].ipv4", "must be an IPv4 address, got 2001:db8::1"},
        BadConfig{"gateway and gateway_mac",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      gateway: 198.18.0.1\n"
                            "      gateway_mac: 02:00:00:00:00:01\nservices: []\n",
                  "bad.yaml:7:20: dataplane.ports[0].gateway_mac", "not both"},
        BadConfig{"gateway of a version the port lacks",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      gateway: 2001:db8::1\n"
                            "services: []\n",
                  "bad.yaml:6:16: dataplane.ports[0].gateway",
                  "the port has no IPv6 address to reach 2001:db8::1 from"},
        BadConfig{"multicast gateway MAC",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      gateway_mac: 01:00:5e:00:00:01\n"
                            "services: []\n",
                  "bad.yaml:6:20: dataplane.ports[0].gateway_mac", "is a multicast MAC"},
        BadConfig{"bad gateway MAC",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      gateway_mac: 02:00:00\n"
                            "services: []\n",
                  "bad.yaml:6:20: dataplane.ports[0].gateway_mac", "is not a MAC address"},
        BadConfig{"MTU out of range",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      mtu: 10000\nservices: []\n",
                  "bad.yaml:6:12: dataplane.ports[0].mtu", "must be an integer from 68 to 9600"},
        BadConfig{"queues out of range",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      queues: 0\nservices: []\n",
                  "bad.yaml:6:15: dataplane.ports[0].queues", "must be an integer from 1 to 1024"},
        BadConfig{"IPv6 port MTU below 1280",
                  PORT_HEAD "      ipv6: 2001:db8::10\n      mtu: 1000\nservices: []\n",
                  "bad.yaml:6:12: dataplane.ports[0].mtu", "below 1280"},
        BadConfig{"duplicate port name",
                  PORT_HEAD "      ipv4: 198.18.0.10\n    - name: p0\n      device: net_null1\n"
                            "      ipv4: 198.18.0.11\nservices: []\n",
                  "bad.yaml:6:7: dataplane.ports[1]", "duplicate port name 'p0'"},
        BadConfig{"duplicate device",
                  PORT_HEAD "      ipv4: 198.18.0.10\n    - name: p1\n      device: net_null0\n"
                            "      ipv4: 198.18.0.11\nservices: []\n",
                  "bad.yaml:6:7: dataplane.ports[1]",
                  "device 'net_null0' untagged is already port 'p0'; ports on one device need "
                  "different `vlan`s"},
        BadConfig{"same device, same VLAN",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      vlan: 7\n    - name: p1\n"
                            "      device: net_null0\n      vlan: 7\n      ipv4: 198.18.0.11\n"
                            "services: []\n",
                  "bad.yaml:7:7: dataplane.ports[1]",
                  "device 'net_null0' VLAN 7 is already port 'p0'"},
        BadConfig{"VLAN ports that give the device different queues",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      queues: 2\n    - name: p1\n"
                            "      device: net_null0\n      vlan: 7\n      ipv4: 198.18.0.11\n"
                            "services: []\n",
                  "bad.yaml:7:7: dataplane.ports[1]",
                  "queues: 0 differs from port 'p0' (2) on the same device"},
        BadConfig{"VLAN ports that give the device different RSS keys",
                  PORT_HEAD "      ipv4: 198.18.0.10\n    - name: p1\n      device: net_null0\n"
                            "      vlan: 7\n      rss_key: symmetric\n      ipv4: 198.18.0.11\n"
                            "services: []\n",
                  "bad.yaml:6:7: dataplane.ports[1]",
                  "rss_key or peer_rss differs from port 'p0' on the same device"},
        BadConfig{"an egress port that is not there",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      egress: downlink\nservices: []\n",
                  "bad.yaml:6:15: dataplane.ports[0].egress", "no port named 'downlink'"},
        BadConfig{"a service's egress port that is not there",
                  PORT_HEAD "      ipv4: 198.18.0.10\n" SERVICE_HEAD
                            "    egress: downlink\n" ONE_BACKEND,
                  "bad.yaml:11:13: services[0].egress", "no port named 'downlink'"},
        BadConfig{"too few RX descriptors",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      rx_descriptors: 32\nservices: []\n",
                  "bad.yaml:6:23: dataplane.ports[0].rx_descriptors",
                  "must be an integer from 64 to 32768, got '32'"},
        BadConfig{"too many TX descriptors",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      tx_descriptors: 65536\nservices: []\n",
                  "bad.yaml:6:23: dataplane.ports[0].tx_descriptors",
                  "must be an integer from 64 to 32768"},
        BadConfig{"VLAN ports that give the device different descriptors",
                  PORT_HEAD "      ipv4: 198.18.0.10\n    - name: p1\n      device: net_null0\n"
                            "      vlan: 7\n      rx_descriptors: 4096\n      ipv4: 198.18.0.11\n"
                            "services: []\n",
                  "bad.yaml:6:7: dataplane.ports[1]",
                  "rx_descriptors and tx_descriptors differ from port 'p0' on the same device"},
        BadConfig{"a pool of fewer than 64 mbufs",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      mbufs: 10\nservices: []\n",
                  "bad.yaml:6:14: dataplane.ports[0].mbufs", "must be an integer from 64"},
        BadConfig{"checksum_offload not a boolean",
                  PORT_HEAD
                  "      ipv4: 198.18.0.10\n      checksum_offload: maybe\nservices: []\n",
                  "bad.yaml:6:25: dataplane.ports[0].checksum_offload", "maybe"},
        BadConfig{"VLAN ports that give the device different pools",
                  PORT_HEAD "      ipv4: 198.18.0.10\n    - name: p1\n      device: net_null0\n"
                            "      vlan: 7\n      mbufs: 4096\n      ipv4: 198.18.0.11\n"
                            "services: []\n",
                  "bad.yaml:6:7: dataplane.ports[1]",
                  "mbufs and checksum_offload differ from port 'p0' on the same device"},
        BadConfig{"strict_numa not a boolean",
                  "dataplane:\n  strict_numa: sometimes\nservices: []\n",
                  "bad.yaml:2:16: dataplane.strict_numa", "sometimes"},
        BadConfig{"idle sleep past its bound",
                  "dataplane:\n  idle: { max_sleep_us: 20000 }\nservices: []\n",
                  "bad.yaml:2:25: dataplane.idle.max_sleep_us",
                  "must be an integer from 1 to 10000"},
        BadConfig{"idle after no polls",
                  "dataplane:\n  idle:\n    after_empty_polls: 0\nservices: []\n",
                  "bad.yaml:3:24: dataplane.idle.after_empty_polls",
                  "must be an integer from 1 to 100000000"},
        BadConfig{"idle with an unknown key", "dataplane:\n  idle: { sleep: 5 }\nservices: []\n",
                  "bad.yaml:2:11: dataplane.idle.sleep",
                  "unknown key; expected one of: after_empty_polls, max_sleep_us"},
        BadConfig{"VLAN 4095",
                  PORT_HEAD "      ipv4: 198.18.0.10\n      vlan: 4095\nservices: []\n",
                  "bad.yaml:6:13: dataplane.ports[0].vlan", "must be an integer from 1 to 4094"},
        BadConfig{"VLAN 0", PORT_HEAD "      ipv4: 198.18.0.10\n      vlan: 0\nservices: []\n",
                  "bad.yaml:6:13: dataplane.ports[0].vlan", "must be an integer from 1 to 4094"},
        BadConfig{"EAL arguments not a list", "dataplane:\n  eal: --no-huge\nservices: []\n",
                  "bad.yaml:2:8: dataplane.eal", "expected a list of strings"},
        BadConfig{"EAL argument not a string",
                  "dataplane:\n  eal: [--no-huge, [a]]\nservices: []\n",
                  "bad.yaml:2:20: dataplane.eal[1]", "expected a string"},
        BadConfig{"unknown forwarding", SERVICE_HEAD "    forwarding: vxlan\n" ONE_BACKEND,
                  "bad.yaml:6:17: services[0].forwarding",
                  "must be one of ipip, gue, gre, l2dsr, fullnat, got 'vxlan'"},
        BadConfig{"gue without gue_port", SERVICE_HEAD "    forwarding: gue\n" ONE_BACKEND,
                  "bad.yaml:2:5: services[0]", "missing required key 'gue_port'"},
        BadConfig{"gue_port without gue", SERVICE_HEAD "    gue_port: 6080\n" ONE_BACKEND,
                  "bad.yaml:6:15: services[0].gue_port", "only applies with forwarding: gue"},
        BadConfig{"unknown announce", SERVICE_HEAD "    announce: ospf\n" ONE_BACKEND,
                  "bad.yaml:6:15: services[0].announce",
                  "must be one of arp, bgp, none, got 'ospf'"},
        BadConfig{"IPv6 backend behind an IPv4 VIP with ipip",
                  SERVICE_HEAD "    backends:\n      - { name: a, address: 2001:db8::2 }\n",
                  "bad.yaml:7:9: services[0].backends[0]",
                  "is not of the VIP's IP version, which forwarding: ipip needs"},
        BadConfig{
            "backend MAC without l2dsr",
            SERVICE_HEAD
            "    backends:\n      - { name: a, address: 198.18.1.2, mac: 02:00:00:00:01:02 }\n",
            "bad.yaml:7:9: services[0].backends[0]",
            "a backend mac only applies with forwarding: l2dsr"},
        BadConfig{"unknown drain policy", SERVICE_HEAD "    drain: drop\n" ONE_BACKEND,
                  "bad.yaml:6:12: services[0].drain",
                  "must be one of keep_established, repick, got 'drop'"},
        BadConfig{"conntrack too small",
                  "dataplane:\n  conntrack: { entries_per_core: 2 }\nservices: []\n",
                  "bad.yaml:2:34: dataplane.conntrack.entries_per_core",
                  "must be an integer from 4 to 268435456"},
        BadConfig{"conntrack timeout of zero",
                  "dataplane:\n  conntrack:\n    timeouts: { udp: 0 }\nservices: []\n",
                  "bad.yaml:3:22: dataplane.conntrack.timeouts.udp",
                  "must be an integer from 1 to 86400"},
        BadConfig{"an RSS key that is neither a choice nor hex",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "rss_key: microsoft }\nservices: []\n",
                  "bad.yaml:3:66: dataplane.ports[0].rss_key",
                  "must be random, symmetric, or a key of 40 to 52 bytes in hex"},
        BadConfig{"an RSS key too short",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "rss_key: \"6d:5a:6d:5a\" }\nservices: []\n",
                  "bad.yaml:3:66: dataplane.ports[0].rss_key", "a key of 40 to 52 bytes"},
        BadConfig{"a peer's RSS without the queues it spreads over",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "peer_rss: { key: symmetric } }\nservices: []\n",
                  "bad.yaml:3:", "dataplane.ports[0].peer_rss: needs queues"},
        BadConfig{"a peer's RSS key that is not one",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "queues: 2, peer_rss: { key: \"6d:5a\" } }\nservices: []\n",
                  "bad.yaml:3:", "dataplane.ports[0].peer_rss.key: must be symmetric or a key"},
        BadConfig{"a peer's redirection table that is not a power of two",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "queues: 2, peer_rss: { key: symmetric, table: [0, 1, 0] } }\nservices: []\n",
                  "bad.yaml:3:",
                  "dataplane.ports[0].peer_rss.table: 3 entries; a redirection "
                  "table has a power of two of them"},
        BadConfig{"a peer's redirection table naming a queue the port lacks",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "queues: 2, peer_rss: { key: symmetric, table: [0, 2] } }\nservices: []\n",
                  "bad.yaml:3:",
                  "dataplane.ports[0].peer_rss.table: [1]: '2' is not a queue of "
                  "the port's 2 (0 to 1)"},
        BadConfig{"a peer's RSS with an unknown key",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "queues: 2, peer_rss: { key: symmetric, queues: 2 } }\nservices: []\n",
                  "bad.yaml:3:", "dataplane.ports[0].peer_rss.queues: unknown key"},
        BadConfig{
            "a local port range that is not FIRST-LAST",
            "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
            "snat_addresses: [198.18.0.20], snat_ports: 2000 }\nservices: []\n",
            "bad.yaml:3:", "dataplane.ports[0].snat_ports: '2000' is not a port range FIRST-LAST"},
        BadConfig{"local ports without local addresses",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "snat_ports: 2000-3000 }\nservices: []\n",
                  "bad.yaml:3:", "snat_ports: only applies with snat_addresses"},
        BadConfig{"a local address that is the port's own",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "snat_addresses: [198.18.0.10] }\nservices: []\n",
                  "bad.yaml:3:", "snat_addresses: 198.18.0.10 is the port's own address"},
        BadConfig{"a local address on two ports",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "snat_addresses: [198.18.0.20] }\n    - { name: p1, device: net_null1, "
                  "ipv4: 198.18.1.10, snat_addresses: [198.18.0.20] }\nservices: []\n",
                  "bad.yaml:4:", "snat address 198.18.0.20 is already another port's"},
        BadConfig{"a Full-NAT session table too small",
                  "dataplane:\n  conntrack: { nat_sessions_per_core: 10 }\nservices: []\n",
                  "bad.yaml:2:", "dataplane.conntrack.nat_sessions_per_core: must be an integer"},
        BadConfig{"fullnat without local addresses of the VIP's version",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "ipv6: \"2001:db8::10\", gateway_mac: \"02:00:00:00:00:fe\", "
                  "snat_addresses: [198.18.0.20] }\nservices:\n  - { name: web, "
                  "vip: \"2001:db8:100::1\", port: 80, protocol: tcp, forwarding: fullnat,\n"
                  "      backends: [ { name: a, address: \"2001:db8:1::2\" } ] }\n",
                  "bad.yaml:5:",
                  "services[0]: forwarding: fullnat needs snat_addresses of IPv6 on the port"},
        BadConfig{"fullnat without a gateway for the replies",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "snat_addresses: [198.18.0.20] }\nservices:\n  - { name: web, "
                  "vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,\n"
                  "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
                  "bad.yaml:5:", "no port has a gateway or gateway_mac"},
        BadConfig{"fullnat to a backend of the other IP version",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "ipv6: \"2001:db8::10\", gateway_mac: \"02:00:00:00:00:fe\", "
                  "snat_addresses: [198.18.0.20] }\nservices:\n  - { name: web, "
                  "vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,\n"
                  "      backends: [ { name: a, address: \"2001:db8:1::2\" } ] }\n",
                  "bad.yaml:6:",
                  "is IPv6 behind an IPv4 VIP: forwarding: fullnat translates IPv6 clients to IPv4 "
                  "backends (NAT64), not IPv4 clients to IPv6 backends"},
        BadConfig{"NAT64 without an IPv4 local address",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "ipv6: \"2001:db8::10\", gateway_mac: \"02:00:00:00:00:fe\", "
                  "snat_addresses: [\"2001:db8::20\"] }\nservices:\n  - { name: web, "
                  "vip: \"2001:db8:100::1\", port: 80, protocol: tcp, forwarding: fullnat,\n"
                  "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
                  "bad.yaml:5:",
                  "forwarding: fullnat needs snat_addresses of IPv4 on the port its traffic leaves "
                  "through for its IPv4 backends (NAT64)"},
        BadConfig{"bounded load with fullnat",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "gateway_mac: \"02:00:00:00:00:fe\", snat_addresses: [198.18.0.20] }\n"
                  "services:\n  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, "
                  "forwarding: fullnat, bounded_load: 1.25,\n"
                  "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
                  "bad.yaml:5:", "bounded_load: does not apply with forwarding: fullnat"},
        BadConfig{"the PROXY protocol without fullnat",
                  "services:\n  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp,\n"
                  "      forwarding: l2dsr, proxy_protocol: v2,\n"
                  "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
                  "bad.yaml:3:",
                  "services[0].proxy_protocol: only applies with forwarding: fullnat (with l2dsr"},
        BadConfig{"the PROXY protocol over UDP",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "gateway_mac: \"02:00:00:00:00:fe\", snat_addresses: [198.18.0.20] }\n"
                  "services:\n  - { name: dns, vip: 198.18.100.1, port: 53, protocol: udp, "
                  "forwarding: fullnat,\n      proxy_protocol: v2,\n"
                  "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
                  "bad.yaml:6:", "services[0].proxy_protocol: only applies to a tcp service"},
        BadConfig{"a PROXY protocol version berth does not write",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "gateway_mac: \"02:00:00:00:00:fe\", snat_addresses: [198.18.0.20] }\n"
                  "services:\n  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, "
                  "forwarding: fullnat, proxy_protocol: v1,\n"
                  "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
                  "bad.yaml:5:", "services[0].proxy_protocol"},
        BadConfig{"a VIP that is a local address",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "gateway_mac: \"02:00:00:00:00:fe\", snat_addresses: [198.18.100.1] }\n"
                  "services:\n  - { name: web, "
                  "vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,\n"
                  "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
                  "bad.yaml:5:", "the VIP 198.18.100.1 is port 'p0''s snat address"},
        BadConfig{"an ICMP reply rate of zero",
                  "dataplane:\n  icmp: { too_big_per_second: 0 }\nservices: []\n",
                  "bad.yaml:2:31: dataplane.icmp.too_big_per_second",
                  "must be an integer from 1 to 100000000"},
        BadConfig{"unknown icmp key", "dataplane:\n  icmp: { echo: 5 }\nservices: []\n",
                  "bad.yaml:2:11: dataplane.icmp.echo", "unknown key"},
        BadConfig{"a neighbour refresh no longer than its request timeout",
                  "dataplane:\n  neighbors: { refresh_interval: 1, request_timeout: 2 }\n"
                  "services: []\n",
                  "bad.yaml:2:34: dataplane.neighbors.refresh_interval",
                  "must be longer than request_timeout (2.000 s)"},
        BadConfig{"a negative lock time",
                  "dataplane:\n  neighbors: { lock_time: -1 }\nservices: []\n",
                  "bad.yaml:2:27: dataplane.neighbors.lock_time",
                  "must be a number of seconds from 0 to 3600"},
        BadConfig{"learn_announcements not a boolean",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "learn_announcements: yes }\nservices: []\n",
                  "bad.yaml:3:78: dataplane.ports[0].learn_announcements",
                  "must be true or false, got 'yes'"},
        BadConfig{"an exception interface of another kind",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "exception: { kind: kni, name: b0 } }\nservices: []\n",
                  "bad.yaml:3:76: dataplane.ports[0].exception.kind",
                  "must be one of tap, virtio-user, got 'kni'"},
        BadConfig{"an exception interface name too long",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "exception: { name: berth-exception0 } }\nservices: []\n",
                  "bad.yaml:3:76: dataplane.ports[0].exception.name",
                  "must be a kernel interface name: 1 to 15 characters"},
        BadConfig{"an exception class rate of zero",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "exception: { name: b0, per_second: { bgp: 0 } } }\nservices: []\n",
                  "bad.yaml:3:99: dataplane.ports[0].exception.per_second.bgp",
                  "must be an integer from 1 to 10000000"},
        BadConfig{"two ports with one exception interface",
                  "dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
                  "exception: { name: b0 } }\n    - { name: p1, device: net_null1, ipv4: "
                  "198.18.0.11, exception: { name: b0 } }\nservices: []\n",
                  "bad.yaml:4:7: dataplane.ports[1]",
                  "exception interface 'b0' is already another port's"},
        BadConfig{"unknown conntrack key", "dataplane:\n  conntrack: { size: 5 }\nservices: []\n",
                  "bad.yaml:2:16: dataplane.conntrack.size", "unknown key"},
        BadConfig{"health timeout above its interval",
                  SERVICE_HEAD "    health: { type: tcp, interval: 1, timeout: 2 }\n" ONE_BACKEND,
                  "bad.yaml:6:48: services[0].health.timeout", "must not exceed the interval"},
        BadConfig{"health path without http",
                  SERVICE_HEAD "    health: { type: tcp, path: /x }\n" ONE_BACKEND,
                  "bad.yaml:6:32: services[0].health.path", "only applies with type: http"},
        BadConfig{"health expect out of range",
                  SERVICE_HEAD "    health: { type: http, expect: 200-700 }\n" ONE_BACKEND,
                  "bad.yaml:6:35: services[0].health.expect", "must be an HTTP status"},
        BadConfig{"unknown health key", SERVICE_HEAD "    health: { kind: tcp }\n" ONE_BACKEND,
                  "bad.yaml:6:15: services[0].health.kind", "unknown key"},
        BadConfig{"backend health override out of range",
                  SERVICE_HEAD "    backends:\n      - { name: a, address: 198.18.1.2, "
                               "health: { rise: 0 } }\n",
                  "bad.yaml:7:57: services[0].backends[0].health.rise",
                  "must be an integer from 1 to 100"},
        BadConfig{"unknown algorithm", SERVICE_HEAD "    algorithm: jump\n" ONE_BACKEND,
                  "bad.yaml:6:16: services[0].algorithm",
                  "must be one of maglev, ring, rendezvous"},
        BadConfig{"replicas without a ring", SERVICE_HEAD "    replicas: 100\n" ONE_BACKEND,
                  "bad.yaml:6:15: services[0].replicas", "only applies with algorithm: ring"},
        BadConfig{"replicas out of range",
                  SERVICE_HEAD "    algorithm: ring\n    replicas: 0\n" ONE_BACKEND,
                  "bad.yaml:7:15: services[0].replicas", "must be an integer from 1 to 10000"},
        BadConfig{"bounded load of 1", SERVICE_HEAD "    bounded_load: 1\n" ONE_BACKEND,
                  "bad.yaml:6:19: services[0].bounded_load",
                  "must be a number above 1 and at most 100, got '1'"},
        BadConfig{"bounded load not a number", SERVICE_HEAD "    bounded_load: lots\n" ONE_BACKEND,
                  "bad.yaml:6:19: services[0].bounded_load", "got 'lots'"},
        BadConfig{
            "announce bgp without a bgp section",
            PORT_HEAD "      ipv4: 198.18.0.10\n" SERVICE_HEAD "    announce: bgp\n" ONE_BACKEND,
            "bad.yaml:11:15: services[0].announce", "announce: bgp needs a top-level bgp section"},
        BadConfig{"bgp port that does not exist",
                  PORT_HEAD "      ipv4: 198.18.0.10\n"
                            "bgp: { asn: 64601, router_id: 198.18.0.21, port: p9, "
                            "neighbors: [ { address: 198.18.0.1, asn: 64600 } ] }\n"
                            "services: []\n",
                  "bad.yaml:6:50: bgp.port", "no port named 'p9' in dataplane.ports"},
        BadConfig{"bgp router id of IPv6",
                  PORT_HEAD "      ipv4: 198.18.0.10\n"
                            "bgp: { asn: 64601, router_id: \"2001:db8::1\", port: p0, "
                            "neighbors: [ { address: 198.18.0.1, asn: 64600 } ] }\n"
                            "services: []\n",
                  "bad.yaml:6:31: bgp.router_id", "must be an IPv4 address"},
        BadConfig{"bgp without neighbors",
                  PORT_HEAD "      ipv4: 198.18.0.10\n"
                            "bgp: { asn: 64601, router_id: 198.18.0.21, port: p0 }\n"
                            "services: []\n",
                  "bad.yaml:6:6: bgp", "needs a list of neighbors"},
        BadConfig{"bgp hold time below 3",
                  PORT_HEAD "      ipv4: 198.18.0.10\n"
                            "bgp: { asn: 64601, router_id: 198.18.0.21, port: p0, hold_time: 1, "
                            "neighbors: [ { address: 198.18.0.1, asn: 64600 } ] }\n"
                            "services: []\n",
                  "bad.yaml:6:65: bgp.hold_time", "must be an integer from 3 to 65535"},
        BadConfig{"bgp forwarding after withdrawal past a minute",
                  PORT_HEAD "      ipv4: 198.18.0.10\n"
                            "bgp: { asn: 64601, router_id: 198.18.0.21, port: p0, "
                            "forward_after_withdrawal: 61, "
                            "neighbors: [ { address: 198.18.0.1, asn: 64600 } ] }\n"
                            "services: []\n",
                  "bad.yaml:6:80: bgp.forward_after_withdrawal",
                  "must be a number of seconds from 0 to 60"},
        BadConfig{"bgp neighbor without an asn",
                  PORT_HEAD "      ipv4: 198.18.0.10\n"
                            "bgp: { asn: 64601, router_id: 198.18.0.21, port: p0, "
                            "neighbors: [ { address: 198.18.0.1 } ] }\n"
                            "services: []\n",
                  "bad.yaml:6:67: bgp.neighbors[0]", "missing required key 'asn'"},
        BadConfig{"bgp next hop of the wrong IP version",
                  PORT_HEAD "      ipv4: 198.18.0.10\n"
                            "bgp: { asn: 64601, router_id: 198.18.0.21, port: p0, "
                            "neighbors: [ { address: 198.18.0.1, asn: 64600 } ] }\n"
                            "services:\n  - name: web6\n    vip: \"2001:db8::80\"\n"
                            "    port: 80\n    protocol: tcp\n    forwarding: gre\n"
                            "    announce: bgp\n    backends: []\n",
                  "bad.yaml:13:15: services[0].announce",
                  "bgp.port 'p0' has no IPv6 address to be the next hop of 2001:db8::80"},
        BadConfig{"too many ring points",
                  SERVICE_HEAD "    algorithm: ring\n    replicas: 10000\n"
                               "    backends:\n      - { name: a, address: 198.18.1.2, "
                               "weight: 2000 }\n",
                  "bad.yaml:7:15: services[0].replicas", "more than the 16777216 a ring may have"},
        BadConfig{"no port of the backend's IP version",
                  PORT_HEAD "      ipv6: 2001:db8::10\n" SERVICE_HEAD ONE_BACKEND,
                  "bad.yaml:12:9: services[0].backends[0]",
                  "no port has an IPv4 address to send to 198.18.1.2 from"}));

TEST(ConfigLoaderTest, LoadsTheDataplaneAndForwardingSettings) {
  constexpr absl::string_view kYaml = R"(dataplane:
  eal: [--no-huge, -m, "512"]
  ports:
    - name: uplink
      device: net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap
      ipv4: 198.18.0.10
      ipv6: 2001:db8::10
      gateway: 198.18.0.254
      mtu: 9000
      queues: 4
    - { name: second, device: "0000:3b:00.0", ipv4: 198.18.0.11, gateway_mac: 02:00:00:00:00:fe }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    forwarding: gue
    gue_port: 6080
    announce: arp
    backends:
      - { name: web-1, address: 2001:db8:1::2 }
  - name: dsr
    vip: 198.18.100.2
    port: 80
    protocol: tcp
    forwarding: l2dsr
    backends:
      - { name: dsr-1, address: 198.18.1.2, mac: 02:00:00:00:01:02 }
      - { name: dsr-2, address: 198.18.1.3 }
)";
  absl::StatusOr<Config> config = parseConfig(kYaml, "dp.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dataplane.eal, (std::vector<std::string>{"--no-huge", "-m", "512"}));
  ASSERT_EQ(config->dataplane.ports.size(), 2u);
  const PortConfig& uplink = config->dataplane.ports[0];
  EXPECT_EQ(uplink.device, "net_pcap0,rx_pcap=in.pcap,tx_pcap=out.pcap");
  EXPECT_EQ(uplink.ipv4, IpAddress::v4(198, 18, 0, 10));
  EXPECT_EQ(uplink.ipv6->toString(), "2001:db8::10");
  EXPECT_EQ(uplink.gateway, IpAddress::v4(198, 18, 0, 254));
  EXPECT_FALSE(uplink.gateway_mac.has_value());
  EXPECT_EQ(uplink.mtu, 9000);
  EXPECT_EQ(uplink.queues, 4);
  const PortConfig& second = config->dataplane.ports[1];
  EXPECT_EQ(second.gateway_mac->toString(), "02:00:00:00:00:fe");
  EXPECT_FALSE(second.ipv6.has_value());
  EXPECT_EQ(second.mtu, 1500);
  EXPECT_EQ(second.queues, 0) << "unset: one per worker with RSS, decided when the port opens";

  const ServiceConfig& web = config->services[0];
  EXPECT_EQ(web.forwarding, Forwarding::kGue);
  EXPECT_EQ(web.gue_port, 6080);
  EXPECT_TRUE(web.announce_arp);
  const ServiceConfig& dsr = config->services[1];
  EXPECT_EQ(dsr.forwarding, Forwarding::kL2Dsr);
  EXPECT_FALSE(dsr.announce_arp);
  EXPECT_EQ(dsr.backends[0].mac->toString(), "02:00:00:00:01:02");
  EXPECT_FALSE(dsr.backends[1].mac.has_value());
}

TEST(ConfigLoaderTest, HealthChecksViaAPortLeaveThroughItsExceptionInterface) {
  absl::StatusOr<Config> config = parseConfig(R"(
dataplane:
  ports:
    - { name: p0, device: net_null0, ipv4: 198.18.0.10, exception: { name: berth0 } }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: { type: tcp, via: p0 }
    backends:
      - { name: a, address: 198.18.1.2 }
      - { name: b, address: 198.18.2.2, health: { port: 8080 } }
  - name: dns
    vip: 198.18.100.2
    port: 53
    protocol: udp
    health: { type: tcp }
    backends: [ { name: c, address: 198.18.3.2 } ]
)",
                                              "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->services[0].backends[0].health.interface, "berth0");
  EXPECT_EQ(config->services[0].backends[1].health.interface, "berth0") << "inherited";
  EXPECT_EQ(config->services[1].backends[0].health.interface, "") << "the host's routes decide";
  for (const auto& [yaml, error] : std::vector<std::pair<std::string, std::string>>{
           {"health: { type: tcp, via: p9 }", "no port named 'p9'"},
           {"health: { type: tcp, via: p1 }", "port 'p1' has no exception interface"}}) {
    const absl::StatusOr<Config> bad = parseConfig(
        "dataplane:\n  ports:\n"
        "    - { name: p0, device: net_null0, ipv4: 198.18.0.10, exception: { name: b0 } }\n"
        "    - { name: p1, device: net_null1, ipv4: 198.18.0.11 }\n"
        "services:\n  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, " +
            yaml + ", backends: [] }\n",
        "test.yaml");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr("services[0].health.via"));
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(error));
  }
}

TEST(ConfigLoaderTest, HealthSettingsResolvePerBackend) {
  absl::StatusOr<Config> config = parseConfig(R"(
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    health: { type: http, interval: 0.5, timeout: 0.25, rise: 3, path: /healthz, expect: 200-299 }
    backends:
      - { name: a, address: 198.18.1.2 }
      - { name: b, address: 198.18.2.2, health: { port: 8080, fall: 5, address: 198.18.9.2 } }
  - name: dns
    vip: 198.18.100.2
    port: 53
    protocol: udp
    backends: [ { name: c, address: 198.18.3.2 } ]
)",
                                              "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const HealthCheckConfig& a = config->services[0].backends[0].health;
  EXPECT_EQ(a.type, HealthCheckType::kHttp);
  EXPECT_EQ((std::pair{a.interval_ms, a.timeout_ms}), (std::pair{500u, 250u}));
  EXPECT_EQ((std::pair{a.rise, a.fall}), (std::pair{3u, 3u}));
  EXPECT_EQ(a.http_path, "/healthz");
  EXPECT_EQ((std::pair{a.expect_low, a.expect_high}), (std::pair<uint16_t, uint16_t>{200, 299}));
  EXPECT_EQ(a.address, IpAddress::v4(198, 18, 1, 2)) << "the backend's address by default";
  EXPECT_EQ(a.port, 80) << "the service's port by default";
  const HealthCheckConfig& b = config->services[0].backends[1].health;
  EXPECT_EQ(b.type, HealthCheckType::kHttp) << "overrides change only what they name";
  EXPECT_EQ((std::pair{b.rise, b.fall}), (std::pair{3u, 5u}));
  EXPECT_EQ(b.address, IpAddress::v4(198, 18, 9, 2));
  EXPECT_EQ(b.port, 8080);
  const HealthCheckConfig& c = config->services[1].backends[0].health;
  EXPECT_EQ(c.type, HealthCheckType::kNone) << "no health key: always healthy";
  EXPECT_EQ((std::pair{c.interval_ms, c.timeout_ms}), (std::pair{2000u, 1000u}));
}

TEST(ConfigLoaderTest, RssKeyIsRandomUnlessTheConfigSaysOtherwise) {
  const auto port = [](absl::string_view rss_key) {
    absl::StatusOr<Config> config =
        parseConfig(absl::StrCat("dataplane:\n  ports:\n    - { name: p0, device: net_null0, ipv4: "
                                 "198.18.0.10",
                                 rss_key, " }\nservices: []\n"),
                    "test.yaml");
    EXPECT_TRUE(config.ok()) << config.status();
    return config->dataplane.ports.at(0);
  };
  EXPECT_EQ(port("").rss_key, RssKeyKind::kRandom);
  EXPECT_EQ(port(", rss_key: random").rss_key, RssKeyKind::kRandom);
  EXPECT_EQ(port(", rss_key: symmetric").rss_key, RssKeyKind::kSymmetric);
  const std::string hex(80, 'a');
  const PortConfig fixed = port(absl::StrCat(", rss_key: \"", hex, "\""));
  EXPECT_EQ(fixed.rss_key, RssKeyKind::kFixed);
  EXPECT_EQ(fixed.rss_key_bytes, std::vector<uint8_t>(40, 0xaa));
}

// auto: the smallest prime of at least max(65537, 100 a backend), reported as a note.
TEST(ConfigLoaderTest, AutoTableSizeGivesEveryBackendAHundredSlots) {
  auto serviceWith = [](int backends) {
    std::string yaml =
        "services:\n  - name: web\n    vip: 198.18.100.1\n    port: 80\n"
        "    protocol: tcp\n    table_size: auto\n    backends:\n";
    for (int i = 0; i < backends; ++i) {
      absl::StrAppend(&yaml, "      - { name: b", i, ", address: 198.18.", 1 + i / 250, ".",
                      1 + i % 250, " }\n");
    }
    return parseConfig(yaml, "auto.yaml");
  };
  absl::StatusOr<Config> few = serviceWith(12);
  ASSERT_TRUE(few.ok()) << few.status();
  EXPECT_TRUE(few->services[0].table_size_auto);
  EXPECT_EQ(few->services[0].table_size, 65537u);
  ASSERT_EQ(few->notes.size(), 1u);
  EXPECT_EQ(few->notes[0],
            "auto.yaml:6: services[0].table_size: auto: M = 65537 for 12 backend(s)");
  EXPECT_TRUE(few->warnings.empty());
  absl::StatusOr<Config> many = serviceWith(1000);
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_EQ(many->services[0].table_size, 100003u) << "the first prime from 100,000";
  EXPECT_TRUE(many->warnings.empty()) << "100 slots a backend: no advice";
}

TEST(ConfigLoaderTest, NeighborSettingsLoadDefaultAndApplyOnReload) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  neighbors: { lock_time: 2.5, refresh_interval: 10, request_timeout: 0.2, "
      "refresh_retries: 5 }\n  ports:\n    - { name: p0, device: net_null0, ipv4: 198.18.0.10, "
      "learn_announcements: true }\nservices: []\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dataplane.neighbors.lock_time_ms, 2500u);
  EXPECT_EQ(config->dataplane.neighbors.refresh_interval_ms, 10'000u);
  EXPECT_EQ(config->dataplane.neighbors.request_timeout_ms, 200u);
  EXPECT_EQ(config->dataplane.neighbors.refresh_retries, 5u);
  EXPECT_TRUE(config->dataplane.ports[0].learn_announcements);
  absl::StatusOr<Config> defaults = parseConfig(kValid, "test.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->dataplane.neighbors, NeighborConfig{});
  EXPECT_EQ(defaults->dataplane.neighbors.lock_time_ms, 1000u);
  EXPECT_EQ(defaults->dataplane.neighbors.refresh_interval_ms, 30'000u);
  EXPECT_EQ(defaults->dataplane.neighbors.request_timeout_ms, 1000u);
  EXPECT_EQ(defaults->dataplane.neighbors.refresh_retries, 3u);
  EXPECT_FALSE(PortConfig{}.learn_announcements);
  Config reloaded = *defaults;
  reloaded.dataplane.neighbors.refresh_interval_ms = 5000;
  EXPECT_TRUE(sectionsNeedingRestart(*defaults, reloaded).empty());
}

TEST(ConfigLoaderTest, IcmpLimitsLoadAndDefault) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  icmp: { too_big_per_second: 10, too_big_burst: 3 }\nservices: []\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dataplane.icmp.too_big_per_second, 10u);
  EXPECT_EQ(config->dataplane.icmp.too_big_burst, 3u);
  absl::StatusOr<Config> defaults = parseConfig(kValid, "test.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->dataplane.icmp.too_big_per_second, 1000u);
  EXPECT_EQ(defaults->dataplane.icmp.too_big_burst, 100u);
  // Applied by a reload, not at start only.
  absl::StatusOr<Config> without = parseConfig("services: []\n", "test.yaml");
  ASSERT_TRUE(without.ok());
  EXPECT_TRUE(sectionsNeedingRestart(*without, *config).empty());
}

TEST(ConfigLoaderTest, ExceptionInterfacesLoadWithTheirDefaults) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  ports:\n"
      "    - { name: p0, device: net_null0, ipv4: 198.18.0.10, exception: { name: berth0 } }\n"
      "    - name: p1\n      device: net_null1\n      ipv6: 2001:db8::10\n"
      "      exception:\n        kind: virtio-user\n        name: berth1\n"
      "        ipv6_prefix_length: 120\n        per_second: { bgp: 50, other: 200 }\n"
      "    - { name: p2, device: net_null2, ipv4: 198.18.0.12 }\n"
      "services: []\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<PortConfig>& ports = config->dataplane.ports;
  ASSERT_EQ(ports.size(), 3u);
  ASSERT_TRUE(ports[0].exception.has_value());
  EXPECT_EQ(ports[0].exception->kind, ExceptionKind::kTap);
  EXPECT_EQ(ports[0].exception->name, "berth0");
  EXPECT_EQ(ports[0].exception->ipv4_prefix_length, 24);
  EXPECT_EQ(ports[0].exception->ipv6_prefix_length, 64);
  EXPECT_EQ(ports[0].exception->per_second, ExceptionConfig{}.per_second);
  ASSERT_TRUE(ports[1].exception.has_value());
  EXPECT_EQ(ports[1].exception->kind, ExceptionKind::kVirtioUser);
  EXPECT_EQ(ports[1].exception->ipv6_prefix_length, 120);
  const std::array<uint32_t, kExceptionClassCount> rates = {50, 1'000, 5'000, 20'000, 1'000, 200};
  EXPECT_EQ(ports[1].exception->per_second, rates);
  EXPECT_FALSE(ports[2].exception.has_value()) << "none unless configured";
  EXPECT_EQ(toString(ExceptionClass::kNeighbor), "arp_nd");
}

TEST(ConfigLoaderTest, VlanPortsShareADeviceEachWithItsOwnAddressesAndInterface) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  ports:\n"
      "    - { name: trunk, device: net_null0, ipv4: 198.18.0.10, mtu: 9000, queues: 2 }\n"
      "    - { name: v10, device: net_null0, vlan: 10, ipv4: 198.18.10.10, queues: 2,\n"
      "        gateway_mac: \"02:00:00:00:10:fe\", exception: { name: berth10 } }\n"
      "    - { name: v20, device: net_null0, vlan: 20, ipv4: 198.18.20.10, queues: 2 }\n"
      "    - { name: other, device: net_null1, vlan: 10, ipv4: 198.19.10.10 }\n"
      "services: []\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const std::vector<PortConfig>& ports = config->dataplane.ports;
  ASSERT_EQ(ports.size(), 4u);
  EXPECT_EQ(ports[0].vlan, 0) << "untagged unless configured";
  EXPECT_EQ(ports[1].vlan, 10);
  EXPECT_EQ(ports[2].vlan, 20);
  EXPECT_EQ(ports[3].vlan, 10) << "a VLAN ID is per device";
  EXPECT_EQ(ports[1].mtu, 1500) << "each port keeps its own MTU";
  ASSERT_TRUE(ports[1].exception.has_value());
  EXPECT_EQ(ports[1].exception->name, "berth10");
}

TEST(ConfigLoaderTest, DescriptorsAndStrictNumaLoadAndDefault) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  strict_numa: true\n  ports:\n"
      "    - { name: p0, device: net_null0, ipv4: 198.18.0.10, rx_descriptors: 4096,\n"
      "        tx_descriptors: 2048, mbufs: 9000, checksum_offload: false }\n"
      "    - { name: p1, device: net_null1, ipv4: 198.18.1.10 }\n"
      "services: []\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->dataplane.strict_numa);
  EXPECT_EQ(config->dataplane.ports[0].rx_descriptors, 4096);
  EXPECT_EQ(config->dataplane.ports[0].tx_descriptors, 2048);
  EXPECT_EQ(config->dataplane.ports[0].mbufs, 9000u);
  EXPECT_FALSE(config->dataplane.ports[0].checksum_offload);
  EXPECT_EQ(config->dataplane.ports[1].rx_descriptors, 1024) << "the default";
  EXPECT_EQ(config->dataplane.ports[1].tx_descriptors, 1024);
  EXPECT_EQ(config->dataplane.ports[1].mbufs, 0u) << "sized from the descriptors";
  EXPECT_TRUE(config->dataplane.ports[1].checksum_offload) << "where the NIC offers it";
  absl::StatusOr<Config> lenient =
      parseConfig("dataplane:\n  ports: []\nservices: []\n", "test.yaml");
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_FALSE(lenient->dataplane.strict_numa) << "a warning unless asked";
}

TEST(ConfigLoaderTest, IdleWorkersAreOffUnlessAskedForAndNeedARestart) {
  absl::StatusOr<Config> busy = parseConfig("dataplane:\n  ports: []\nservices: []\n", "t.yaml");
  ASSERT_TRUE(busy.ok()) << busy.status();
  EXPECT_FALSE(busy->dataplane.idle) << "busy-polling unless asked";
  absl::StatusOr<Config> defaults = parseConfig("dataplane:\n  idle:\nservices: []\n", "t.yaml");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  ASSERT_TRUE(defaults->dataplane.idle);
  EXPECT_EQ(defaults->dataplane.idle->after_empty_polls, 1000u);
  EXPECT_EQ(defaults->dataplane.idle->max_sleep_us, 100u);
  absl::StatusOr<Config> set = parseConfig(
      "dataplane:\n  idle: { after_empty_polls: 50, max_sleep_us: 500 }\nservices: []\n", "t.yaml");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->dataplane.idle->after_empty_polls, 50u);
  EXPECT_EQ(set->dataplane.idle->max_sleep_us, 500u);
  EXPECT_THAT(sectionsNeedingRestart(*busy, *set), testing::ElementsAre("dataplane.idle"));
  EXPECT_THAT(sectionsNeedingRestart(*defaults, *set), testing::ElementsAre("dataplane.idle"));
  EXPECT_THAT(sectionsNeedingRestart(*set, *set), testing::IsEmpty());
}

TEST(ConfigLoaderTest, TwoArmPortsAndServicesNameTheirEgress) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  ports:\n"
      "    - { name: uplink, device: net_null0, ipv4: 198.18.0.10, egress: downlink }\n"
      "    - { name: downlink, device: net_null1, ipv4: 198.18.1.10 }\n"
      "services:\n"
      "  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp,\n"
      "      backends: [ { name: a, address: 198.18.1.2 } ] }\n"
      "  - { name: pinned, vip: 198.18.100.1, port: 81, protocol: tcp, egress: uplink,\n"
      "      backends: [ { name: a, address: 198.18.1.2 } ] }\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->dataplane.ports[0].egress, "downlink") << "a port further down the list";
  EXPECT_EQ(config->dataplane.ports[1].egress, "") << "its own unless configured";
  EXPECT_EQ(config->services[0].egress, "");
  EXPECT_EQ(config->services[1].egress, "uplink");
}

TEST(ConfigLoaderTest, FullNatLocalAddressesAndPortsLoadAndDefault) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  conntrack: { nat_sessions_per_core: 1000000 }\n  ports:\n"
      "    - { name: uplink, device: net_null0, ipv4: 198.18.0.10, gateway: 198.18.0.1,\n"
      "        egress: downlink }\n"
      "    - { name: downlink, device: net_null1, ipv4: 198.18.1.10, ipv6: \"2001:db8:1::10\",\n"
      "        snat_addresses: [198.18.1.20, \"2001:db8:1::20\", 198.18.1.21],\n"
      "        snat_ports: 10000-20000 }\n"
      "services:\n"
      "  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,\n"
      "      backends: [ { name: a, address: 198.18.1.2, mac: \"02:00:00:00:01:02\" } ] }\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const PortConfig& downlink = config->dataplane.ports[1];
  EXPECT_EQ(downlink.snat_addresses.size(), 3u);
  EXPECT_THAT(downlink.snatAddressesOf(IpFamily::kIpv4),
              ::testing::ElementsAre(IpAddress::v4(198, 18, 1, 20), IpAddress::v4(198, 18, 1, 21)));
  EXPECT_EQ(downlink.snat_first_port, 10000);
  EXPECT_EQ(downlink.snat_last_port, 20000);
  EXPECT_EQ(config->dataplane.conntrack.nat_sessions_per_core, 1000000u);
  EXPECT_EQ(config->services[0].forwarding, Forwarding::kFullNat);

  absl::StatusOr<Config> defaults = parseConfig(kValid, "test.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->dataplane.conntrack.nat_sessions_per_core, 1u << 18);
  const PortConfig port;
  EXPECT_EQ(port.snat_first_port, 1024);
  EXPECT_EQ(port.snat_last_port, 65535);
}

// NAT64: a fullnat service with an IPv6 VIP may have IPv4 backends (and IPv6 ones beside them),
// which take the port's IPv4 local addresses, for their probes too.
TEST(ConfigLoaderTest, AFullNatServiceWithAnIpv6VipMayHaveIpv4Backends) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  ports:\n"
      "    - { name: p0, device: net_null0, ipv4: 198.18.0.10, ipv6: \"2001:db8::10\",\n"
      "        gateway_mac: \"02:00:00:00:00:fe\", exception: { name: p0k },\n"
      "        snat_addresses: [198.18.0.20, \"2001:db8::20\"] }\n"
      "services:\n"
      "  - { name: web6, vip: \"2001:db8:100::1\", port: 80, protocol: tcp,\n"
      "      forwarding: fullnat, proxy_protocol: v2, health: { type: tcp },\n"
      "      backends: [ { name: a, address: 198.18.1.2 },\n"
      "                  { name: b, address: \"2001:db8:1::3\" } ] }\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const ServiceConfig& service = config->services[0];
  EXPECT_TRUE(service.backends[0].address.isV4());
  EXPECT_EQ(service.backends[0].health.source, IpAddress::v4(198, 18, 0, 20));
  EXPECT_EQ(service.backends[1].health.source->toString(), "2001:db8::20");
}

// A fullnat service's probes come from the local address of their port, on the ports below its
// pool, and leave through its kernel interface unless `via` names another port with local
// addresses; without a kernel interface the loader warns that they cannot.
TEST(ConfigLoaderTest, FullNatHealthProbesComeFromALocalAddressBelowThePool) {
  const std::string ports =
      "dataplane:\n  ports:\n"
      "    - { name: uplink, device: net_null0, ipv4: 198.18.0.10, gateway: 198.18.0.1,\n"
      "        egress: downlink, exception: { name: up0 } }\n"
      "    - { name: downlink, device: net_null1, ipv4: 198.18.1.10, ipv6: \"2001:db8:1::10\",\n"
      "        snat_addresses: [198.18.1.20, \"2001:db8:1::20\", 198.18.1.21],\n"
      "        snat_ports: 10000-20000, exception: { name: down0 } }\n";
  absl::StatusOr<Config> config = parseConfig(
      ports +
          "services:\n"
          "  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, forwarding: fullnat,\n"
          "      health: { type: http },\n"
          "      backends: [ { name: a, address: 198.18.1.2 },\n"
          "                  { name: b, address: 198.18.1.3, health: { type: none } } ] }\n"
          "  - { name: web6, vip: \"2001:db8:100::1\", port: 80, protocol: tcp,\n"
          "      forwarding: fullnat, health: { type: http, via: downlink },\n"
          "      proxy_protocol: v2, backends: [ { name: c, address: \"2001:db8:1::2\" } ] }\n"
          "  - { name: dsr, vip: 198.18.100.2, port: 80, protocol: tcp, health: { type: tcp },\n"
          "      backends: [ { name: d, address: 198.18.1.4 } ] }\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const HealthCheckConfig& a = config->services[0].backends[0].health;
  EXPECT_EQ(a.interface, "down0") << "the port with the local addresses, by default";
  EXPECT_EQ(a.source, IpAddress::v4(198, 18, 1, 20)) << "its first of the backend's version";
  EXPECT_EQ(a.source_first_port, 10000 - 64);
  EXPECT_EQ(a.source_ports, 64);
  EXPECT_FALSE(config->services[0].backends[1].health.source.has_value()) << "not checked";
  const HealthCheckConfig& c = config->services[1].backends[0].health;
  EXPECT_EQ(c.interface, "down0");
  ASSERT_TRUE(c.source.has_value());
  EXPECT_EQ(c.source->toString(), "2001:db8:1::20");
  // A service that sends the PROXY protocol has its HTTP probes send a header of their own.
  EXPECT_TRUE(config->services[1].proxy_protocol);
  EXPECT_TRUE(c.proxy_header);
  EXPECT_FALSE(config->services[0].proxy_protocol);
  EXPECT_FALSE(a.proxy_header);
  const HealthCheckConfig& d = config->services[2].backends[0].health;
  EXPECT_FALSE(d.source.has_value()) << "only fullnat services' probes";
  EXPECT_EQ(d.interface, "");
  EXPECT_TRUE(config->warnings.empty());

  // via a port with no local address of the backend's version, or a pool that leaves no room
  // below it: refused, naming the field.
  for (const auto& [yaml, where, error] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"health: { type: tcp, via: uplink }", "services[0].health.via",
            "needs snat_addresses of IPv4"},
           {"health: { type: tcp }, backends: [ { name: a, address: 198.18.1.2, "
            "health: { via: uplink } } ] }\n",
            "services[0].backends[0].health.via", "needs snat_addresses of IPv4"}}) {
    const std::string text =
        ports + "services:\n  - { name: web, vip: 198.18.100.1, port: 80, protocol: tcp, " +
        "forwarding: fullnat, " + yaml +
        (yaml.find("backends") == std::string::npos
             ? ", backends: [ { name: a, address: 198.18.1.2 } ] }\n"
             : "");
    const absl::StatusOr<Config> bad = parseConfig(text, "test.yaml");
    ASSERT_FALSE(bad.ok()) << yaml;
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(where));
    EXPECT_THAT(std::string(bad.status().message()), HasSubstr(error));
  }
  // A TCP-checked fullnat service of `backends`, behind the ports with `from` made `to`.
  auto tcpChecked = [&ports](const std::string& from, const std::string& to,
                             const std::string& backends) {
    std::string text = ports;
    text.replace(text.find(from), from.size(), to);
    return parseConfig(absl::StrCat(text,
                                    "services:\n  - { name: web, vip: 198.18.100.1, port: 80, "
                                    "protocol: tcp, forwarding: fullnat, health: { type: tcp },\n"
                                    "      backends: [ ",
                                    backends, " ] }\n"),
                       "test.yaml");
  };
  const absl::StatusOr<Config> no_room =
      tcpChecked("10000-20000", "64-20000", "{ name: a, address: 198.18.1.2 }");
  ASSERT_FALSE(no_room.ok());
  EXPECT_THAT(std::string(no_room.status().message()),
              HasSubstr("take the 64 ports just below port 'downlink''s snat_ports, which start "
                        "at 64: start them above 64"));

  // No kernel interface on the port with the local addresses: the probes leave from the host,
  // and the loader says what that cannot prove.
  const absl::StatusOr<Config> warned =
      tcpChecked(", exception: { name: down0 }", "",
                 "{ name: a, address: 198.18.1.2 }, { name: b, address: 198.18.1.3 }");
  ASSERT_TRUE(warned.ok()) << warned.status();
  ASSERT_EQ(warned->warnings.size(), 1u) << "once per service";
  EXPECT_THAT(warned->warnings[0],
              HasSubstr("test.yaml:9: services[0]: service 'web' is fullnat, but port "
                        "'downlink' has no exception interface"));
  EXPECT_FALSE(warned->services[0].backends[0].health.source.has_value());
}

TEST(ConfigLoaderTest, PeerRssLoadsWithARoundRobinTableByDefault) {
  const std::string key(80, 'a');
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  ports:\n"
      "    - { name: p0, device: net_null0, ipv4: 198.18.0.10, queues: 3,\n"
      "        peer_rss: { key: symmetric } }\n"
      "    - { name: p1, device: net_null1, ipv4: 198.18.1.10, queues: 2,\n"
      "        peer_rss: { key: \"" +
          key + "\", table: [1, 1, 0, 1] } }\nservices: []\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const PeerRssConfig& symmetric = config->dataplane.ports[0].peer_rss;
  ASSERT_EQ(symmetric.key.size(), 40u);
  EXPECT_EQ(symmetric.key[0], 0x6d);
  EXPECT_EQ(symmetric.key[39], 0x5a);
  ASSERT_EQ(symmetric.table.size(), 128u) << "as a NIC fills its table: round robin";
  EXPECT_EQ(symmetric.table[0], 0);
  EXPECT_EQ(symmetric.table[4], 1);
  EXPECT_EQ(symmetric.table[127], 1);
  const PeerRssConfig& fixed = config->dataplane.ports[1].peer_rss;
  EXPECT_EQ(fixed.key, std::vector<uint8_t>(40, 0xaa));
  EXPECT_THAT(fixed.table, ::testing::ElementsAre(1, 1, 0, 1));
  EXPECT_TRUE(PortConfig().peer_rss.key.empty()) << "not declared unless given";
}

TEST(ConfigLoaderTest, ConntrackSettingsLoadAndDefault) {
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  conntrack:\n    entries_per_core: 8388608\n    max_inserts_per_sec: 50000\n"
      "    timeouts: { tcp_established: 900, udp: 60 }\nservices: []\n",
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  const ConntrackConfig& conntrack = config->dataplane.conntrack;
  EXPECT_EQ(conntrack.entries_per_core, 8388608u);
  EXPECT_EQ(conntrack.max_inserts_per_sec, 50000u);
  EXPECT_EQ(conntrack.tcp_established_s, 900u);
  EXPECT_EQ(conntrack.udp_s, 60u);
  EXPECT_EQ(conntrack.tcp_opening_s, 5u) << "unset timeouts keep their defaults";
  EXPECT_EQ(conntrack.tcp_closing_s, 10u);

  absl::StatusOr<Config> defaults = parseConfig(kValid, "test.yaml");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->dataplane.conntrack.entries_per_core, 1u << 20);
  EXPECT_EQ(defaults->dataplane.conntrack.max_inserts_per_sec, 0u);
  EXPECT_EQ(defaults->dataplane.conntrack.tcp_established_s, 300u);
}

TEST(ConfigLoaderTest, MetricsAreOffUnlessConfiguredAndLoopbackByDefault) {
  EXPECT_FALSE(parseConfig(kValid, "test.yaml")->metrics.listen.has_value());
  absl::StatusOr<Config> defaults = parseConfig("services: []\nmetrics:\n", "test.yaml");
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->metrics.listen->toString(), "127.0.0.1:9464");
  EXPECT_TRUE(defaults->warnings.empty());
  absl::StatusOr<Config> wide =
      parseConfig("services: []\nmetrics: { listen: \"[::]:9100\" }\n", "test.yaml");
  ASSERT_TRUE(wide.ok()) << wide.status();
  EXPECT_EQ(wide->metrics.listen->port, 9100);
  ASSERT_EQ(wide->warnings.size(), 1u);
  EXPECT_THAT(wide->warnings[0], HasSubstr("test.yaml:2: metrics.listen: serves metrics beyond"));
}

TEST(ConfigLoaderTest, BgpSettingsLoadAndServicesChooseToBeAnnounced) {
  absl::StatusOr<Config> config =
      parseConfig(PORT_HEAD
                  "      ipv4: 198.18.0.11\n"
                  "bgp:\n  asn: 64601\n  router_id: 198.18.0.21\n  port: p0\n"
                  "  neighbors:\n    - { address: 198.18.0.1, asn: 64600 }\n" SERVICE_HEAD
                  "    announce: bgp\n" ONE_BACKEND,
                  "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->bgp.has_value());
  EXPECT_EQ(config->bgp->asn, 64601u);
  EXPECT_EQ(config->bgp->router_id, IpAddress::v4(198, 18, 0, 21));
  EXPECT_EQ(config->bgp->hold_time_s, 9u);
  EXPECT_EQ(config->bgp->forward_after_withdrawal_ms, 2000u);
  ASSERT_EQ(config->bgp->neighbors.size(), 1u);
  EXPECT_EQ(config->bgp->neighbors[0].asn, 64600u);
  EXPECT_EQ(config->bgp->neighbors[0].line.number, 11);
  EXPECT_TRUE(config->services[0].announce_bgp);
  EXPECT_FALSE(config->services[0].announce_arp);
  EXPECT_EQ(config->bgp->nextHopFor(IpFamily::kIpv4, config->dataplane),
            IpAddress::v4(198, 18, 0, 11));
  EXPECT_EQ(config->bgp->nextHopFor(IpFamily::kIpv6, config->dataplane), std::nullopt);
}

// The config remembers the CRC32-C of the text it came from, which `status` reports: after a
// refused reload that is the running config's, not the file's on disk.
TEST(ConfigLoaderTest, RemembersTheCrcOfItsText) {
  const std::string text = "services: []\n";
  absl::StatusOr<Config> config = parseConfig(text, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->source_crc32c, crc32cPortable(0, text.data(), text.size()));
  absl::StatusOr<Config> other = parseConfig("services: []\n# a comment\n", "test.yaml");
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_NE(other->source_crc32c, config->source_crc32c);
}

// How long a stop forwards after the withdrawal is in seconds, decimals allowed; 0 stops as soon
// as berth-announcer reports the routes gone.
TEST(ConfigLoaderTest, BgpForwardingAfterWithdrawalIsSeconds) {
  for (const auto& [text, ms] : {std::pair{"0.5", 500u}, std::pair{"0", 0u}}) {
    absl::StatusOr<Config> config = parseConfig(
        absl::StrCat(PORT_HEAD "      ipv4: 198.18.0.11\n"
                               "bgp:\n  asn: 64601\n  router_id: 198.18.0.21\n  port: p0\n"
                               "  forward_after_withdrawal: ",
                     text, "\n  neighbors:\n    - { address: 198.18.0.1, asn: 64600 }\n",
                     "services: []\n"),
        "test.yaml");
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->bgp->forward_after_withdrawal_ms, ms) << text;
  }
}

TEST(ConfigLoaderTest, AlgorithmAndReplicasLoadAndDefaultToMaglev) {
  absl::StatusOr<Config> config = parseConfig(
      SERVICE_HEAD
      "    algorithm: ring\n    replicas: 40\n" ONE_BACKEND
      "  - name: dns\n    vip: 198.18.100.1\n    port: 53\n    protocol: udp\n"
      "    algorithm: rendezvous\n    bounded_load: 1.25\n" ONE_BACKEND
      "  - name: ssh\n    vip: 198.18.100.1\n    port: 22\n    protocol: tcp\n"
      "    algorithm: ring\n" ONE_BACKEND
      "  - name: smtp\n    vip: 198.18.100.1\n    port: 25\n    protocol: tcp\n" ONE_BACKEND,
      "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->services[0].algorithm, Algorithm::kRing);
  EXPECT_EQ(config->services[0].ring_replicas, 40u);
  EXPECT_EQ(config->services[0].tableOptions().ring_replicas, 40u);
  EXPECT_EQ(config->services[1].algorithm, Algorithm::kRendezvous);
  EXPECT_EQ(config->services[1].bounded_load, 1.25);
  EXPECT_EQ(config->services[2].ring_replicas, kDefaultRingReplicas);
  EXPECT_EQ(config->services[3].algorithm, Algorithm::kMaglev);
  EXPECT_EQ(config->services[3].bounded_load, 0) << "off unless set";
  for (const ServiceConfig& service : config->services) {
    const absl::StatusOr<Table> table =
        buildTable(service.hashingBackends(), service.tableOptions());
    ASSERT_TRUE(table.ok()) << service.name;
    EXPECT_EQ(table->algorithm(), service.algorithm) << service.name;
  }
}

TEST(ConfigLoaderTest, ServicesDefaultToIpipWithoutAnnouncing) {
  absl::StatusOr<Config> config = parseConfig(kValid, "test.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->services[0].forwarding, Forwarding::kIpip);
  EXPECT_FALSE(config->services[0].announce_arp);
  EXPECT_TRUE(config->services[0].drain_keeps_established);
  EXPECT_TRUE(config->dataplane.ports.empty());
  EXPECT_TRUE(config->dataplane.eal.empty());
}

// The same VIP and port may serve TCP and UDP as two services.
TEST(ConfigLoaderTest, SameVipAndPortWithDifferentProtocolsIsAllowed) {
  absl::StatusOr<Config> config = parseConfig(SERVICE_HEAD ONE_BACKEND
                                              "  - name: web-udp\n    vip: 198.18.100.1\n    port: "
                                              "80\n    protocol: udp\n    backends: []\n",
                                              "ok.yaml");
  EXPECT_TRUE(config.ok()) << config.status();
}

// One pass reports every error, each with its line, in the file's order: fields of a port, of
// a service and of its backends, and the sections, each read on after an error.
TEST(ConfigErrorsTest, EveryErrorIsReportedInOnePass) {
  constexpr char kYaml[] = R"(dataplane:
  eal: ["--in-memroy", "--no-pci"]
  ports:
    - { name: wan, device: eth0, ipv4: 198.18.0.10, mtu: 10, gateway_mac: "02:00:00:00:00:fe" }
metrics: { listen: nowhere }
services:
  - name: web
    vip: 198.18.100.1
    port: 80
    protocol: tcpx
    backends:
      - { name: a, address: 198.18.1.2, weight: -1 }
      - { name: b, address: 198.18.1.3, weigth: 0 }
  - name: other
    vip: 198.18.100.
    port: 80
    protocol: tcp
    backends: []
)";
  absl::StatusOr<Config> config = parseConfig(kYaml, "bad.yaml");
  ASSERT_FALSE(config.ok());
  const std::vector<std::string> lines = absl::StrSplit(config.status().message(), '\n');
  ASSERT_EQ(lines.size(), 8u) << config.status().message();
  EXPECT_THAT(lines[0], HasSubstr("bad.yaml:2:8: dataplane.eal: '--in-memroy' is not an EAL "
                                  "option; did you mean '--in-memory'?"));
  EXPECT_THAT(lines[1], HasSubstr("bad.yaml:4:28: dataplane.ports[0].device: 'eth0' is neither a "
                                  "PCI address"));
  EXPECT_THAT(lines[2], HasSubstr("dataplane.ports[0].mtu: must be an integer from 68"));
  EXPECT_THAT(lines[3], HasSubstr("bad.yaml:5:"));
  EXPECT_THAT(lines[3], HasSubstr("metrics"));
  EXPECT_THAT(lines[4], HasSubstr("bad.yaml:10:15: services[0].protocol: must be tcp or udp"));
  EXPECT_THAT(lines[5], HasSubstr("services[0].backends[0].weight: must be an integer"));
  EXPECT_THAT(lines[6], HasSubstr("services[0].backends[1].weigth: unknown key"));
  EXPECT_THAT(lines[7], HasSubstr("bad.yaml:15:10: services[1].vip:"));
}

TEST(ConfigErrorsTest, ADependentCheckWaitsForTheFieldsItNeeds) {
  // A port whose only address does not parse: one error, not also "needs an address".
  absl::StatusOr<Config> config = parseConfig(
      "dataplane:\n  ports: [ { name: p0, device: net_null0, ipv4: nope } ]\nservices: []\n",
      "port.yaml");
  ASSERT_FALSE(config.ok());
  EXPECT_EQ(std::string(config.status().message()).find('\n'), std::string::npos)
      << config.status().message();
  EXPECT_THAT(config.status().message(), HasSubstr("dataplane.ports[0].ipv4:"));
}

TEST(ConfigErrorsTest, AServiceThatCanServeNothingIsWarnedAbout) {
  absl::StatusOr<Config> config = parseConfig(R"(services:
  - name: drained
    vip: 198.18.100.1
    port: 80
    protocol: tcp
    backends:
      - { name: a, address: 198.18.1.2, weight: 0 }
      - { name: b, address: 198.18.1.3, weight: 0 }
  - name: empty
    vip: 198.18.100.2
    port: 53
    protocol: udp
    backends: []
  - name: serving
    vip: 198.18.100.3
    port: 80
    protocol: tcp
    backends: [ { name: c, address: 198.18.1.4, weight: 0 }, { name: d, address: 198.18.1.5 } ]
)",
                                              "idle.yaml");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_EQ(config->warnings.size(), 2u) << absl::StrJoin(config->warnings, "\n");
  EXPECT_THAT(config->warnings[0],
              HasSubstr("idle.yaml:7: services[0].backends: every backend of service 'drained' "
                        "has weight 0 (drained): no new flow to tcp 198.18.100.1:80 is served"));
  EXPECT_THAT(config->warnings[1],
              HasSubstr("idle.yaml:13: services[1].backends: service 'empty' has no backends: "
                        "every packet to udp 198.18.100.2:53 is dropped"));
}

TEST(ConfigErrorsTest, DeviceStringsAreCheckedAgainstWhatCanOpenThem) {
  auto deviceError = [](const std::string& device, const std::string& eal = "[]") {
    absl::StatusOr<Config> config =
        parseConfig(absl::StrCat("dataplane:\n  eal: ", eal, "\n  ports: [ { name: p0, device: \"",
                                 device, "\", ipv4: 198.18.0.10 } ]\nservices: []\n"),
                    "dev.yaml");
    return config.ok() ? std::string() : std::string(config.status().message());
  };
  EXPECT_EQ(deviceError("0000:3b:00.0"), "");
  EXPECT_EQ(deviceError("3b:00.1,rxq_cqe_comp_en=0"), "");
  EXPECT_EQ(deviceError("net_af_xdp0,iface=eth1"), "");
  EXPECT_EQ(deviceError("net_memif0"), "") << "may come from berthd's command line";
  EXPECT_EQ(deviceError("net_af_packet0", "[\"--vdev\", \"net_af_packet0,iface=eth1\"]"), "");
  EXPECT_THAT(deviceError("eth0"), HasSubstr("'eth0' is neither a PCI address"));
  EXPECT_THAT(deviceError("net_bogus0"), HasSubstr("no driver net_bogus"));
  EXPECT_THAT(deviceError("net_af_xdp0,queue=0"),
              HasSubstr("net_af_xdp needs iface= (for example net_af_xdp0,iface=...)"));
}

}  // namespace
}  // namespace berth
