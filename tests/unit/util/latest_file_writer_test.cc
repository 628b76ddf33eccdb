// LatestFileWriter (util/latest_file_writer.h). Pinned:
// - saved text reaches the file, and the newest of several saves is what stays;
// - a rendered save runs its render on the writer's thread, never the caller's;
// - what is still pending at destruction is written before the destructor returns.

#include "berth/util/latest_file_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"

namespace berth {
namespace {

std::string contentsOf(const std::string& path) {
  std::ifstream file(path);
  std::stringstream contents;
  contents << file.rdbuf();
  return contents.str();
}

std::string tempPath(const char* name) {
  return absl::StrCat(::testing::TempDir(), "/latest-", getpid(), "-", name);
}

// Waits up to 10 s for `path` to hold `text`.
bool holds(const std::string& path, const std::string& text) {
  const absl::Time deadline = absl::Now() + absl::Seconds(10);
  while (absl::Now() < deadline) {
    if (contentsOf(path) == text) return true;
    absl::SleepFor(absl::Milliseconds(5));
  }
  return false;
}

TEST(LatestFileWriterTest, TheNewestSaveStays) {
  const std::string path = tempPath("newest");
  {
    LatestFileWriter writer(path, 0644);
    for (int i = 0; i < 50; ++i) writer.save(absl::StrCat("version ", i, "\n"));
    EXPECT_TRUE(holds(path, "version 49\n"));
    EXPECT_TRUE(writer.lastWrite().ok());
  }
  std::remove(path.c_str());
}

TEST(LatestFileWriterTest, RendersOnTheWritersThread) {
  const std::string path = tempPath("rendered");
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> on_caller{false};
  {
    LatestFileWriter writer(path, 0644);
    writer.saveRendered([&] {
      on_caller = std::this_thread::get_id() == caller;
      return std::string("rendered\n");
    });
    EXPECT_TRUE(holds(path, "rendered\n"));
  }
  EXPECT_FALSE(on_caller.load());
  std::remove(path.c_str());
}

TEST(LatestFileWriterTest, WhatIsPendingIsWrittenAtDestruction) {
  const std::string path = tempPath("pending");
  {
    LatestFileWriter writer(path, 0644);
    for (int i = 0; i < 20; ++i) {
      writer.saveRendered([i] { return absl::StrCat("pending ", i, "\n"); });
    }
  }
  EXPECT_EQ(contentsOf(path), "pending 19\n");
  std::remove(path.c_str());
}

}  // namespace
}  // namespace berth
