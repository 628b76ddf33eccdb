#pragma once

#include <sys/types.h>

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "berth/util/background_thread.h"

namespace berth {

// Keeps a small file up to date away from berthd's management loop, which must not wait on a
// disk: save() hands over the newest text and returns at once; a background thread writes it
// whole (util/whole_file.h). Saves that arrive while a write runs collapse into one write of the
// newest.
class LatestFileWriter {
 public:
  LatestFileWriter(std::string path, mode_t mode);
  // Waits for the write that runs, and writes what is still pending, so that the newest saved
  // text is on disk at a clean stop.
  ~LatestFileWriter();
  LatestFileWriter(const LatestFileWriter&) = delete;
  LatestFileWriter& operator=(const LatestFileWriter&) = delete;

  const std::string& path() const { return path_; }
  // Queues `text` to be written. Never waits.
  void save(std::string text);
  // Queues the text `render` gives, rendered on the writer's thread: for a file whose text takes
  // a while to make (a table generation's). `render` must not touch what the caller may change.
  void saveRendered(std::function<std::string()> render);
  // The outcome of the last write that finished; OK before any write.
  absl::Status lastWrite() const;

 private:
  void writeNewest();

  const std::string path_;
  const mode_t mode_;
  mutable std::mutex mutex_;
  std::function<std::string()> pending_;  // what renders the text not yet written, or empty
  bool writing_ = false;
  absl::Status last_write_;
  // Last, so that it stops (and finishes its job) before the members it uses go.
  std::unique_ptr<BackgroundThread> thread_;
};

}  // namespace berth
