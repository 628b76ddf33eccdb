#pragma once

#include <rte_mbuf.h>
#include <rte_mempool.h>

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/net/mac_address.h"

namespace berth {

// A port's kernel interface (docs/exception-path.md), as the exception path's thread drives it:
// frames in for the kernel, frames out from it. berthd makes it with the port's MAC, MTU and
// addresses, up; destroying it removes the interface from the kernel.
class KernelInterface {
 public:
  virtual ~KernelInterface() = default;
  const std::string& name() const { return name_; }
  int ifindex() const { return ifindex_; }

  // Gives the kernel `count` frames. Every mbuf is consumed; returns how many the kernel took
  // (the others found its queue full).
  virtual uint16_t toKernel(rte_mbuf** frames, uint16_t count) = 0;
  // Up to `max` frames the kernel sent, each in one mbuf of `pool`. Never waits.
  virtual uint16_t fromKernel(rte_mempool* pool, rte_mbuf** frames, uint16_t max) = 0;
  // A descriptor poll(2) finds readable when the kernel has sent a frame, or -1 where there is
  // none to wait on (virtio-user's rings are polled).
  virtual int readableFd() const = 0;

 protected:
  explicit KernelInterface(std::string name) : name_(std::move(name)) {}
  std::string name_;
  int ifindex_ = 0;
};

// The kernel interface `port.exception` asks for, made and set up: the MAC of the port
// (`port_mac`), its MTU, its addresses with the configured prefix lengths, and up. A tap comes
// from /dev/net/tun; virtio-user is a DPDK port over /dev/vhost-net, whose tap the kernel makes.
// Errors name the port, the interface and the step that failed; nothing is left behind.
absl::StatusOr<std::unique_ptr<KernelInterface>> openKernelInterface(const PortConfig& port,
                                                                     const MacAddress& port_mac);

// Sets interface `name` up with `mac`, `mtu` and the port's addresses, through rtnetlink
// (libnl-route). Addresses already there are kept.
absl::Status configureKernelInterface(const std::string& name, const MacAddress& mac, uint16_t mtu,
                                      const PortConfig& port);

}  // namespace berth
