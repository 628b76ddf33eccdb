#include "berth/api/reply_renderer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "berth/api/reply_stream.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

// Every stream hands a reply out in pieces of the budget asked for: a 22 MB reply never lands
// in the socket's buffer whole.
TEST(ReplyStreamTest, WholeAndPolledRepliesComeInPiecesOfTheBudget) {
  const std::string text(10'000, 'x');
  std::vector<std::unique_ptr<ReplyStream>> streams;
  streams.push_back(wholeReply(text));
  streams.push_back(pollingReply([&]() -> std::optional<std::string> { return text; }));
  streams.push_back(
      sharedTextReply([shared = std::make_shared<const std::string>(text)] { return shared; }));
  for (std::unique_ptr<ReplyStream>& stream : streams) {
    std::string out;
    int pieces = 0;
    for (;;) {
      const size_t before = out.size();
      const ReplyStream::Progress progress = stream->next(out, 4096);
      EXPECT_LE(out.size() - before, 4096u);
      ++pieces;
      if (progress == ReplyStream::Progress::kDone) break;
    }
    EXPECT_EQ(out, text);
    EXPECT_EQ(pieces, 3);
  }
}

TEST(ReplyStreamTest, APolledReplyWaitsUntilItsTextExists) {
  int polls = 0;
  std::unique_ptr<ReplyStream> stream =
      sharedTextReply([&]() -> std::shared_ptr<const std::string> {
        return ++polls < 3 ? nullptr : std::make_shared<const std::string>("{\"ok\":true}");
      });
  std::string out;
  EXPECT_EQ(stream->next(out, 100), ReplyStream::Progress::kWaiting);
  EXPECT_EQ(stream->next(out, 100), ReplyStream::Progress::kWaiting);
  EXPECT_EQ(stream->next(out, 100), ReplyStream::Progress::kDone);
  EXPECT_EQ(out, "{\"ok\":true}");
  EXPECT_EQ(drainReply(*wholeReply("")), "");
}

// The render runs on the renderer's thread; the reply waits for it without blocking its caller.
TEST(ReplyRendererTest, RendersOffTheCallersThreadAndTheReplyWaitsForIt) {
  ReplyRenderer renderer;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<std::thread::id> rendered_on;
  std::shared_ptr<const RenderedText> text = renderer.render([&, released] {
    released.wait();
    rendered_on.set_value(std::this_thread::get_id());
    return std::string("{\"ok\":true,\"rows\":3}");
  });
  std::unique_ptr<ReplyStream> reply = renderedReply(text);
  std::string out;
  EXPECT_EQ(reply->next(out, 64), ReplyStream::Progress::kWaiting);
  EXPECT_FALSE(text->ready());
  release.set_value();
  EXPECT_EQ(drainReply(*reply, 4), "{\"ok\":true,\"rows\":3}");
  EXPECT_NE(rendered_on.get_future().get(), std::this_thread::get_id());
}

// Running out of memory refuses the one reply, with why; so does a full queue.
TEST(ReplyRendererTest, AnAllocationFailureOrAFullQueueIsAnErrorReply) {
  std::shared_ptr<const RenderedText> failed =
      renderHere([]() -> std::string { throw std::bad_alloc(); });
  ASSERT_TRUE(failed->ready());
  EXPECT_EQ(failed->result().status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(drainReply(*renderedReply(failed)),
              ::testing::AllOf(HasSubstr("\"ok\":false"), HasSubstr("out of memory")));

  ReplyRenderer renderer;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::promise<void> started;
  renderer.render([&, released] {
    started.set_value();
    released.wait();
    return std::string();
  });
  started.get_future().wait();
  std::vector<std::shared_ptr<const RenderedText>> queued;
  for (size_t i = 0; i < ReplyRenderer::kMaxQueued; ++i) {
    queued.push_back(renderer.render([] { return std::string("{}"); }));
  }
  std::shared_ptr<const RenderedText> refused = renderer.render([] { return std::string("{}"); });
  ASSERT_TRUE(refused->ready());
  EXPECT_THAT(std::string(refused->result().status().message()),
              HasSubstr("already rendering 16 replies"));
  release.set_value();
  for (const auto& text : queued) EXPECT_EQ(drainReply(*renderedReply(text)), "{}");
}

}  // namespace
}  // namespace berth
