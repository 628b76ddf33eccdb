#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "berth/net/ip_address.h"

namespace berth {

// berthd's Prometheus endpoint: a minimal HTTP/1.x server for `GET /metrics`, served from the
// management loop without blocking it. Each connection carries one request and is closed after
// the answer (as Prometheus's scraper is happy with). A client that has not sent its request
// headers within two seconds, or not read the answer within five, is dropped; requests over 8 KiB
// are refused.
class MetricsServer {
 public:
  // The exposition text, rendered when a scrape asks for it.
  using Renderer = std::function<std::string()>;

  // Listens on `listen` (TCP). Errors name the address and the reason (in use, not local).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> open(const Endpoint& listen);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Accepts, reads, answers and writes what is ready; never waits.
  void serve(const Renderer& render);
  // The address bound, with the port the kernel chose when asked for port 0.
  const Endpoint& endpoint() const { return endpoint_; }

 private:
  struct Client {
    int fd = -1;
    std::string received;
    std::string reply;  // once the request is complete
    size_t sent = 0;
    uint64_t deadline_ms = 0;
  };
  MetricsServer(int fd, Endpoint endpoint) : fd_(fd), endpoint_(endpoint) {}
  // The whole HTTP answer for a complete request head.
  static std::string answer(const std::string& head, const Renderer& render);

  int fd_;
  Endpoint endpoint_;
  std::vector<Client> clients_;
};

}  // namespace berth
