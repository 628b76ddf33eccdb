#include "berth/runtime/kernel_interface.h"

#include <fcntl.h>
// glibc's net/if.h before the kernel's headers, which then leave out what it declared.
#include <linux/if_tun.h>
#include <net/if.h>
#include <netlink/route/addr.h>
#include <netlink/route/link.h>
#include <rte_dev.h>
#include <rte_errno.h>
#include <rte_ethdev.h>
#include <sys/ioctl.h>
#include <sys/uio.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace berth {
namespace {

absl::Status interfaceError(const PortConfig& port, absl::string_view step, absl::string_view why) {
  return absl::InternalError(absl::StrCat("port '", port.name, "': exception interface '",
                                          port.exception->name, "': ", step, ": ", why));
}

// A tap device: each frame one read(2) or write(2) on its descriptor, which is non-blocking,
// so a kernel that does not keep up costs frames, never the thread's time. Closing the
// descriptor removes the interface (it is not made persistent).
class TapInterface final : public KernelInterface {
 public:
  TapInterface(std::string name, int fd) : KernelInterface(std::move(name)), fd_(fd) {
    ifindex_ = static_cast<int>(if_nametoindex(name_.c_str()));
  }
  ~TapInterface() override { close(fd_); }

  uint16_t toKernel(rte_mbuf** frames, uint16_t count) override {
    uint16_t taken = 0;
    for (uint16_t i = 0; i < count; ++i) {
      const ssize_t written =
          write(fd_, rte_pktmbuf_mtod(frames[i], const void*), rte_pktmbuf_data_len(frames[i]));
      if (written == rte_pktmbuf_data_len(frames[i])) ++taken;
      rte_pktmbuf_free(frames[i]);
    }
    return taken;
  }

  uint16_t fromKernel(rte_mempool* pool, rte_mbuf** frames, uint16_t max) override {
    uint16_t count = 0;
    while (count < max) {
      rte_mbuf* mbuf = rte_pktmbuf_alloc(pool);
      if (mbuf == nullptr) break;
      // One byte past the mbuf's room tells a frame that would not fit (the kernel honours the
      // interface's MTU, which the room covers, so this is a guard, not a path).
      uint8_t overflow;
      iovec parts[2] = {{rte_pktmbuf_mtod(mbuf, void*), rte_pktmbuf_tailroom(mbuf)},
                        {&overflow, 1}};
      const ssize_t got = readv(fd_, parts, 2);
      if (got <= 0 || static_cast<size_t>(got) > parts[0].iov_len) {
        rte_pktmbuf_free(mbuf);
        if (got <= 0) break;
        continue;
      }
      mbuf->data_len = static_cast<uint16_t>(got);
      mbuf->pkt_len = static_cast<uint32_t>(got);
      frames[count++] = mbuf;
    }
    return count;
  }

  int readableFd() const override { return fd_; }

 private:
  const int fd_;
};

absl::StatusOr<std::unique_ptr<KernelInterface>> openTap(const PortConfig& port) {
  const std::string& name = port.exception->name;
  const int fd = open("/dev/net/tun", O_RDWR | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return interfaceError(port, "open /dev/net/tun", std::strerror(errno));
  ifreq request;
  std::memset(&request, 0, sizeof(request));
  request.ifr_flags = IFF_TAP | IFF_NO_PI;
  std::memcpy(request.ifr_name, name.data(), std::min(name.size(), size_t{IFNAMSIZ - 1}));
  if (ioctl(fd, TUNSETIFF, &request) != 0) {
    const int error = errno;
    close(fd);
    return interfaceError(port, "TUNSETIFF",
                          error == EBUSY || error == EINVAL
                              ? absl::StrCat(std::strerror(error), " (is the name taken?)")
                              : std::strerror(error));
  }
  return std::make_unique<TapInterface>(name, fd);
}

// virtio-user over vhost-net, DPDK's replacement for KNI: a DPDK port whose rings vhost-net
// shares with the kernel's tap of that name, so a frame crosses without a system call each.
// It has a mempool of its own: the kernel's frames arrive in it and go out through the data
// port, whose PMD frees them back here.
class VirtioUserInterface final : public KernelInterface {
 public:
  VirtioUserInterface(std::string name, std::string device)
      : KernelInterface(std::move(name)), device_(std::move(device)) {}
  ~VirtioUserInterface() override {
    if (port_id_ != RTE_MAX_ETHPORTS) {
      rte_eth_dev_stop(port_id_);
      rte_eth_dev_close(port_id_);
    }
    // Also when the probe made the device but no port was found for it.
    if (probed_) rte_eal_hotplug_remove("vdev", device_.c_str());
    if (pool_ != nullptr) rte_mempool_free(pool_);
  }

  absl::Status open(const PortConfig& port, const MacAddress& mac) {
    if (access("/dev/vhost-net", R_OK | W_OK) != 0) {
      return interfaceError(port, "virtio-user",
                            "needs /dev/vhost-net (modprobe vhost_net), or use kind: tap");
    }
    const std::string arguments =
        absl::StrCat(device_, ",path=/dev/vhost-net,queues=1,queue_size=", kQueueSize,
                     ",iface=", name_, ",mac=", mac.toString());
    if (const int result = rte_dev_probe(arguments.c_str()); result != 0) {
      return interfaceError(port, "rte_dev_probe", rte_strerror(-result));
    }
    probed_ = true;
    uint16_t port_id;
    if (rte_eth_dev_get_port_by_name(device_.c_str(), &port_id) != 0) {
      return interfaceError(port, "rte_eth_dev_get_port_by_name", "no such port after probe");
    }
    port_id_ = port_id;
    const uint16_t data_room = static_cast<uint16_t>(
        std::max<uint32_t>(RTE_MBUF_DEFAULT_DATAROOM, uint32_t{port.mtu} + RTE_ETHER_HDR_LEN + 8) +
        RTE_PKTMBUF_HEADROOM);
    const std::string pool_name = absl::StrCat("berth_kpool_", port_id);
    pool_ = rte_pktmbuf_pool_create(pool_name.c_str(), 4 * kQueueSize - 1, 0, 0, data_room,
                                    static_cast<int>(rte_socket_id()));
    if (pool_ == nullptr) return interfaceError(port, "mempool", rte_strerror(rte_errno));
    rte_eth_conf conf;
    std::memset(&conf, 0, sizeof(conf));
    if (const int result = rte_eth_dev_configure(port_id, 1, 1, &conf); result != 0) {
      return interfaceError(port, "rte_eth_dev_configure", rte_strerror(-result));
    }
    const auto socket = static_cast<unsigned>(rte_socket_id());
    if (const int result = rte_eth_rx_queue_setup(port_id, 0, kQueueSize, socket, nullptr, pool_);
        result != 0) {
      return interfaceError(port, "rte_eth_rx_queue_setup", rte_strerror(-result));
    }
    if (const int result = rte_eth_tx_queue_setup(port_id, 0, kQueueSize, socket, nullptr);
        result != 0) {
      return interfaceError(port, "rte_eth_tx_queue_setup", rte_strerror(-result));
    }
    if (const int result = rte_eth_dev_start(port_id); result != 0) {
      return interfaceError(port, "rte_eth_dev_start", rte_strerror(-result));
    }
    ifindex_ = static_cast<int>(if_nametoindex(name_.c_str()));
    return absl::OkStatus();
  }

  uint16_t toKernel(rte_mbuf** frames, uint16_t count) override {
    const uint16_t sent = rte_eth_tx_burst(port_id_, 0, frames, count);
    if (sent < count) rte_pktmbuf_free_bulk(frames + sent, count - sent);
    return sent;
  }

  uint16_t fromKernel(rte_mempool* /*pool*/, rte_mbuf** frames, uint16_t max) override {
    return rte_eth_rx_burst(port_id_, 0, frames, max);
  }

  int readableFd() const override { return -1; }

 private:
  static constexpr uint16_t kQueueSize = 1024;
  const std::string device_;
  bool probed_ = false;
  uint16_t port_id_ = RTE_MAX_ETHPORTS;
  rte_mempool* pool_ = nullptr;
};

// libnl's objects, released by their own calls.
struct NlSocketFree {
  void operator()(nl_sock* socket) const { nl_socket_free(socket); }
};
struct RtnlLinkPut {
  void operator()(rtnl_link* link) const { rtnl_link_put(link); }
};
struct RtnlAddrPut {
  void operator()(rtnl_addr* address) const { rtnl_addr_put(address); }
};
struct NlAddrPut {
  void operator()(nl_addr* address) const { nl_addr_put(address); }
};

}  // namespace

absl::Status configureKernelInterface(const std::string& name, const MacAddress& mac, uint16_t mtu,
                                      const PortConfig& port) {
  auto fail = [&](absl::string_view step, int error) {
    return interfaceError(port, step, nl_geterror(error));
  };
  std::unique_ptr<nl_sock, NlSocketFree> socket(nl_socket_alloc());
  if (socket == nullptr) return absl::ResourceExhaustedError("rtnetlink: no memory for a socket");
  if (const int error = nl_connect(socket.get(), NETLINK_ROUTE); error < 0) {
    return fail("rtnetlink connect", error);
  }
  rtnl_link* found = nullptr;
  if (const int error = rtnl_link_get_kernel(socket.get(), 0, name.c_str(), &found); error < 0) {
    return fail("rtnetlink get link", error);
  }
  std::unique_ptr<rtnl_link, RtnlLinkPut> link(found);
  std::unique_ptr<rtnl_link, RtnlLinkPut> change(rtnl_link_alloc());
  std::unique_ptr<nl_addr, NlAddrPut> link_address(nl_addr_build(AF_LLC, mac.bytes.data(), 6));
  if (change == nullptr || link_address == nullptr) {
    return absl::ResourceExhaustedError("rtnetlink: no memory for a link change");
  }
  // One message: the kernel sets the address and MTU before it brings the link up.
  rtnl_link_set_addr(change.get(), link_address.get());
  rtnl_link_set_mtu(change.get(), mtu);
  rtnl_link_set_flags(change.get(), IFF_UP);
  if (const int error = rtnl_link_change(socket.get(), link.get(), change.get(), 0); error < 0) {
    return fail("rtnetlink set MAC, MTU and up", error);
  }
  const int ifindex = rtnl_link_get_ifindex(link.get());
  // `local_only`: a Full-NAT local address, there for the health probes that bind to it
  // (docs/fullnat.md). Host-sized, so that it brings no route, and for IPv6 deprecated, so that
  // the kernel's own traffic never takes it as its source: its answers, on the pool's ports,
  // would be berth's.
  auto addAddress = [&](const IpAddress& address, uint8_t prefix_length,
                        bool local_only = false) -> absl::Status {
    std::unique_ptr<rtnl_addr, RtnlAddrPut> entry(rtnl_addr_alloc());
    const bool v4 = address.isV4();
    std::unique_ptr<nl_addr, NlAddrPut> local(
        nl_addr_build(v4 ? AF_INET : AF_INET6, address.bytes.data(), v4 ? 4 : 16));
    if (entry == nullptr || local == nullptr) {
      return absl::ResourceExhaustedError("rtnetlink: no memory for an address");
    }
    nl_addr_set_prefixlen(local.get(), prefix_length);
    rtnl_addr_set_ifindex(entry.get(), ifindex);
    rtnl_addr_set_local(entry.get(), local.get());
    // berth answers neighbour solicitations for the address itself: nothing to detect.
    if (!v4) rtnl_addr_set_flags(entry.get(), IFA_F_NODAD);
    if (local_only && !v4) {
      constexpr uint32_t kForever = 0xffffffff;  // the kernel's INFINITY_LIFE_TIME
      rtnl_addr_set_valid_lifetime(entry.get(), kForever);
      rtnl_addr_set_preferred_lifetime(entry.get(), 0);
    }
    const int error = rtnl_addr_add(socket.get(), entry.get(), 0);
    if (error < 0 && error != -NLE_EXIST) {
      return fail(absl::StrCat("rtnetlink add ", address.toString(), "/", prefix_length), error);
    }
    return absl::OkStatus();
  };
  if (port.ipv4) {
    if (absl::Status status = addAddress(*port.ipv4, port.exception->ipv4_prefix_length);
        !status.ok()) {
      return status;
    }
  }
  if (port.ipv6) {
    if (absl::Status status = addAddress(*port.ipv6, port.exception->ipv6_prefix_length);
        !status.ok()) {
      return status;
    }
  }
  for (const IpAddress& local : port.snat_addresses) {
    if (absl::Status status = addAddress(local, local.isV4() ? 32 : 128, true); !status.ok()) {
      return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::unique_ptr<KernelInterface>> openKernelInterface(const PortConfig& port,
                                                                     const MacAddress& port_mac) {
  std::unique_ptr<KernelInterface> interface;
  if (port.exception->kind == ExceptionKind::kTap) {
    absl::StatusOr<std::unique_ptr<KernelInterface>> tap = openTap(port);
    if (!tap.ok()) return tap.status();
    interface = *std::move(tap);
  } else {
    auto virtio = std::make_unique<VirtioUserInterface>(
        port.exception->name, absl::StrCat("virtio_user_", port.exception->name));
    if (absl::Status status = virtio->open(port, port_mac); !status.ok()) return status;
    interface = std::move(virtio);
  }
  if (absl::Status status = configureKernelInterface(interface->name(), port_mac, port.mtu, port);
      !status.ok()) {
    return status;
  }
  return interface;
}

}  // namespace berth
