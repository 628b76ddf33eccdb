#include "berth/util/async_log.h"

#include <fcntl.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <string>
#include <thread>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "absl/strings/string_view.h"
#include "absl/strings/strip.h"

namespace berth {
namespace {

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
// and past the queue's bound lines are dropped, counted and reported once it drains. The caller
// is not held: nobody reads the pipe until every line is written, so a caller that waited on
// the writer would never get there. Drops may come in more than one run (the writer can take a
// batch between them), so each run has its note and the notes add up to the count.
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
    // The pipe holds 64 KiB: the writer is stuck after a few dozen lines, the caller is not.
    for (size_t i = 0; i < lines; ++i) log.write(line + "\n");
    dropped = log.dropped();
    EXPECT_GT(dropped, 0u);
    EXPECT_LT(dropped, lines);
    // Someone reads at last; the log's destructor writes out what is queued.
    reader = std::thread([&] { written = readAll(pipe_fds[0]); });
  }
  close(pipe_fds[1]);
  reader.join();
  close(pipe_fds[0]);

  const std::string note_prefix = "test: ";
  const std::string note_suffix = " log line(s) dropped: the log was not being read fast enough";
  size_t whole_lines = 0;
  uint64_t reported = 0;
  size_t notes = 0;
  for (absl::string_view text : absl::StrSplit(written, '\n', absl::SkipEmpty())) {
    if (text == line) {
      ++whole_lines;
      continue;
    }
    ASSERT_TRUE(absl::ConsumePrefix(&text, note_prefix) && absl::ConsumeSuffix(&text, note_suffix))
        << "neither a logged line nor a note of drops: " << text.substr(0, 80);
    uint64_t count = 0;
    ASSERT_TRUE(absl::SimpleAtoi(text, &count)) << text;
    EXPECT_GT(count, 0u);
    reported += count;
    ++notes;
  }
  EXPECT_GE(notes, 1u);
  EXPECT_EQ(reported, dropped);
  EXPECT_EQ(whole_lines, lines - dropped);
  EXPECT_EQ(written.back(), '\n');
}

}  // namespace
}  // namespace berth
