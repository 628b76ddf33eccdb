#include "berth/control/control_socket.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

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

}  // namespace
}  // namespace berth
