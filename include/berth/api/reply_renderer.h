#pragma once

#include <atomic>
#include <cstddef>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "berth/api/reply_stream.h"
#include "berth/util/background_thread.h"

namespace berth {

// Replies rendered away from the management loop (docs/architecture.md, "The management
// loop"). With 65,535 backends, `backends` is 22 MB of JSON and text, `stats` 9 MB and the
// Prometheus text 31 MB: each takes the loop a tenth of a second or more to render. The loop
// gathers the figures (the rows of control/reports.h, cheap copies), and a pure render of
// them runs on the renderer's thread while the loop turns.

// A text rendered on the renderer's thread: set once, then read by the loop.
class RenderedText {
 public:
  bool ready() const { return ready_.load(std::memory_order_acquire); }
  // Once ready(): the text, shared by every client it answers, or why it was not rendered.
  const absl::StatusOr<std::shared_ptr<const std::string>>& result() const { return result_; }

  // Sets the result and makes it ready; once.
  void set(absl::StatusOr<std::shared_ptr<const std::string>> result);

 private:
  std::atomic<bool> ready_{false};
  absl::StatusOr<std::shared_ptr<const std::string>> result_;
};

class ReplyRenderer {
 public:
  // Renders waiting at most; the control socket's 256 clients could otherwise queue 256
  // copies of every backend's row.
  static constexpr size_t kMaxQueued = 16;
  using Render = std::function<std::string()>;

  // Queues `render` for the renderer's thread. A full queue, or running out of memory while
  // rendering, makes a text that is ready with ResourceExhausted saying so.
  std::shared_ptr<const RenderedText> render(Render render);

 private:
  BackgroundThread thread_{kMaxQueued};
};

// `render` rendered now, on the calling thread, with what render() would say of running out of
// memory: for a control plane whose renderer has not started, and for tests.
std::shared_ptr<const RenderedText> renderHere(const ReplyRenderer::Render& render);

// Once `text` is ready: the text, or an error reply saying why it was not rendered.
std::shared_ptr<const std::string> renderedTextOrError(const RenderedText& text);

// A control reply of `text`: it waits on later turns of the loop until the text is rendered,
// then goes out in pieces; a text that was not rendered is answered with an error reply.
std::unique_ptr<ReplyStream> renderedReply(std::shared_ptr<const RenderedText> text);

}  // namespace berth
