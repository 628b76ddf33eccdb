#pragma once

#include <cstdint>
#include <string>
#include "absl/strings/string_view.h"
#include "absl/types/span.h"

namespace berth {

// What berth knows of the DPDK 22.11 poll-mode drivers it is tested with, beyond what the
// ethdev API reports: the mbufs a driver takes for itself, whether it counts the frames it
// drops, and what its ring holds when it does not say (docs/nics.md). Pure, so that the port
// set-up (runtime/port.h), the statistics and `berthctl check` share one answer.
struct DriverTraits {
  // Mbufs each RX queue keeps besides its RX ring. net_af_xdp fills its socket's fill ring with
  // 2,048 mbufs at queue set-up (ETH_AF_XDP_DFLT_NUM_DESCS), whatever the descriptor count; a
  // pool sized from 64 or 128 descriptors cannot give them.
  unsigned rx_mbufs_besides_ring = 0;
  // False where the driver never counts frames lost before berth polls them: DPDK 22.11's
  // net_af_packet does not read the socket's PACKET_STATISTICS, so its imissed stays 0 however
  // many frames its kernel ring drops.
  bool reports_drops = true;
  // Where the driver does not report the descriptors in use (rte_eth_rx_queue_info_get), what
  // its ring holds instead; empty where nothing is known.
  absl::string_view ring_note;
};

// The traits of a driver by its name as rte_eth_dev_info gives it ("net_af_xdp"); an unknown
// driver has the defaults.
DriverTraits driverTraits(absl::string_view driver);

// The driver a device string names: "net_af_xdp" for "net_af_xdp0,iface=eth1"; empty for a PCI
// address, whose driver only the bus knows.
std::string vdevDriver(absl::string_view device);

// The argument `key` of a vdev string ("eth1" for "iface" in "net_af_xdp0,iface=eth1"); empty
// where it has none.
std::string vdevArgument(absl::string_view device, absl::string_view key);

// The EAL --vdev among `eal` (the EAL's arguments) that creates the device `device` names, with
// its arguments ("net_af_xdp0,iface=eth1" for "net_af_xdp0"); empty where none does.
std::string ealVdevCreating(absl::Span<const std::string> eal, absl::string_view device);

// Why no DPDK 22.11 bus could open `device` (a port's `device:`), or empty where one may: a
// PCI address ("0000:3b:00.0", devargs after a comma allowed), an auxiliary device
// ("auxiliary:mlx5_core.sf.1"), or a virtual device of a driver DPDK 22.11 has, with the
// arguments its driver cannot start without ("net_af_xdp0,iface=eth1"). A kernel interface's
// name alone ("eth0") is the commonest mistake, and the answer names the drivers that reach it.
// `created_by_eal` is whether an EAL --vdev of the config creates the device, arguments and all.
std::string deviceStringProblem(absl::string_view device, bool created_by_eal);

// Why DPDK could not open the PCI device at `address` ("0000:3b:00.0"), from what the host's
// sysfs says of it: whether it is there at all, and the driver it is bound to (empty: none).
// Empty where its binding is one DPDK takes (vfio-pci, uio_pci_generic, igb_uio), so the cause
// lies elsewhere.
struct PciBinding {
  bool present = false;
  std::string driver;
};
std::string pciBindingAdvice(absl::string_view address, const PciBinding& binding);

// The PCI address in the domain-first form sysfs names devices by: "0000:3b:00.0" for
// "3b:00.0"; the devargs after a comma dropped.
std::string sysfsPciAddress(absl::string_view device);

// What one port's mbuf pool must hold at once, so that the pool never runs dry: each queue's
// RX and TX rings and what the driver keeps besides them, each worker's TX buffer and receive
// burst, the per-lcore caches (workers and the management lcore), the exception path's frames,
// and room for the frames in flight between them.
struct PoolDemand {
  absl::string_view driver;
  uint16_t queues = 0;
  uint16_t rx_descriptors = 0;
  uint16_t tx_descriptors = 0;
  uint16_t workers = 0;
  unsigned cache_per_lcore = 0;
  unsigned exception_frames = 0;
};
unsigned mbufsNeeded(const PoolDemand& demand);

}  // namespace berth
