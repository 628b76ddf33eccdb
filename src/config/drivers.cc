#include "berth/config/drivers.h"

#include "absl/algorithm/container.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

#include <algorithm>
#include <vector>

namespace berth {

DriverTraits driverTraits(absl::string_view driver) {
  DriverTraits traits;
  if (driver == "net_af_xdp") traits.rx_mbufs_besides_ring = 2048;
  if (driver == "net_af_packet") {
    traits.reports_drops = false;
    traits.ring_note =
        "its kernel ring holds framecnt frames, 512 unless the device string sets framecnt=, "
        "whatever the descriptors";
  }
  return traits;
}

std::string vdevDriver(absl::string_view device) {
  const absl::string_view name = device.substr(0, device.find(','));
  if (!absl::StartsWith(name, "net_")) return "";
  size_t end = name.size();
  while (end > 0 && absl::ascii_isdigit(static_cast<unsigned char>(name[end - 1]))) --end;
  return std::string(name.substr(0, end));
}

namespace {

// DPDK 22.11's virtual Ethernet drivers, and the argument each cannot start without.
struct VdevDriver {
  absl::string_view name;
  absl::string_view required_argument;  // empty: none
};
constexpr VdevDriver kVdevDrivers[] = {
    {"net_af_packet", "iface"}, {"net_af_xdp", "iface"}, {"net_bonding", "mode"},
    {"net_failsafe", ""},       {"net_kni", ""},         {"net_memif", ""},
    {"net_null", ""},           {"net_pcap", ""},        {"net_ring", ""},
    {"net_softnic", ""},        {"net_tap", ""},         {"net_tun", ""},
    {"net_vdev_netvsc", ""},    {"net_vhost", "iface"},  {"net_virtio_user", "path"},
};

bool isHex(absl::string_view text) {
  return !text.empty() && absl::c_all_of(text, [](char c) { return absl::ascii_isxdigit(c); });
}

// [domain:]bus:device.function, as the PCI bus parses it.
bool isPciAddress(absl::string_view name) {
  std::vector<absl::string_view> parts = absl::StrSplit(name, ':');
  if (parts.size() == 3) {
    if (parts[0].size() > 8 || !isHex(parts[0])) return false;
    parts.erase(parts.begin());
  }
  if (parts.size() != 2 || parts[0].size() > 2 || !isHex(parts[0])) return false;
  const size_t dot = parts[1].find('.');
  return dot != absl::string_view::npos && dot <= 2 && isHex(parts[1].substr(0, dot)) &&
         parts[1].size() == dot + 2 && parts[1][dot + 1] >= '0' && parts[1][dot + 1] <= '7';
}

}  // namespace

std::string vdevArgument(absl::string_view device, absl::string_view key) {
  std::vector<absl::string_view> parts = absl::StrSplit(device, ',');
  for (size_t i = 1; i < parts.size(); ++i) {
    const size_t equals = parts[i].find('=');
    if (equals != absl::string_view::npos && parts[i].substr(0, equals) == key) {
      return std::string(parts[i].substr(equals + 1));
    }
  }
  return "";
}

std::string ealVdevCreating(absl::Span<const std::string> eal, absl::string_view device) {
  const absl::string_view name = device.substr(0, device.find(','));
  for (size_t i = 0; i < eal.size(); ++i) {
    absl::string_view created;
    if (eal[i] == "--vdev" && i + 1 < eal.size()) {
      created = eal[i + 1];
    } else if (absl::StartsWith(eal[i], "--vdev=")) {
      created = absl::string_view(eal[i]).substr(7);
    }
    if (!created.empty() && created.substr(0, created.find(',')) == name) {
      return std::string(created);
    }
  }
  return "";
}

std::string deviceStringProblem(absl::string_view device, bool created_by_eal) {
  const size_t comma = device.find(',');
  const absl::string_view name = device.substr(0, comma);
  if (isPciAddress(name) || absl::StartsWith(name, "auxiliary:")) return "";
  const std::string driver = vdevDriver(name);
  const VdevDriver* known = nullptr;
  for (const VdevDriver& candidate : kVdevDrivers) {
    if (candidate.name == driver) known = &candidate;
  }
  if (known == nullptr) {
    return absl::StrCat(
        "'", device,
        "' is neither a PCI address (0000:3b:00.0) nor a virtual device DPDK 22.11 has (",
        driver.empty() ? "" : absl::StrCat("no driver ", driver, "; "),
        "net_af_xdp0,iface=NAME or net_af_packet0,iface=NAME reach a kernel interface; "
        "docs/nics.md)");
  }
  if (created_by_eal || known->required_argument.empty()) return "";
  const absl::string_view arguments =
      comma == absl::string_view::npos ? absl::string_view() : device.substr(comma + 1);
  // Without arguments the device may come from a --vdev on berthd's command line, which the
  // config cannot see; with some, they are all the driver gets.
  if (arguments.empty()) return "";
  for (absl::string_view argument : absl::StrSplit(arguments, ',')) {
    if (argument.substr(0, argument.find('=')) == known->required_argument) return "";
  }
  return absl::StrCat("'", device, "': ", driver, " needs ", known->required_argument,
                      "= (for example ", name, ",", known->required_argument, "=...)");
}

std::string pciBindingAdvice(absl::string_view address, const PciBinding& binding) {
  if (!binding.present) {
    return absl::StrCat("no PCI device ", address, " on this host (lspci -D lists them)");
  }
  const std::string bind = absl::StrCat("dpdk-devbind.py -b vfio-pci ", address);
  if (binding.driver.empty()) {
    return absl::StrCat(address, " is bound to no driver: ", bind, " (docs/nics.md)");
  }
  if (binding.driver == "vfio-pci" || binding.driver == "uio_pci_generic" ||
      binding.driver == "igb_uio") {
    return "";
  }
  if (binding.driver == "mlx5_core" || binding.driver == "mlx4_core") {
    return absl::StrCat(address, " is on ", binding.driver,
                        ", where it stays: DPDK reaches it through rdma-core (libibverbs, "
                        "libmlx5) and the mlx5 PMD (docs/nics.md section 8)");
  }
  return absl::StrCat(address, " is bound to the kernel's ", binding.driver,
                      " driver, which DPDK cannot share: take its interface down, then ", bind,
                      " (docs/nics.md)");
}

std::string sysfsPciAddress(absl::string_view device) {
  const absl::string_view name = device.substr(0, device.find(','));
  return std::count(name.begin(), name.end(), ':') == 1 ? absl::StrCat("0000:", name)
                                                        : std::string(name);
}

unsigned mbufsNeeded(const PoolDemand& demand) {
  // Per queue: the rings, what the driver keeps besides them, and a worker's TX buffer and
  // receive burst (32 each). Then the caches of every lcore, 1,024 in flight between them, and
  // the exception path's queues.
  constexpr unsigned kBurstsPerQueue = 2 * 32;
  constexpr unsigned kInFlight = 1024;
  const unsigned per_queue = unsigned{demand.rx_descriptors} + demand.tx_descriptors +
                             driverTraits(demand.driver).rx_mbufs_besides_ring + kBurstsPerQueue;
  return demand.queues * per_queue + (demand.workers + 1u) * demand.cache_per_lcore + kInFlight +
         demand.exception_frames;
}

}  // namespace berth
