#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "berth/config/config.h"
#include "berth/net/ip_address.h"

namespace berth {

// Health probes over the host's kernel sockets (not the DPDK ports), many at once from one
// thread: every probe is a non-blocking socket in one epoll set, and poll() advances them all.
// A TCP probe succeeds when the connect does; an HTTP probe sends `GET path HTTP/1.0` and
// succeeds when the status line's code is in the expected range. Each probe fails at its timeout.

// Where and how to probe. Backends with identical targets share one probe (as Maglev does).
struct ProbeTarget {
  HealthCheckType type = HealthCheckType::kTcp;  // kTcp or kHttp
  IpAddress address;
  uint16_t port = 0;
  std::string http_path = "/";
  uint16_t expect_low = 200;
  uint16_t expect_high = 399;
  uint32_t timeout_ms = 1000;
  std::string interface;  // leave through this interface (SO_BINDTODEVICE); empty: any
  // Come from this address, on the ports [source_first_port, source_first_port + source_ports)
  // in turn (a fullnat service's local address, docs/fullnat.md); unset: the kernel's choice.
  std::optional<IpAddress> source;
  uint16_t source_first_port = 0;
  uint16_t source_ports = 0;
  // An HTTP probe's request starts with a PROXY protocol LOCAL header (HealthCheckConfig).
  bool proxy_header = false;

  // A backend's resolved settings (address and port set).
  static ProbeTarget of(const HealthCheckConfig& config);
  // "http 198.18.1.2:80/healthz", "tcp [2001:db8::2]:80" or "tcp 198.18.1.2:80 via tap1 from
  // 198.18.1.20", for log lines.
  std::string toString() const;

  friend bool operator==(const ProbeTarget&, const ProbeTarget&) = default;
  template <typename H>
  friend H AbslHashValue(H state, const ProbeTarget& target) {
    return H::combine(std::move(state), target.type, target.address, target.port, target.http_path,
                      target.expect_low, target.expect_high, target.timeout_ms, target.interface,
                      target.source.has_value(), target.source.value_or(IpAddress{}),
                      target.source_first_port, target.source_ports, target.proxy_header);
  }
};

struct ProbeResult {
  uint64_t probe = 0;  // what start() returned
  // False when a local error stopped the probe before it reached the backend (no descriptor,
  // no memory, no free local port: see isLocalProbeError): it says nothing of the backend.
  bool ran = true;
  bool success = false;
  std::string detail;  // "connected", "HTTP 200", "connect: Connection refused", ...
};

// Errors of this host rather than of the path to the backend: EMFILE, ENFILE, ENOBUFS, ENOMEM,
// ENOSPC (epoll), EADDRNOTAVAIL and EAGAIN from connect (no free local port). A refused, reset,
// unreachable or timed-out connection is the backend's.
bool isLocalProbeError(int error);

class Prober {
 public:
  // `clock` gives milliseconds from any fixed epoch; the default is the steady clock.
  static absl::StatusOr<std::unique_ptr<Prober>> create(std::function<uint64_t()> clock = nullptr);
  ~Prober();
  Prober(const Prober&) = delete;
  Prober& operator=(const Prober&) = delete;

  // Starts a probe and returns its id; its result comes from a later poll(), by the target's
  // timeout at the latest. A probe that cannot start (no socket) fails at the next poll().
  uint64_t start(const ProbeTarget& target);

  // Waits up to `wait_ms` for any probe to progress, then returns those that finished, the ones
  // past their timeout included. Handles every ready socket: epoll_wait is called again while it
  // fills its batch.
  std::vector<ProbeResult> poll(int wait_ms);

  size_t inFlight() const { return probes_.size(); }

 private:
  enum class Phase : uint8_t { kConnecting, kSending, kReading };
  struct Probe {
    uint64_t id = 0;
    ProbeTarget target;
    int fd = -1;
    Phase phase = Phase::kConnecting;
    uint64_t deadline_ms = 0;
    std::string request;
    size_t sent = 0;
    std::string response;
  };

  Prober(int epoll_fd, std::function<uint64_t()> clock);
  void advance(Probe& probe, uint32_t events);
  void sendRequest(Probe& probe);
  void readResponse(Probe& probe);
  void finish(Probe& probe, bool success, std::string detail, bool ran = true);
  // A failure of `what` with `error`: not run when the error is local.
  void fail(Probe& probe, absl::string_view what, int error);
  // Binds `fd` to the target's source address and its next port, with the close that resets:
  // the range is small, so no probe may leave a TIME_WAIT behind on either end. Returns the
  // failure, empty on success.
  std::string bindSource(int fd, const ProbeTarget& target);

  int epoll_fd_;
  std::function<uint64_t()> clock_;
  uint64_t next_id_ = 1;
  absl::flat_hash_map<int, Probe> probes_;  // by socket
  // For each source address, the offset in its targets' port range the next probe takes: a
  // probe's tuple comes back only after every other port of the range has been used.
  absl::flat_hash_map<IpAddress, uint32_t> next_source_port_;
  std::vector<ProbeResult> done_;
};

}  // namespace berth
