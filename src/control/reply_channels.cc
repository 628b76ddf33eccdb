#include "berth/control/reply_channels.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "berth/util/status_macros.h"

namespace berth {

absl::Status ReplyChannels::openSockets() {
  BERTH_ASSIGN_OR_RETURN(control_, ControlSocket::open(paths_.control));
  log_(absl::StrCat("control socket: ", control_->path()));
  if (paths_.read_only.empty()) return absl::OkStatus();
  const ControlSocketOptions read_only{.path = paths_.read_only,
                                       .mode = paths_.read_only_group ? 0660u : 0666u,
                                       .group = paths_.read_only_group,
                                       .commands = readOnlyCommands(),
                                       .role = "read-only socket"};
  BERTH_ASSIGN_OR_RETURN(read_only_, ControlSocket::open(read_only));
  log_(absl::StrCat("read-only socket (", absl::StrJoin(readOnlyCommands(), ", "),
                    "): ", read_only_->path()));
  return absl::OkStatus();
}

void ReplyChannels::closeSockets() {
  read_only_.reset();
  control_.reset();
}

absl::Status ReplyChannels::openMetrics(const std::optional<Endpoint>& listen) {
  if (!listen) return absl::OkStatus();
  BERTH_ASSIGN_OR_RETURN(metrics_, MetricsServer::open(*listen));
  log_(absl::StrCat("metrics: http://", metrics_->endpoint().toString(), "/metrics"));
  return absl::OkStatus();
}

void ReplyChannels::serve(const ControlSocket::Handler& control,
                          const ControlSocket::Handler& read_only, const Render& metrics) {
  ++turn_;
  serving_ = true;
  if (control_) control_->serve(control);
  if (read_only_) read_only_->serve(read_only);
  // A scrape's rendering gathers its figures on the loop too, sharing gatheredReply()'s turns.
  if (metrics_) {
    metrics_->serve([&]() -> std::shared_ptr<const RenderedText> {
      return mayGatherNow() ? metrics() : nullptr;
    });
  }
  serving_ = false;
}

std::shared_ptr<const RenderedText> ReplyChannels::renderOffLoop(ReplyRenderer::Render render) {
  return renderer_ != nullptr ? renderer_->render(std::move(render)) : renderHere(render);
}

bool ReplyChannels::mayGatherNow() {
  if (!serving_) return true;
  // A request that arrives while a turn gathers is served on the next turn, which therefore
  // gathers nothing: otherwise it could wait behind that turn's gathering and then the next's.
  if (gathered_turn_ != 0 && turn_ <= gathered_turn_ + 1) return false;
  gathered_turn_ = turn_;
  return true;
}

std::unique_ptr<ReplyStream> ReplyChannels::gatheredReply(Render gather) {
  auto text = std::make_shared<std::shared_ptr<const RenderedText>>();
  return sharedTextReply(
      [this, gather = std::move(gather), text]() -> std::shared_ptr<const std::string> {
        if (*text == nullptr) {
          if (!mayGatherNow()) return nullptr;
          *text = gather();
        }
        return (*text)->ready() ? renderedTextOrError(**text) : nullptr;
      });
}

std::shared_ptr<const RenderedText> ReplyChannels::sharedStats(absl::Time now,
                                                               const Render& render) {
  if (read_only_stats_ == nullptr || now - read_only_stats_at_ >= kReadOnlyStatsInterval) {
    read_only_stats_ = render();
    read_only_stats_at_ = now;
  }
  return read_only_stats_;
}

std::shared_ptr<const RenderedText> ReplyChannels::sharedBackends(uint64_t snapshot_generation,
                                                                  const Render& render) {
  if (backends_rendering_ == nullptr || backends_rendering_->ready() ||
      backends_rendering_generation_ != snapshot_generation) {
    backends_rendering_ = render();
    backends_rendering_generation_ = snapshot_generation;
  }
  return backends_rendering_;
}

}  // namespace berth
