#include "berth/health/prober.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "berth/health/http_probe.h"
#include "berth/net/proxy_protocol.h"
#include "berth/net/socket_address.h"

namespace berth {
namespace {

uint64_t steadyMilliseconds() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

}  // namespace

bool isLocalProbeError(int error) {
  switch (error) {
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
    case ENOSPC:
    case EADDRNOTAVAIL:
    case EAGAIN:
      return true;
    default:
      return false;
  }
}

ProbeTarget ProbeTarget::of(const HealthCheckConfig& config) {
  ProbeTarget target;
  target.type = config.type;
  target.address = config.address.value_or(IpAddress{});
  target.port = config.port.value_or(0);
  if (config.type == HealthCheckType::kHttp) {
    target.http_path = config.http_path;
    target.expect_low = config.expect_low;
    target.expect_high = config.expect_high;
    target.proxy_header = config.proxy_header;
  }
  target.timeout_ms = config.timeout_ms;
  target.interface = config.interface;
  target.source = config.source;
  target.source_first_port = config.source_first_port;
  target.source_ports = config.source_ports;
  return target;
}

std::string ProbeTarget::toString() const {
  return absl::StrCat(berth::toString(type), " ", Endpoint{address, port}.toString(),
                      type == HealthCheckType::kHttp ? http_path : "",
                      interface.empty() ? "" : absl::StrCat(" via ", interface),
                      source ? absl::StrCat(" from ", source->toString()) : "");
}

absl::StatusOr<std::unique_ptr<Prober>> Prober::create(std::function<uint64_t()> clock) {
  const int epoll_fd = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd < 0) return absl::InternalError(absl::StrCat("epoll_create1: ", strerror(errno)));
  return std::unique_ptr<Prober>(new Prober(
      epoll_fd, clock ? std::move(clock) : std::function<uint64_t()>(steadyMilliseconds)));
}

Prober::Prober(int epoll_fd, std::function<uint64_t()> clock)
    : epoll_fd_(epoll_fd), clock_(std::move(clock)) {}

Prober::~Prober() {
  for (auto& [fd, probe] : probes_) close(fd);
  close(epoll_fd_);
}

uint64_t Prober::start(const ProbeTarget& target) {
  const uint64_t id = next_id_++;
  const bool v4 = target.address.isV4();
  const int fd = socket(v4 ? AF_INET : AF_INET6, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    const int error = errno;
    done_.push_back(
        {id, !isLocalProbeError(error), false, absl::StrCat("socket: ", strerror(error))});
    return id;
  }
  // Bound to berthd's own kernel interface: when it cannot be (gone, or no permission), the
  // probe says nothing of the backend, like any other local error.
  if (!target.interface.empty() &&
      setsockopt(fd, SOL_SOCKET, SO_BINDTODEVICE, target.interface.data(),
                 static_cast<socklen_t>(target.interface.size())) != 0) {
    const int error = errno;
    close(fd);
    done_.push_back(
        {id, false, false, absl::StrCat("bind to ", target.interface, ": ", strerror(error))});
    return id;
  }
  if (target.source) {
    if (std::string failure = bindSource(fd, target); !failure.empty()) {
      close(fd);
      done_.push_back({id, false, false, std::move(failure)});
      return id;
    }
  }
  const SocketAddress address = socketAddressOf(Endpoint{target.address, target.port});
  Probe& probe = probes_[fd];
  probe.id = id;
  probe.target = target;
  probe.fd = fd;
  probe.deadline_ms = clock_() + target.timeout_ms;
  if (target.type == HealthCheckType::kHttp) {
    if (target.proxy_header) {
      const auto header = proxyLocalHeader();
      probe.request.assign(header.begin(), header.end());
    }
    probe.request += httpProbeRequest(target.http_path, target.address, target.port);
  }
  epoll_event event{};
  event.events = EPOLLOUT;
  event.data.fd = fd;
  if (epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &event) != 0) {
    const int error = errno;
    finish(probe, false, absl::StrCat("epoll_ctl: ", strerror(error)), false);
    return id;
  }
  if (connect(fd, address.get(), address.length) != 0 && errno != EINPROGRESS) {
    fail(probe, "connect", errno);
  }
  // Connected at once (loopback can) or in progress: EPOLLOUT reports either.
  return id;
}

std::string Prober::bindSource(int fd, const ProbeTarget& target) {
  uint32_t& next = next_source_port_[*target.source];
  const auto port = static_cast<uint16_t>(target.source_first_port +
                                          next % std::max<uint16_t>(target.source_ports, 1));
  ++next;
  // Probes to other backends may hold the same address and port at once; each connection's
  // tuple is still its own.
  const int reuse = 1;
  const linger reset{1, 0};
  const SocketAddress local = socketAddressOf(Endpoint{*target.source, port});
  if (setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &reuse, sizeof(reuse)) != 0 ||
      setsockopt(fd, SOL_SOCKET, SO_LINGER, &reset, sizeof(reset)) != 0 ||
      bind(fd, local.get(), local.length) != 0) {
    return absl::StrCat("bind to ", Endpoint{*target.source, port}.toString(), ": ",
                        strerror(errno));
  }
  return "";
}

void Prober::fail(Probe& probe, absl::string_view what, int error) {
  finish(probe, false, absl::StrCat(what, ": ", strerror(error)), !isLocalProbeError(error));
}

void Prober::finish(Probe& probe, bool success, std::string detail, bool ran) {
  done_.push_back({probe.id, ran, success, std::move(detail)});
  epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, probe.fd, nullptr);
  const int fd = probe.fd;
  close(fd);
  probes_.erase(fd);
}

void Prober::sendRequest(Probe& probe) {
  while (probe.sent < probe.request.size()) {
    const ssize_t written = send(probe.fd, probe.request.data() + probe.sent,
                                 probe.request.size() - probe.sent, MSG_NOSIGNAL);
    if (written < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;  // wait for EPOLLOUT again
      fail(probe, "send", errno);
      return;
    }
    probe.sent += static_cast<size_t>(written);
  }
  probe.phase = Phase::kReading;
  epoll_event event{};
  event.events = EPOLLIN;
  event.data.fd = probe.fd;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, probe.fd, &event);
}

void Prober::readResponse(Probe& probe) {
  char buffer[512];
  for (;;) {
    const ssize_t got = recv(probe.fd, buffer, sizeof(buffer), 0);
    if (got < 0) {
      if (errno == EAGAIN || errno == EWOULDBLOCK) return;
      if (errno == ECONNRESET) {
        finish(probe, false, std::string(kHttpResetDetail));
      } else {
        fail(probe, "recv", errno);
      }
      return;
    }
    if (got > 0 && probe.response.size() < kHttpResponseLimit) {
      probe.response.append(buffer, static_cast<size_t>(got));
    }
    if (const std::optional<ProbeVerdict> verdict = httpVerdictOf(
            probe.response, got == 0, probe.target.expect_low, probe.target.expect_high)) {
      finish(probe, verdict->success, verdict->detail);
      return;
    }
  }
}

void Prober::advance(Probe& probe, uint32_t events) {
  if (probe.phase == Phase::kConnecting) {
    int error = 0;
    socklen_t length = sizeof(error);
    getsockopt(probe.fd, SOL_SOCKET, SO_ERROR, &error, &length);
    if (error != 0) {
      fail(probe, "connect", error);
      return;
    }
    if (probe.target.type != HealthCheckType::kHttp) {
      finish(probe, true, "connected");
      return;
    }
    probe.phase = Phase::kSending;
  }
  if (probe.phase == Phase::kSending) {
    sendRequest(probe);
    return;
  }
  if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) readResponse(probe);
}

std::vector<ProbeResult> Prober::poll(int wait_ms) {
  if (!probes_.empty()) {
    // Wait only when nothing is reported yet; then take batches while they come full.
    constexpr int kBatch = 64;
    epoll_event events[kBatch];
    int ready = epoll_wait(epoll_fd_, events, kBatch, done_.empty() ? wait_ms : 0);
    while (ready > 0) {
      for (int i = 0; i < ready; ++i) {
        auto it = probes_.find(events[i].data.fd);
        if (it != probes_.end()) advance(it->second, events[i].events);
      }
      ready = ready == kBatch ? epoll_wait(epoll_fd_, events, kBatch, 0) : 0;
    }
  }
  const uint64_t now = clock_();
  std::vector<int> late;
  for (const auto& [fd, probe] : probes_) {
    if (now >= probe.deadline_ms) late.push_back(fd);
  }
  for (int fd : late) {
    Probe& probe = probes_.at(fd);
    finish(probe, false,
           absl::StrCat(
               "timed out after ", probe.target.timeout_ms, " ms ",
               probe.phase == Phase::kConnecting ? "connecting" : "waiting for the response"));
  }
  std::vector<ProbeResult> results;
  results.swap(done_);
  return results;
}

}  // namespace berth
