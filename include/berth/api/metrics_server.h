#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "berth/api/client_slots.h"
#include "berth/api/reply_renderer.h"
#include "berth/net/ip_address.h"

namespace berth {

// berthd's Prometheus endpoint: a minimal HTTP/1.x server for `GET /metrics`, served from the
// management loop, which it never holds up (docs/architecture.md, "The management loop"). Each
// connection carries one request and is closed after the answer (as Prometheus's scraper is
// happy with).
//   - The text is rendered at most once per render interval (a second), away from the loop
//     (api/reply_renderer.h), and every scrape in that time is served the same text, so
//     parallel scrapes cost sends, not renders. A scrape that finds the text older waits for
//     the next rendering; one that failed (out of memory) is answered 503.
//   - Sends never block, and each serve() sends at most kBytesPerServe over all connections.
//   - A client has two seconds to send its request headers (8 KiB at most) and five to read the
//     answer, then it is cut.
//   - At kMaxClients connections, a new one takes the place of the oldest that has not sent its
//     request: any local user can open connections to this port, and idle ones must not lock
//     out the scraper. Only when every connection is being answered is the new one refused.
class MetricsServer {
 public:
  // Starts rendering the exposition text; called when a scrape asks for it and the last
  // rendering is older than the render interval. nullptr: not on this turn of the loop; the
  // scrapes waiting for it ask again on the next.
  using Renderer = std::function<std::shared_ptr<const RenderedText>()>;

  static constexpr absl::Duration kRenderInterval = absl::Seconds(1);
  static constexpr size_t kMaxClients = 256;
  static constexpr size_t kBytesPerServe = 1024 * 1024;

  struct ClientCounts {
    uint64_t accepted = 0;
    uint64_t answered = 0;
    uint64_t renders = 0;
    uint64_t evicted_idle = 0;
    uint64_t refused_full = 0;
    uint64_t cut_at_deadline = 0;
  };

  // Listens on `listen` (TCP). Errors name the address and the reason (in use, not local).
  static absl::StatusOr<std::unique_ptr<MetricsServer>> open(
      const Endpoint& listen, absl::Duration render_interval = kRenderInterval);
  ~MetricsServer();
  MetricsServer(const MetricsServer&) = delete;
  MetricsServer& operator=(const MetricsServer&) = delete;

  // Accepts, reads, answers and writes what is ready; never waits.
  void serve(const Renderer& render);
  // The address bound, with the port the kernel chose when asked for port 0.
  const Endpoint& endpoint() const { return endpoint_; }
  const ClientCounts& counts() const { return counts_; }

 private:
  struct Client : ClientConnection {
    bool answered = false;
    bool head_only = false;
    bool awaiting_text = false;               // for the rendering under way
    uint64_t renders_done_before = 0;         // renderings done when it asked for the text
    std::string head;                         // status line and headers, or a whole error
    std::shared_ptr<const std::string> body;  // the rendered text, shared by every scrape
    size_t sent = 0;                          // over head, then body
  };
  MetricsServer(int fd, Endpoint endpoint, absl::Duration render_interval)
      : fd_(fd),
        endpoint_(endpoint),
        render_interval_ms_(absl::ToInt64Milliseconds(render_interval)) {}
  // Reads what the client sent; false when it closed or failed before its request was whole.
  bool readRequest(Client& client, const Renderer& render, uint64_t now_ms);
  // Sets the client's answer for its complete request head.
  void answer(Client& client, const Renderer& render, uint64_t now_ms);
  // Sends what the budget allows; true once the answer is sent or the client is gone.
  bool send(Client& client, size_t& budget);
  // A scrape of /metrics: answered from the text when it is fresh, else once a rendering (begun
  // now, or already under way) ends.
  void askForText(Client& client, const Renderer& render, uint64_t now_ms);
  // Answers a client awaiting the text once a text can answer it, starting a rendering where
  // none is under way and none could.
  void settle(Client& client, const Renderer& render, uint64_t now_ms);
  void answerWithText(Client& client);
  // Takes the rendering under way once it has ended.
  void takeRendered();

  int fd_;
  Endpoint endpoint_;
  int64_t render_interval_ms_;
  std::shared_ptr<const std::string> text_;
  std::string render_failure_;  // why the latest rendering failed; empty when it did not
  uint64_t rendered_ms_ = 0;    // when the latest rendering began
  std::shared_ptr<const RenderedText> rendering_;
  uint64_t render_started_ms_ = 0;
  uint64_t renders_done_ = 0;
  std::vector<Client> clients_;
  size_t first_served_ = 0;
  ClientCounts counts_;
};

}  // namespace berth
