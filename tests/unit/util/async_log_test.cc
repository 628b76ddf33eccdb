#include "berth/util/async_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <thread>

namespace berth {
namespace {

using ::testing::EndsWith;

// Everything readable on `fd` until it ends (the log's destructor has written all by then).
std::string readAll(int fd) {
  std::string out;
  char buffer[65536];
  ssize_t got;
  while ((got = read(fd, buffer, sizeof(buffer))) > 0) out.append(buffer, static_cast<size_t>(got));
  return out;
}

TEST(AsyncLogTest, WritesEveryLineInOrder) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  {
    AsyncLog log(pipe_fds[1], "test: ");
    for (int i = 0; i < 100; ++i) log.write("line " + std::to_string(i) + "\n");
    EXPECT_EQ(log.dropped(), 0u);
  }
  close(pipe_fds[1]);
  std::string expected;
  for (int i = 0; i < 100; ++i) expected += "line " + std::to_string(i) + "\n";
  EXPECT_EQ(readAll(pipe_fds[0]), expected);
  close(pipe_fds[0]);
}

// What the log pins: a destination nobody reads holds up the writer thread, never the caller,
// and past the queue's bound lines are dropped, counted and reported once it drains.
TEST(AsyncLogTest, AStuckReaderCostsLinesNotTheCallersTime) {
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const std::string line(999, 'x');
  const size_t lines = 2 * AsyncLog::kMaxQueuedLines + 200;
  std::string written;
  std::thread reader;
  uint64_t dropped = 0;
  {
    AsyncLog log(pipe_fds[1], "test: ");
    const auto started = std::chrono::steady_clock::now();
    for (size_t i = 0; i < lines; ++i) log.write(line + "\n");
    // The pipe holds 64 KiB: the writer is stuck after a few dozen lines, the caller is not.
    EXPECT_LT(std::chrono::steady_clock::now() - started, std::chrono::seconds(5));
    dropped = log.dropped();
    EXPECT_GT(dropped, 0u);
    EXPECT_LT(dropped, lines);
    // Someone reads at last; the log's destructor writes out what is queued.
    reader = std::thread([&] { written = readAll(pipe_fds[0]); });
  }
  close(pipe_fds[1]);
  reader.join();
  close(pipe_fds[0]);
  const std::string note = "test: " + std::to_string(dropped) +
                           " log line(s) dropped: the log was not being read fast enough\n";
  EXPECT_THAT(written, EndsWith(note));
  EXPECT_EQ(written.size() - note.size(), (lines - dropped) * 1000);
}

}  // namespace
}  // namespace berth
