#include "options.h"

#include <getopt.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/strip.h"
#include "berth/util/did_you_mean.h"
#include "berth/util/status_macros.h"

namespace berth {

const char kGenUsage[] = R"(berthgen [EAL options] -- [options]

A traffic generator and verifying sink for berth, in the style of testpmd: sends flows to VIPs
through one port, receives what berthd sends on through the same port or another, checks every
packet, and reports shares per backend, loss, duplicates, reordering and latency.

  --tx-dev DEVICE        the port to send from: a vdev string or PCI address (required)
  --rx-dev DEVICE        the port to receive on (default: the TX port)
  --dst-mac MAC          berthd's port MAC, the frames' destination (required)
  --vip ADDR:PORT/PROTO  a VIP to send to, tcp or udp; repeat for more (at least one)
  --flows N              flows, spread round-robin over the VIPs (default 1024)
  --src-net CIDR         client addresses (default 198.18.0.0/15, and 2001:db8:1::/64 for IPv6)
  --ipv6                 IPv6 traffic: every --vip must be IPv6
  --pkt-size BYTES|imix  frame size without FCS (default 64, or the least a flow's headers and
                         stamp take: 82 for IPv6 TCP), or the simple IMIX 7:4:1
  --rate PPS             packets per second, 0 for as fast as the port takes them (default 0)
  --duration S           seconds to send (default 10)
  --count N              packets to send, instead of a duration
  --burst N              packets per TX burst (default 32)
  --window N             at most N packets of the flows and the flood in flight per queue pair
                         (sent on a TX queue and not yet back on its RX queue), as TCP's window
                         bounds a client: a sender waits for replies instead of offering more
                         than the return path's ring holds while berthgen's own receiver is
                         off its CPU. Set it to that ring's size for a run that must lose
                         nothing; packets still out after 1 s without a reply are taken as lost
                         and stop counting. Default 0: no bound
  --txq N                TX queues, each with its own sending lcore; flows are spread over them
                         by their RSS hash (Toeplitz, --rss-key and --rss-table), as a NIC's RSS
                         would spread them, and the rate and count are shared in proportion. The port gets as
                         many RX queues, all polled by the receiving lcore. Give N+1 worker
                         lcores (or N, and the first sender also receives). Default 1
  --rss-key KEY          the Toeplitz key --txq spreads flows with: symmetric (0x6d5a repeated)
                         or 40 to 52 bytes in hex, colons optional (default: the standard key,
                         Microsoft's). Give berthd's port the same as peer_rss
  --rss-table Q,Q,...    the redirection table: the queue of each entry, a power of two of them
                         (default: 128 entries round robin over the --txq queues)
  --reflect              answer what berthd sends Full-NAT backends as those backends would:
                         each packet to a backend comes back from it, its payload followed by
                         the backend's address, on the queue the --rss-key and --rss-table put
                         the reply on, as a NIC would; the flows are then counted from berthd's
                         replies to the clients (docs/fullnat.md)
  --malformed-ratio R    this fraction of packets truncated or garbage (default 0)
  --flood PPS            also this many connection attempts a second (a TCP SYN each, from a
                         new random client address and a port below 1024) to the first TCP
                         VIP: a SYN flood, to fill berthd's connection tables while the flows
                         carry on; counted apart from the flows (default 0)
  --pcap-out FILE        write every frame sent to a pcap file
  --config FILE          berth's config: check each flow's backend against its Maglev table
  --gue-port PORT        the outer UDP port that marks gue (default: from --config)
  --drain S              seconds to wait for the last packets after sending (default 0.5)
  --json FILE            write the results as JSON
  --flow-backends FILE   write each flow's backend, one line per flow in flow order ("-" for a
                         flow never seen), to compare runs: which flows moved
  --quiet                no progress line
  --help                 print this help and exit
  --version              print the version and exit
)";

namespace {

enum Option {
  kTxDev = 1,
  kRxDev,
  kDstMac,
  kVip,
  kFlows,
  kSrcNet,
  kIpv6,
  kPktSize,
  kRate,
  kDuration,
  kCount,
  kBurst,
  kWindow,
  kTxq,
  kRssKey,
  kRssTable,
  kReflect,
  kMalformed,
  kFlood,
  kPcapOut,
  kConfig,
  kGuePort,
  kDrain,
  kJson,
  kFlowBackends,
  kQuiet,
  kHelp,
};

const option kLongOptions[] = {
    {"tx-dev", required_argument, nullptr, kTxDev},
    {"rx-dev", required_argument, nullptr, kRxDev},
    {"dst-mac", required_argument, nullptr, kDstMac},
    {"vip", required_argument, nullptr, kVip},
    {"flows", required_argument, nullptr, kFlows},
    {"src-net", required_argument, nullptr, kSrcNet},
    {"ipv6", no_argument, nullptr, kIpv6},
    {"pkt-size", required_argument, nullptr, kPktSize},
    {"rate", required_argument, nullptr, kRate},
    {"duration", required_argument, nullptr, kDuration},
    {"count", required_argument, nullptr, kCount},
    {"burst", required_argument, nullptr, kBurst},
    {"window", required_argument, nullptr, kWindow},
    {"txq", required_argument, nullptr, kTxq},
    {"rss-key", required_argument, nullptr, kRssKey},
    {"rss-table", required_argument, nullptr, kRssTable},
    {"reflect", no_argument, nullptr, kReflect},
    {"malformed-ratio", required_argument, nullptr, kMalformed},
    {"flood", required_argument, nullptr, kFlood},
    {"pcap-out", required_argument, nullptr, kPcapOut},
    {"config", required_argument, nullptr, kConfig},
    {"gue-port", required_argument, nullptr, kGuePort},
    {"drain", required_argument, nullptr, kDrain},
    {"json", required_argument, nullptr, kJson},
    {"flow-backends", required_argument, nullptr, kFlowBackends},
    {"quiet", no_argument, nullptr, kQuiet},
    {"help", no_argument, nullptr, kHelp},
    {nullptr, 0, nullptr, 0},
};

template <typename T>
absl::Status number(const char* option, const char* text, T low, T high, T& out) {
  uint64_t value;
  if (!absl::SimpleAtoi(text, &value) || value < low || value > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", option, " '", text, "': expected a number from ", low, " to ", high));
  }
  out = static_cast<T>(value);
  return absl::OkStatus();
}

absl::Status real(const char* option, const char* text, double low, double high, double& out) {
  double value;
  if (!absl::SimpleAtod(text, &value) || !std::isfinite(value) || value < low || value > high) {
    return absl::InvalidArgumentError(
        absl::StrCat("--", option, " '", text, "': expected a number from ", low, " to ", high));
  }
  out = value;
  return absl::OkStatus();
}

// getopt_long's complaint about `given`: a value missing, or an option unknown, with the
// nearest option berthgen has (berthd's underscore spellings included: --tx_dev finds --tx-dev).
absl::Status optionError(const char* given) {
  if (optopt != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("option '", given, "' needs a value; see berthgen -- --help"));
  }
  absl::string_view name = given;
  while (absl::ConsumePrefix(&name, "-")) {
  }
  name = name.substr(0, name.find('='));
  std::vector<std::string> names;
  for (const option* known = kLongOptions; known->name != nullptr; ++known) {
    names.emplace_back(known->name);
  }
  const std::optional<std::string> nearest =
      nearestName(absl::StrReplaceAll(name, {{"_", "-"}}), names);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown option '", given, "'",
                   nearest ? absl::StrCat("; did you mean --", *nearest, "?")
                           : std::string("; see berthgen -- --help")));
}

// One option of getopt_long's, `code`, with its value in optarg, into `options`.
absl::Status applyOption(int code, char** argv, GenOptions& options, std::string& rss_key,
                         std::string& rss_table) {
  absl::Status status;
  switch (code) {
    case kTxDev:
      options.tx_device = optarg;
      break;
    case kRxDev:
      options.rx_device = optarg;
      break;
    case kDstMac: {
      absl::StatusOr<MacAddress> mac = MacAddress::parse(optarg);
      if (!mac.ok()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--dst-mac '", optarg, "': expected a MAC such as 02:00:00:00:00:01"));
      }
      options.destination_mac = *mac;
      break;
    }
    case kVip: {
      absl::StatusOr<VipTarget> vip = VipTarget::parse(optarg);
      if (!vip.ok()) return vip.status();
      options.vips.push_back(*vip);
      break;
    }
    case kFlows:
      status = number<uint32_t>("flows", optarg, 1, 100'000'000, options.flows);
      break;
    case kSrcNet: {
      absl::StatusOr<SourceNet> net = SourceNet::parse(optarg);
      if (!net.ok()) return net.status();
      (net->base.isV4() ? options.source_v4 : options.source_v6) = *net;
      break;
    }
    case kIpv6:
      options.ipv6 = true;
      break;
    case kPktSize:
      if (std::string(optarg) == "imix") {
        options.imix = true;
      } else {
        status = number<size_t>("pkt-size", optarg, 60, 9000, options.packet_size);
        options.packet_size_given = true;
      }
      break;
    case kRate:
      status = number<uint64_t>("rate", optarg, 0, 1'000'000'000, options.rate);
      break;
    case kDuration:
      status = real("duration", optarg, 0.001, 86400, options.duration_s);
      break;
    case kCount:
      status = number<uint64_t>("count", optarg, 1, uint64_t{1} << 48, options.count);
      break;
    case kBurst:
      status = number<uint16_t>("burst", optarg, 1, 512, options.burst);
      break;
    case kWindow:
      status = number<uint32_t>("window", optarg, 0, 1u << 24, options.window);
      break;
    case kTxq:
      status = number<uint16_t>("txq", optarg, 1, 64, options.tx_queues);
      break;
    case kRssKey:
      rss_key = optarg;
      break;
    case kRssTable:
      rss_table = optarg;
      break;
    case kReflect:
      options.reflect = true;
      break;
    case kMalformed:
      status = real("malformed-ratio", optarg, 0, 1, options.malformed_ratio);
      break;
    case kFlood:
      status = number<uint64_t>("flood", optarg, 0, 1'000'000'000, options.flood);
      break;
    case kPcapOut:
      options.pcap_out = optarg;
      break;
    case kConfig:
      options.config_path = optarg;
      break;
    case kGuePort:
      status = number<uint16_t>("gue-port", optarg, 1, 65535, options.gue_port);
      break;
    case kDrain:
      status = real("drain", optarg, 0, 60, options.drain_s);
      break;
    case kJson:
      options.json_path = optarg;
      break;
    case kFlowBackends:
      options.flow_backends_path = optarg;
      break;
    case kQuiet:
      options.quiet = true;
      break;
    case kHelp:
      return absl::CancelledError(kGenUsage);
    default:
      return optionError(argv[optind - 1]);
  }
  return status;
}

// The options that must be given, and those that do not go together.
absl::Status checkOptions(GenOptions& options) {
  if (options.tx_device.empty()) return absl::InvalidArgumentError("--tx-dev DEVICE is required");
  if (!options.destination_mac) return absl::InvalidArgumentError("--dst-mac MAC is required");
  if (options.vips.empty()) {
    return absl::InvalidArgumentError("give at least one --vip ADDR:PORT/PROTO");
  }
  if (options.ipv6) {
    for (const VipTarget& vip : options.vips) {
      if (vip.address.isV4()) {
        return absl::InvalidArgumentError(
            absl::StrCat("--ipv6, but --vip ", vip.toString(), " is IPv4"));
      }
    }
  }
  if (!options.pcap_out.empty() && options.tx_queues > 1) {
    return absl::InvalidArgumentError(
        "--pcap-out is written by one sending lcore: use it with --txq 1");
  }
  if (options.flood != 0 &&
      std::none_of(options.vips.begin(), options.vips.end(),
                   [](const VipTarget& vip) { return vip.protocol == kProtocolTcp; })) {
    return absl::InvalidArgumentError("--flood sends TCP SYNs: give a tcp --vip");
  }
  if (options.rx_device.empty()) options.rx_device = options.tx_device;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<GenOptions> parseGenOptions(int argc, char** argv) {
  GenOptions options;
  options.source_v4 = *SourceNet::parse("198.18.0.0/15");
  options.source_v6 = *SourceNet::parse("2001:db8:1::/64");
  optind = 1;
  opterr = 0;
  int code;
  std::string rss_key;
  std::string rss_table;
  while ((code = getopt_long(argc, argv, "", kLongOptions, nullptr)) != -1) {
    BERTH_RETURN_IF_ERROR(applyOption(code, argv, options, rss_key, rss_table));
  }
  if (optind < argc) {
    return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", argv[optind], "'"));
  }
  BERTH_RETURN_IF_ERROR(checkOptions(options));
  BERTH_ASSIGN_OR_RETURN(options.spread, QueueSpread::parse(rss_key, rss_table, options.tx_queues));
  return options;
}

}  // namespace berth
