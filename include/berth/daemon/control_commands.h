#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "berth/api/reply_stream.h"
#include "berth/api/request.h"
#include "berth/config/config.h"
#include "berth/control/announce.h"
#include "berth/control/neighbor_resolver.h"
#include "berth/control/rate_meter.h"
#include "berth/control/reload_queue.h"
#include "berth/control/reply_channels.h"
#include "berth/control/reports.h"
#include "berth/control/service_tables.h"
#include "berth/control/snapshot_rollouts.h"
#include "berth/control/status_report.h"
#include "berth/daemon/datapath.h"

namespace berth {

// What the control socket's commands ask of the management loop: the figures it gathers, and
// the few changes a command makes, which the loop carries out with its other parts. The loop
// implements it.
class CommandTarget {
 public:
  virtual ~CommandTarget() = default;
  // `status` (control/status_report.h), `stats`, and the rows of `services` and `backends`
  // (control/reports.h).
  virtual StatusReport statusReport() const = 0;
  virtual CountersReport countersReport() const = 0;
  virtual std::vector<ServiceRow> serviceRows() const = 0;
  virtual std::vector<BackendRow> backendRows() const = 0;
  // Drains or undrains `backend` of `service` (ServiceTables::setDrained); when that changed
  // something, the snapshot is published, the drains saved and the change logged.
  virtual absl::StatusOr<ServiceTables::DrainOutcome> setDrained(const std::string& service,
                                                                 const std::string& backend,
                                                                 bool drain) = 0;
  // A reload's number, answered once a build begun after it has been applied or refused
  // (control/reload_queue.h).
  virtual uint64_t requestReload() = 0;
  // berth-announcer's count of the routes in BIRD: a 0 while stopping starts the last stretch of
  // forwarding (control/stop_withdrawal.h).
  virtual void routesAnnounced(uint32_t routes) = 0;
  // What the routes to announce depend on (control/announce.h).
  virtual ForwardingState forwardingState() const = 0;
};

// The loop's parts the commands read. Each outlives the commands.
struct CommandParts {
  const Config& config;  // in force
  const std::string& config_path;
  const ServiceTables& tables;
  Datapath& datapath;
  NeighborResolver& neighbors;
  const SnapshotRollouts& rollouts;
  ReplyChannels& replies;
  const RateMeter& rates;
  const std::unique_ptr<ReloadQueue>& reloads;
};

// The control socket's commands (api/commands.h): the reply to each request, on the management
// thread. The short ones answer whole; stats, services, backends and neighbors gather their
// figures on the loop and render them on the renderer's thread (api/reply_renderer.h); table
// answers in pieces; reload and explain answer on later turns of the loop, once the build or
// the workers have.
class ControlCommands {
 public:
  ControlCommands(CommandParts parts, CommandTarget& target) : parts_(parts), target_(target) {}
  ControlCommands(const ControlCommands&) = delete;
  ControlCommands& operator=(const ControlCommands&) = delete;

  // InternalError naming a command of the table that has no handler.
  static absl::Status checkHandlers();
  // The full socket's commands.
  std::unique_ptr<ReplyStream> handle(const ControlRequest& request);
  // The read-only socket's: as handle(), with `stats` rendered at most once every
  // ReplyChannels::kReadOnlyStatsInterval.
  std::unique_ptr<ReplyStream> handleReadOnly(const ControlRequest& request);

  // The `stats` reply: the counters, the rates, and the ports' statistics at the top level; its
  // text with every counter when `all`, else the ones that are not zero (statsText()).
  static std::string statsReplyJson(const CountersReport& report, const Rates& rates,
                                    const std::shared_ptr<const PortStatsReading>& ports,
                                    const PortRates& port_rates, bool all = false);

 private:
  using Handler = std::unique_ptr<ReplyStream> (*)(ControlCommands&, const ControlRequest&);
  static const absl::flat_hash_map<std::string, Handler>& handlers();

  std::shared_ptr<const RenderedText> renderOffLoop(ReplyRenderer::Render render) {
    return parts_.replies.renderOffLoop(std::move(render));
  }
  // `all`: every counter, zeros included (berthctl stats --all).
  std::shared_ptr<const RenderedText> renderStats(bool all);
  std::unique_ptr<ReplyStream> statsReply(const ControlRequest& request);
  std::unique_ptr<ReplyStream> servicesReply();
  std::unique_ptr<ReplyStream> backendsReply();
  std::unique_ptr<ReplyStream> reloadReply();
  std::string drainReply(const ControlRequest& request, bool drain);
  // `neighbors`, and `neighbors flush`.
  std::unique_ptr<ReplyStream> neighborsReply(const ControlRequest& request);
  std::string announceReply(const ControlRequest& request);
  // `explain`: where a flow's next packet goes and why, with each worker's connection entry.
  // The reply waits, on later turns of the loop, for the workers' answers.
  std::unique_ptr<ReplyStream> explainReply(const ControlRequest& request);
  // The explain reply for `flow`, with what the workers answered.
  std::string explainAnswer(const FlowKey& flow, const std::optional<TrackedConnection>& tracked,
                            const std::string& note) const;
  // `table`: one service's live table, as `berthctl table --config` renders one from a file,
  // in pieces.
  std::unique_ptr<ReplyStream> tableReply(const ControlRequest& request) const;

  CommandParts parts_;
  CommandTarget& target_;
};

}  // namespace berth
