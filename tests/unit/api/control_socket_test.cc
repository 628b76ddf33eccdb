#include "berth/api/control_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace berth {
namespace {

using ::testing::HasSubstr;

// What is at the socket's path before berthd starts decides whether it may take the path: only
// a socket nobody answers on (left by a berthd that is gone) is replaced.
class ControlSocketPathTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/berth-control-socket-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    directory_ = pattern;
    path_ = directory_ + "/berth.sock";
  }
  void TearDown() override { std::filesystem::remove_all(directory_); }

  // A socket file bound and closed: what a SIGKILLed berthd leaves.
  void leaveStaleSocket() const {
    const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    close(fd);
  }

  std::string directory_;
  std::string path_;
};

TEST_F(ControlSocketPathTest, AStaleSocketIsReplaced) {
  leaveStaleSocket();
  absl::StatusOr<std::unique_ptr<ControlSocket>> opened = ControlSocket::open(path_);
  ASSERT_TRUE(opened.ok()) << opened.status();
  struct stat status;
  ASSERT_EQ(stat(path_.c_str(), &status), 0);
  EXPECT_TRUE(S_ISSOCK(status.st_mode));
  EXPECT_EQ(status.st_mode & 0777, 0600u);
}

TEST_F(ControlSocketPathTest, ARunningBerthdsSocketIsAnError) {
  absl::StatusOr<std::unique_ptr<ControlSocket>> first = ControlSocket::open(path_);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<ControlSocket>> second = ControlSocket::open(path_);
  ASSERT_FALSE(second.ok());
  EXPECT_THAT(second.status().message(), HasSubstr("another berthd answers there"));
}

TEST_F(ControlSocketPathTest, ARegularFileIsLeftAsItIs) {
  { std::ofstream(path_) << "services: []\n"; }
  absl::StatusOr<std::unique_ptr<ControlSocket>> opened = ControlSocket::open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("a file that is not a socket is there"));
  EXPECT_THAT(opened.status().message(), HasSubstr(path_));
  std::ifstream kept(path_);
  std::string line;
  std::getline(kept, line);
  EXPECT_EQ(line, "services: []");
}

TEST_F(ControlSocketPathTest, ALinkIsNotFollowedNorRemoved) {
  const std::string target = directory_ + "/elsewhere";
  { std::ofstream(target) << "keep me\n"; }
  ASSERT_EQ(symlink(target.c_str(), path_.c_str()), 0);
  absl::StatusOr<std::unique_ptr<ControlSocket>> opened = ControlSocket::open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("a symbolic link that is not a socket"));
  EXPECT_TRUE(std::filesystem::is_symlink(path_));
  EXPECT_TRUE(std::filesystem::exists(target));
}

TEST_F(ControlSocketPathTest, AFolderIsLeftAsItIs) {
  ASSERT_TRUE(std::filesystem::create_directory(path_));
  absl::StatusOr<std::unique_ptr<ControlSocket>> opened = ControlSocket::open(path_);
  ASSERT_FALSE(opened.ok());
  EXPECT_THAT(opened.status().message(), HasSubstr("a folder that is not a socket"));
  EXPECT_TRUE(std::filesystem::is_directory(path_));
}

// Serving: the socket never waits on a client, and bounds what one call of serve() does.
class ControlSocketServeTest : public ControlSocketPathTest {
 protected:
  void SetUp() override {
    ControlSocketPathTest::SetUp();
    absl::StatusOr<std::unique_ptr<ControlSocket>> opened = ControlSocket::open(options());
    ASSERT_TRUE(opened.ok()) << opened.status();
    socket_ = *std::move(opened);
  }
  virtual ControlSocketOptions options() {
    ControlSocketOptions options;
    options.path = path_;
    return options;
  }

  int connectClient(int receive_buffer = 0) const {
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0);
    if (receive_buffer > 0) {
      setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof(receive_buffer));
    }
    sockaddr_un address{};
    address.sun_family = AF_UNIX;
    std::strncpy(address.sun_path, path_.c_str(), sizeof(address.sun_path) - 1);
    EXPECT_EQ(connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    return fd;
  }

  // Sends `line` on `fd` and serves until the reply's newline arrives; the reply, or "" when
  // it did not come within `serves` calls.
  std::string request(int fd, const std::string& line, const ControlSocket::Handler& handler,
                      int serves = 100000) {
    EXPECT_EQ(send(fd, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
    std::string reply;
    for (int i = 0; i < serves; ++i) {
      socket_->serve(handler);
      char buffer[65536];
      ssize_t got;
      while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
        reply.append(buffer, static_cast<size_t>(got));
      }
      if (!reply.empty() && reply.back() == '\n') return reply;
    }
    return "";
  }

  std::unique_ptr<ControlSocket> socket_;
};

// A reply of `pieces` pieces of `piece` bytes each, counting what each serve() asked of it.
class CountingReply : public ReplyStream {
 public:
  CountingReply(size_t pieces, size_t piece, size_t& produced)
      : pieces_(pieces), piece_(piece), produced_(produced) {}
  Progress next(std::string& out, size_t) override {
    out.append(piece_, static_cast<char>('a' + pieces_ % 26));
    produced_ += piece_;
    return --pieces_ == 0 ? Progress::kDone : Progress::kMore;
  }

 private:
  size_t pieces_;
  size_t piece_;
  size_t& produced_;
};

TEST_F(ControlSocketServeTest, ALargeReplyComesInBoundedPiecesAndArrivesWhole) {
  size_t produced = 0;
  const auto handler = [&](const ControlRequest&) -> std::unique_ptr<ReplyStream> {
    return std::make_unique<CountingReply>(4096, 1024, produced);
  };
  const int fd = connectClient(4096);
  const std::string line = "{\"command\":\"table\"}\n";
  ASSERT_EQ(send(fd, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
  std::string reply;
  size_t most_in_one_serve = 0;
  for (int i = 0; i < 100000 && (reply.empty() || reply.back() != '\n'); ++i) {
    const size_t before = produced;
    socket_->serve(handler);
    most_in_one_serve = std::max(most_in_one_serve, produced - before);
    char buffer[8192];
    const ssize_t got = recv(fd, buffer, sizeof(buffer), 0);
    if (got > 0) reply.append(buffer, static_cast<size_t>(got));
  }
  close(fd);
  ASSERT_EQ(reply.size(), 4096u * 1024u + 1);
  for (size_t piece = 0; piece < 4096; ++piece) {
    ASSERT_EQ(reply[piece * 1024], static_cast<char>('a' + (4096 - piece) % 26)) << piece;
  }
  // The kernel takes a few hundred KiB before the reader reads; past that, never more than the
  // budget per call.
  EXPECT_LE(most_in_one_serve, ControlSocket::kBytesPerServe + 1024);
}

TEST_F(ControlSocketServeTest, AReplyThatWaitsLetsServeReturn) {
  bool ready = false;
  const auto handler = [&](const ControlRequest&) {
    return pollingReply([&]() -> std::optional<std::string> {
      if (!ready) return std::nullopt;
      return std::string("{\"ok\":true}");
    });
  };
  const int fd = connectClient();
  EXPECT_EQ(request(fd, "{\"command\":\"explain\"}\n", handler, 50), "");
  ready = true;
  EXPECT_EQ(request(fd, "", handler), "{\"ok\":true}\n");
  close(fd);
}

// The reply patience is the client's time to read: a reply waiting on berthd (a reload's build
// under a loaded CPU) is not cut however long it waits, while a client that stops reading is.
class ShortPatienceTest : public ControlSocketServeTest {
 protected:
  ControlSocketOptions options() override {
    ControlSocketOptions options = ControlSocketServeTest::options();
    options.reply_patience = absl::Milliseconds(100);
    return options;
  }
};

TEST_F(ShortPatienceTest, BerthdsOwnWaitIsNotTheClientsButNotReadingIs) {
  bool ready = false;
  const auto waiting = [&](const ControlRequest&) {
    return pollingReply([&]() -> std::optional<std::string> {
      if (!ready) return std::nullopt;
      return std::string(4 << 20, 'x');
    });
  };
  const int fd = connectClient(4096);
  EXPECT_EQ(request(fd, "{\"command\":\"reload\"}\n", waiting, 1), "");
  absl::SleepFor(absl::Milliseconds(300));
  socket_->serve(waiting);
  EXPECT_EQ(socket_->counts().cut_at_deadline, 0u) << "waiting on berthd is not the client's";
  ready = true;
  // The reply starts; the client reads nothing, and is cut once its patience has passed.
  socket_->serve(waiting);
  absl::SleepFor(absl::Milliseconds(300));
  socket_->serve(waiting);
  EXPECT_EQ(socket_->counts().cut_at_deadline, 1u);
  EXPECT_EQ(socket_->connections(), 0u);
  close(fd);
}

// Large replies to several clients share each serve()'s budget, so each one's reply comes over
// many calls, however fast its client reads: that wait is berthd's, and no client that keeps
// reading is cut, however long the replies take.
TEST_F(ShortPatienceTest, WaitingForTheServeBudgetIsNotTheClients) {
  size_t produced = 0;
  const auto handler = [&](const ControlRequest&) -> std::unique_ptr<ReplyStream> {
    return std::make_unique<CountingReply>(2048, 1024, produced);
  };
  const std::string line = "{\"command\":\"backends\"}\n";
  std::vector<int> clients;
  std::vector<std::string> replies(3);
  for (size_t i = 0; i < replies.size(); ++i) {
    clients.push_back(connectClient());
    ASSERT_EQ(send(clients[i], line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
  }
  auto complete = [&] {
    return std::all_of(replies.begin(), replies.end(), [](const std::string& reply) {
      return !reply.empty() && reply.back() == '\n';
    });
  };
  // Some 24 calls of serve() 20 ms apart: five times the patience in all.
  for (int call = 0; call < 200 && !complete(); ++call) {
    socket_->serve(handler);
    for (size_t i = 0; i < clients.size(); ++i) {
      char buffer[65536];
      ssize_t got;
      while ((got = recv(clients[i], buffer, sizeof(buffer), 0)) > 0) {
        replies[i].append(buffer, static_cast<size_t>(got));
      }
    }
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ(socket_->counts().cut_at_deadline, 0u);
  for (size_t i = 0; i < clients.size(); ++i) {
    EXPECT_EQ(replies[i].size(), 2048u * 1024u + 1) << "client " << i;
    close(clients[i]);
  }
}

// A client that reads all it is sent between calls keeps its place, even when every call
// fills its socket: what measures the client is whether it takes what is written, not whether
// one call's share happened to fit the socket's buffer.
TEST_F(ShortPatienceTest, AClientThatReadsEverythingIsNotCutWhenEachCallFillsItsSocket) {
  size_t produced = 0;
  const auto handler = [&](const ControlRequest&) -> std::unique_ptr<ReplyStream> {
    return std::make_unique<CountingReply>(4096, 1024, produced);
  };
  const int fd = connectClient();
  const std::string line = "{\"command\":\"table\"}\n";
  ASSERT_EQ(send(fd, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
  std::string reply;
  int calls_that_filled_the_socket = 0;
  for (int call = 0; call < 200 && (reply.empty() || reply.back() != '\n'); ++call) {
    socket_->serve(handler);
    char buffer[65536];
    ssize_t got;
    size_t taken = 0;
    while ((got = recv(fd, buffer, sizeof(buffer), 0)) > 0) {
      reply.append(buffer, static_cast<size_t>(got));
      taken += static_cast<size_t>(got);
    }
    if (got == 0) break;  // cut
    if (taken < ControlSocket::kBytesPerServe && !reply.empty() && reply.back() != '\n') {
      ++calls_that_filled_the_socket;
    }
    absl::SleepFor(absl::Milliseconds(40));
  }
  close(fd);
  EXPECT_GT(calls_that_filled_the_socket, 3) << "the case needs calls whose share overflows";
  EXPECT_EQ(socket_->counts().cut_at_deadline, 0u);
  EXPECT_EQ(reply.size(), 4096u * 1024u + 1);
}

TEST_F(ControlSocketServeTest, IdleConnectionsMakeRoomForOneWithARequest) {
  const auto handler = [](const ControlRequest& request) {
    return wholeReply(absl::StrCat("{\"ok\":true,\"command\":\"", request.command, "\"}"));
  };
  std::vector<int> idle;
  for (size_t i = 0; i < ControlSocket::kMaxClients + 10; ++i) {
    idle.push_back(connectClient());
    socket_->serve(handler);
  }
  EXPECT_EQ(socket_->connections(), ControlSocket::kMaxClients);
  const int fd = connectClient();
  EXPECT_EQ(request(fd, "{\"command\":\"announce\"}\n", handler),
            "{\"ok\":true,\"command\":\"announce\"}\n");
  close(fd);
  EXPECT_EQ(socket_->counts().evicted_idle, 11u);
  EXPECT_EQ(socket_->counts().refused_full, 0u);
  for (int other : idle) close(other);
}

// The churn an attacker can make: connections opened faster than the loop turns. A client that
// sent its request is never the one evicted, even when it came in the same burst.
TEST_F(ControlSocketServeTest, ARequestSentAmidABurstOfIdleConnectionsIsAnswered) {
  const auto handler = [](const ControlRequest&) { return wholeReply("{\"ok\":true}"); };
  std::vector<int> idle;
  for (size_t i = 0; i < ControlSocket::kMaxClients; ++i) idle.push_back(connectClient());
  socket_->serve(handler);
  const int fd = connectClient();
  const std::string line = "{\"command\":\"status\"}\n";
  ASSERT_EQ(send(fd, line.data(), line.size(), 0), static_cast<ssize_t>(line.size()));
  for (size_t i = 0; i < 3 * ControlSocket::kMaxClients; ++i) idle.push_back(connectClient());
  EXPECT_EQ(request(fd, "", handler), "{\"ok\":true}\n");
  close(fd);
  for (int other : idle) close(other);
}

class ReadOnlySocketTest : public ControlSocketServeTest {
 protected:
  ControlSocketOptions options() override {
    ControlSocketOptions options;
    options.path = path_;
    options.mode = 0666;
    options.commands = readOnlyCommands();
    options.role = "read-only socket";
    return options;
  }
};

TEST_F(ReadOnlySocketTest, ServesOnlyItsCommandsToAnyone) {
  struct stat status;
  ASSERT_EQ(stat(path_.c_str(), &status), 0);
  EXPECT_EQ(status.st_mode & 0777, 0666u);
  const auto handler = [](const ControlRequest&) { return wholeReply("{\"ok\":true}"); };
  int fd = connectClient();
  EXPECT_EQ(request(fd, "{\"command\":\"status\"}\n", handler), "{\"ok\":true}\n");
  close(fd);
  fd = connectClient();
  const std::string refused = request(fd, "{\"command\":\"drain\",\"backend\":\"b\"}\n", handler);
  close(fd);
  EXPECT_THAT(refused, HasSubstr("\"ok\":false"));
  EXPECT_THAT(refused, HasSubstr("serves only status, stats, announce; 'drain' needs berthd's "
                                 "control socket"));
}

TEST(ReadOnlySocketPathTest, SitsBesideTheControlSocket) {
  EXPECT_EQ(defaultReadOnlySocketPath("/run/berth/berth.sock"), "/run/berth/berth-ro.sock");
  EXPECT_EQ(defaultReadOnlySocketPath("/tmp/control"), "/tmp/control-ro");
}

}  // namespace
}  // namespace berth
