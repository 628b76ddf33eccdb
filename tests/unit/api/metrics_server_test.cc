#include "berth/api/metrics_server.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cstring>
#include <future>
#include <new>
#include <string>
#include <vector>

namespace berth {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

int connectTo(const MetricsServer& server) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(server.endpoint().port);
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
  return fd;
}

// Sends `request` (possibly in pieces) to the server and serves until the server closes the
// connection, all on this thread: the server never blocks, so neither does this.
std::string scrape(
    MetricsServer& server, const std::string& request, size_t piece = 0,
    const MetricsServer::Renderer& render = [] {
      return renderHere([] { return std::string("berth_up 1\n"); });
    }) {
  const int fd = connectTo(server);
  fcntl(fd, F_SETFL, O_NONBLOCK);
  const size_t step = piece == 0 ? request.size() : piece;
  size_t sent = 0;
  std::string reply;
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (std::chrono::steady_clock::now() < give_up) {
    if (sent < request.size()) {
      const size_t n = std::min(step, request.size() - sent);
      sent += static_cast<size_t>(send(fd, request.data() + sent, n, 0));
    }
    server.serve(render);
    char buffer[4096];
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got > 0) reply.append(buffer, static_cast<size_t>(got));
    if (got == 0) break;
  }
  close(fd);
  return reply;
}

std::unique_ptr<MetricsServer> openLoopback(
    absl::Duration render_interval = MetricsServer::kRenderInterval) {
  absl::StatusOr<std::unique_ptr<MetricsServer>> server =
      MetricsServer::open(*Endpoint::parse("127.0.0.1:0"), render_interval);
  EXPECT_TRUE(server.ok()) << server.status();
  EXPECT_NE((*server)->endpoint().port, 0) << "the kernel's port is reported";
  return *std::move(server);
}

TEST(MetricsServerTest, GetMetricsAnswersTheRenderedTextInPrometheusFormat) {
  auto server = openLoopback();
  const std::string reply = scrape(*server, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(reply, HasSubstr("Content-Type: text/plain; version=0.0.4"));
  EXPECT_THAT(reply, HasSubstr("Content-Length: 11\r\n"));
  EXPECT_THAT(reply, ::testing::EndsWith("\r\n\r\nberth_up 1\n"));
}

TEST(MetricsServerTest, ARequestArrivingInPiecesIsAnsweredOnceComplete) {
  auto server = openLoopback();
  EXPECT_THAT(scrape(*server, "GET /metrics?x=1 HTTP/1.0\r\n\r\n", 3),
              StartsWith("HTTP/1.1 200 OK"));
}

TEST(MetricsServerTest, OtherPathsMethodsAndGarbageGetTheirHttpErrors) {
  auto server = openLoopback();
  EXPECT_THAT(scrape(*server, "GET /admin HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404"));
  EXPECT_THAT(scrape(*server, "POST /metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 405"));
  EXPECT_THAT(scrape(*server, "hello\r\n\r\n"), StartsWith("HTTP/1.1 400"));
  EXPECT_THAT(scrape(*server, std::string(9000, 'a')), StartsWith("HTTP/1.1 431"));
  const std::string head = scrape(*server, "HEAD /metrics HTTP/1.1\r\n\r\n");
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200"));
  EXPECT_THAT(head, ::testing::EndsWith("\r\n\r\n")) << "no body for HEAD";
}

// Parallel scrapes cost sends, not renders: within the render interval every scrape gets the
// text rendered first.
TEST(MetricsServerTest, ScrapesWithinTheRenderIntervalShareOneRendering) {
  int renders = 0;
  const auto render = [&] {
    return renderHere([&] { return "berth_render " + std::to_string(++renders) + "\n"; });
  };
  auto server = openLoopback(absl::Hours(1));
  for (int i = 0; i < 3; ++i) {
    EXPECT_THAT(scrape(*server, "GET /metrics HTTP/1.1\r\n\r\n", 0, render),
                ::testing::EndsWith("berth_render 1\n"));
  }
  EXPECT_EQ(renders, 1);
  EXPECT_EQ(server->counts().renders, 1u);
  auto eager = openLoopback(absl::ZeroDuration());
  scrape(*eager, "GET /metrics HTTP/1.1\r\n\r\n", 0, render);
  EXPECT_THAT(scrape(*eager, "GET /metrics HTTP/1.1\r\n\r\n", 0, render),
              ::testing::EndsWith("berth_render 3\n"));
}

// A renderer that declines a turn (the loop has gathered figures for another reply on it) is
// asked again on the next: the scrape waits, and is answered once a rendering is done.
TEST(MetricsServerTest, AScrapeWaitsForATurnOnWhichTheRendererAgreesToRender) {
  int asked = 0;
  const auto render = [&]() -> std::shared_ptr<const RenderedText> {
    if (++asked < 4) return nullptr;
    return renderHere([] { return std::string("berth_up 1\n"); });
  };
  auto server = openLoopback(absl::Hours(1));
  EXPECT_THAT(scrape(*server, "GET /metrics HTTP/1.1\r\n\r\n", 0, render),
              ::testing::EndsWith("berth_up 1\n"));
  EXPECT_EQ(asked, 4);
  EXPECT_EQ(server->counts().renders, 1u);
}

// The text is rendered on another thread; a scrape waits for it without holding serve() up,
// and scrapes that arrive meanwhile share the same rendering.
TEST(MetricsServerTest, ScrapesWaitForARenderingUnderWayWithoutHoldingTheLoop) {
  ReplyRenderer renderer;
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  int renders = 0;
  const MetricsServer::Renderer render = [&] {
    ++renders;
    return renderer.render([released] {
      released.wait();
      return std::string("berth_slow 1\n");
    });
  };
  auto server = openLoopback(absl::Hours(1));
  std::vector<int> scrapers;
  for (int i = 0; i < 3; ++i) {
    scrapers.push_back(connectTo(*server));
    const std::string request = "GET /metrics HTTP/1.1\r\n\r\n";
    ASSERT_EQ(send(scrapers.back(), request.data(), request.size(), 0),
              static_cast<ssize_t>(request.size()));
  }
  // A serve() that waited for the rendering would never return: the rendering waits for
  // `release`, which comes only after these turns.
  for (int turn = 0; turn < 20; ++turn) server->serve(render);
  char buffer[256];
  for (int fd : scrapers) EXPECT_EQ(recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT), -1);
  release.set_value();
  for (int fd : scrapers) {
    std::string reply;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (std::chrono::steady_clock::now() < give_up) {
      server->serve(render);
      const ssize_t got = recv(fd, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (got > 0) reply.append(buffer, static_cast<size_t>(got));
      if (got == 0) break;
    }
    EXPECT_THAT(reply, ::testing::EndsWith("\r\n\r\nberth_slow 1\n"));
    close(fd);
  }
  EXPECT_EQ(renders, 1);
  EXPECT_EQ(server->counts().renders, 1u);
}

TEST(MetricsServerTest, ARenderingThatFailedIsAnswered503WithWhy) {
  auto server = openLoopback();
  const std::string reply = scrape(*server, "GET /metrics HTTP/1.1\r\n\r\n", 0, [] {
    return renderHere([]() -> std::string { throw std::bad_alloc(); });
  });
  EXPECT_THAT(reply, StartsWith("HTTP/1.1 503 Service Unavailable\r\n"));
  EXPECT_THAT(reply, HasSubstr("out of memory"));
}

// Any local user can connect to the metrics port: idle connections give way to new ones.
TEST(MetricsServerTest, IdleConnectionsMakeRoomForAScrape) {
  auto server = openLoopback();
  std::vector<int> idle;
  for (size_t i = 0; i < MetricsServer::kMaxClients + 5; ++i) {
    idle.push_back(connectTo(*server));
    server->serve([] { return renderHere([] { return std::string(); }); });
  }
  EXPECT_THAT(scrape(*server, "GET /metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 200 OK"));
  EXPECT_EQ(server->counts().evicted_idle, 6u);
  EXPECT_EQ(server->counts().refused_full, 0u);
  for (int fd : idle) close(fd);
}

TEST(MetricsServerTest, AnAddressInUseIsAClearError) {
  auto server = openLoopback();
  absl::StatusOr<std::unique_ptr<MetricsServer>> second = MetricsServer::open(server->endpoint());
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(
      std::string(second.status().message()),
      HasSubstr("metrics.listen " + server->endpoint().toString() + ": Address already in use"));
}

}  // namespace
}  // namespace berth
