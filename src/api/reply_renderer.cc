#include "berth/api/reply_renderer.h"

#include <new>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "berth/api/control_socket.h"

namespace berth {
namespace {

void renderInto(RenderedText& text, const ReplyRenderer::Render& render) {
  // Reports allocate; running out of memory refuses this reply and nothing else.
  try {
    text.set(std::make_shared<const std::string>(render()));
  } catch (const std::bad_alloc&) {
    text.set(absl::ResourceExhaustedError("berthd ran out of memory while rendering this reply"));
  }
}

}  // namespace

void RenderedText::set(absl::StatusOr<std::shared_ptr<const std::string>> result) {
  result_ = std::move(result);
  ready_.store(true, std::memory_order_release);
}

std::shared_ptr<const RenderedText> ReplyRenderer::render(Render render) {
  auto text = std::make_shared<RenderedText>();
  const bool queued =
      thread_.post([text, render = std::move(render)] { renderInto(*text, render); });
  if (!queued) {
    text->set(absl::ResourceExhaustedError(
        absl::StrCat("berthd is already rendering ", kMaxQueued, " replies; ask again shortly")));
  }
  return text;
}

std::shared_ptr<const RenderedText> renderHere(const ReplyRenderer::Render& render) {
  auto text = std::make_shared<RenderedText>();
  renderInto(*text, render);
  return text;
}

std::shared_ptr<const std::string> renderedTextOrError(const RenderedText& text) {
  if (text.result().ok()) return *text.result();
  return std::make_shared<const std::string>(errorReply(text.result().status().message()));
}

std::unique_ptr<ReplyStream> renderedReply(std::shared_ptr<const RenderedText> text) {
  return sharedTextReply([text = std::move(text)]() -> std::shared_ptr<const std::string> {
    return text->ready() ? renderedTextOrError(*text) : nullptr;
  });
}

}  // namespace berth
