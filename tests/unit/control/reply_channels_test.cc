// The management loop's ways out (control/reply_channels.h). Pinned: the control socket is
// mode 0600 and the read-only one 0666 without a group; each socket's requests go to its own
// handler; the read-only socket's `stats` is rendered at most once an interval for every client;
// `backends` shares a rendering under way of the same snapshot and renders anew once it is done
// or the snapshot changed; replies that gather on the loop gather one every other turn; without the
// renderer thread, a rendering runs in place.

#include "berth/control/reply_channels.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

namespace berth {
namespace {

class ReplyChannelsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/berth-reply-channels-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  ControlSocketPaths paths() const {
    return {.control = directory_ + "/control.sock",
            .read_only = directory_ + "/read.sock",
            .read_only_group = std::nullopt};
  }
  static int connectTo(const std::string& path) {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return fd;
  }
  // Sends `line` on `fd` and serves the channels until the reply's newline arrives.
  static std::string request(ReplyChannels& channels, int fd, const std::string& line,
                             const ControlSocket::Handler& control,
                             const ControlSocket::Handler& read_only) {
    EXPECT_EQ(send(fd, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
    std::string reply;
    for (int i = 0; i < 100000 && (reply.empty() || reply.back() != '\n'); ++i) {
      channels.serve(control, read_only, [] { return renderHere([] { return std::string(); }); });
      char buffer[4096];
      ssize_t got;
      while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
        reply.append(buffer, static_cast<size_t>(got));
      }
    }
    return reply;
  }

  std::string directory_;
  std::vector<std::string> logged_;
  ReplyChannels::Log log_ = [this](const std::string& line) { logged_.push_back(line); };
};

ControlSocket::Handler answering(std::string text) {
  return [text](const ControlRequest&) { return wholeReply(text); };
}

TEST_F(ReplyChannelsTest, EachSocketHasItsModeAndItsOwnHandler) {
  ReplyChannels channels(paths(), log_);
  ASSERT_TRUE(channels.openSockets().ok());
  struct stat control {};
  struct stat read_only {};
  ASSERT_EQ(stat(paths().control.c_str(), &control), 0);
  ASSERT_EQ(stat(paths().read_only.c_str(), &read_only), 0);
  EXPECT_EQ(control.st_mode & 0777, 0600u);
  EXPECT_EQ(read_only.st_mode & 0777, 0666u);
  ASSERT_EQ(logged_.size(), 2u);
  EXPECT_EQ(logged_[0], "control socket: " + paths().control);

  const int to_control = connectTo(paths().control);
  const int to_read_only = connectTo(paths().read_only);
  EXPECT_EQ(request(channels, to_control, "{\"command\":\"drain\"}\n", answering("{\"from\":1}"),
                    answering("{\"from\":2}")),
            "{\"from\":1}\n");
  EXPECT_EQ(request(channels, to_read_only, "{\"command\":\"stats\"}\n", answering("{\"from\":1}"),
                    answering("{\"from\":2}")),
            "{\"from\":2}\n");
  close(to_control);
  close(to_read_only);
  channels.closeSockets();
  EXPECT_EQ(channels.control(), nullptr);
  EXPECT_EQ(channels.readOnly(), nullptr);
}

TEST_F(ReplyChannelsTest, ReadOnlyStatsAreRenderedAtMostOnceAnInterval) {
  ReplyChannels channels(paths(), log_);
  int renders = 0;
  const ReplyChannels::Render render = [&] {
    ++renders;
    return renderHere([] { return std::string("stats"); });
  };
  const absl::Time start = absl::FromUnixSeconds(1000);
  const auto first = channels.sharedStats(start, render);
  EXPECT_EQ(channels.sharedStats(start + absl::Milliseconds(999), render), first);
  EXPECT_EQ(renders, 1);
  EXPECT_NE(channels.sharedStats(start + ReplyChannels::kReadOnlyStatsInterval, render), first);
  EXPECT_EQ(renders, 2);
}

TEST_F(ReplyChannelsTest, BackendsShareARenderingUnderWayOfTheSameSnapshot) {
  ReplyChannels channels(paths(), log_);
  std::vector<std::shared_ptr<RenderedText>> made;
  const ReplyChannels::Render under_way = [&] {
    made.push_back(std::make_shared<RenderedText>());
    return made.back();
  };
  const auto first = channels.sharedBackends(5, under_way);
  EXPECT_EQ(channels.sharedBackends(5, under_way), first) << "under way: shared";
  EXPECT_EQ(made.size(), 1u);
  EXPECT_NE(channels.sharedBackends(6, under_way), first) << "another snapshot: anew";
  EXPECT_EQ(made.size(), 2u);
  made.back()->set(std::make_shared<const std::string>("done"));
  channels.sharedBackends(6, under_way);
  EXPECT_EQ(made.size(), 3u) << "done: the next request gets a fresh rendering";
}

// Three requests whose replies gather figures on the loop, arriving together: one gathers every
// other turn of the loop, so that `announce` or `status`, arriving during a turn that gathers,
// is answered on the next without waiting behind another gathering; each reply comes whole once
// its rendering is done. Outside a turn, a reply gathers at once.
TEST_F(ReplyChannelsTest, RepliesThatGatherOnTheLoopGatherEveryOtherTurn) {
  ReplyChannels channels(paths(), log_);
  ASSERT_TRUE(channels.openSockets().ok());
  int gathered = 0;
  const ControlSocket::Handler gathering = [&](const ControlRequest&) {
    return channels.gatheredReply([&gathered] {
      ++gathered;
      return renderHere([] { return std::string("{\"ok\":true}"); });
    });
  };
  const ReplyChannels::Render metrics = [] { return renderHere([] { return std::string(); }); };
  std::vector<int> clients;
  for (int i = 0; i < 3; ++i) {
    clients.push_back(connectTo(paths().control));
    const std::string line = "{\"command\":\"stats\"}\n";
    ASSERT_EQ(send(clients.back(), line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
  }
  for (int expected : {1, 1, 2, 2, 3, 3}) {
    channels.serve(gathering, gathering, metrics);
    EXPECT_EQ(gathered, expected) << "one gathering every other turn";
  }
  for (int client : clients) {
    std::string reply;
    for (int i = 0; i < 1000 && (reply.empty() || reply.back() != '\n'); ++i) {
      channels.serve(gathering, gathering, metrics);
      char buffer[256];
      const ssize_t got = recv(client, buffer, sizeof(buffer), MSG_DONTWAIT);
      if (got > 0) reply.append(buffer, static_cast<size_t>(got));
    }
    EXPECT_EQ(reply, "{\"ok\":true}\n");
    close(client);
  }
  std::unique_ptr<ReplyStream> outside = gathering(ControlRequest{});
  EXPECT_EQ(drainReply(*outside), "{\"ok\":true}");
  EXPECT_EQ(gathered, 4);
}

TEST_F(ReplyChannelsTest, WithoutTheRendererThreadARenderingRunsInPlace) {
  ReplyChannels channels(paths(), log_);
  const auto text = channels.renderOffLoop([] { return std::string("here"); });
  ASSERT_TRUE(text->ready());
  EXPECT_EQ(**text->result(), "here");
}

}  // namespace
}  // namespace berth
