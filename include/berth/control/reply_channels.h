#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "berth/api/control_socket.h"
#include "berth/api/metrics_server.h"
#include "berth/api/reply_renderer.h"
#include "berth/net/ip_address.h"

namespace berth {

// Where berthd answers berthctl: the control socket (mode 0600, every command) and the read-only
// socket (status, stats and announce, for berth-announcer and monitoring without admin rights;
// none when its path is empty). The read-only socket is mode 0660 with `read_only_group` as its
// group, or 0666 without one.
struct ControlSocketPaths {
  std::string control;
  std::string read_only;
  std::optional<gid_t> read_only_group;
};

// The management loop's ways out: the control and read-only sockets, the metrics endpoint and the
// renderer thread that renders long replies off the loop, with the renderings that clients share
// so that asking in a loop costs the loop one gathering per rendering. Each turn, serve() answers
// what has arrived with the handlers the loop gives. Management thread only.
class ReplyChannels {
 public:
  using Log = std::function<void(const std::string&)>;
  using Render = std::function<std::shared_ptr<const RenderedText>()>;
  // How often the read-only socket renders `stats` at most, for every client that asks.
  static constexpr absl::Duration kReadOnlyStatsInterval = absl::Seconds(1);

  ReplyChannels(ControlSocketPaths paths, Log log)
      : paths_(std::move(paths)), log_(std::move(log)) {}

  // Started on the main lcore, whose CPU is the management loop's: rendering a big reply never
  // takes a worker's CPU. Before it starts and after it stops, renderings run in place.
  void startRenderer() { renderer_ = std::make_unique<ReplyRenderer>(); }
  void stopRenderer() { renderer_.reset(); }
  absl::Status openSockets();
  void closeSockets();
  // Nothing without `listen`.
  absl::Status openMetrics(const std::optional<Endpoint>& listen);
  void closeMetrics() { metrics_.reset(); }

  // One turn: requests to the control socket go to `control`, to the read-only socket to
  // `read_only`, scrapes to `metrics`.
  void serve(const ControlSocket::Handler& control, const ControlSocket::Handler& read_only,
             const Render& metrics);

  // `render` on the renderer's thread, or here before it starts.
  std::shared_ptr<const RenderedText> renderOffLoop(ReplyRenderer::Render render);
  // The read-only socket's `stats`: `render` at most once every kReadOnlyStatsInterval.
  std::shared_ptr<const RenderedText> sharedStats(absl::Time now, const Render& render);
  // A rendered reply whose figures `gather` takes (and hands to the renderer) on a turn of the
  // loop that may gather: one turn in two at most, the first turn neither the last one to gather
  // nor the one after it. With tens of thousands of backends a gathering holds the loop for
  // tens of milliseconds (hundreds under a sanitizer); several arriving together must not hold
  // `announce` and `status` up behind more than one of them, whenever they arrive.
  // Outside serve() (a caller draining a reply itself) it gathers at once.
  std::unique_ptr<ReplyStream> gatheredReply(Render gather);
  // `backends`: a request that arrives while a rendering of the same snapshot is under way
  // shares it; a finished one, or one of another snapshot, is rendered anew.
  std::shared_ptr<const RenderedText> sharedBackends(uint64_t snapshot_generation,
                                                     const Render& render);

  const ControlSocket* control() const { return control_.get(); }
  const ControlSocket* readOnly() const { return read_only_.get(); }
  const MetricsServer* metrics() const { return metrics_.get(); }

 private:
  // Whether a reply may gather its figures now, taking this turn's one gathering if so.
  bool mayGatherNow();

  ControlSocketPaths paths_;
  Log log_;
  std::unique_ptr<ReplyRenderer> renderer_;
  std::unique_ptr<ControlSocket> control_;
  std::unique_ptr<ControlSocket> read_only_;  // when paths_.read_only is set
  std::unique_ptr<MetricsServer> metrics_;    // when the config has `metrics`
  std::shared_ptr<const RenderedText> read_only_stats_;
  absl::Time read_only_stats_at_ = absl::InfinitePast();
  std::shared_ptr<const RenderedText> backends_rendering_;  // the latest, maybe under way
  uint64_t backends_rendering_generation_ = 0;              // the snapshot it shows
  uint64_t turn_ = 0;                                       // serve() calls so far
  bool serving_ = false;        // inside serve(): a gathering waits for a turn of its own
  uint64_t gathered_turn_ = 0;  // the last turn a reply or a scrape gathered on; 0: none yet
};

}  // namespace berth
