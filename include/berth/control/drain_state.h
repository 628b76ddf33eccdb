#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/control/service_state.h"
#include "berth/util/background_thread.h"

namespace berth {

// The drains made with `berthctl drain`, kept in a small file so that they survive a restart: a
// supervisor restarts berthd after a crash, and a drained backend must not take new flows again
// because of it (docs/architecture.md, per-service state). Drains made by `weight: 0` live in the
// config.
//
// The file is JSON, one version number and the drained backends by service:
//   {"version":1,"drains":{"web":["web-02","web-07"]}}
// Services and backends the config no longer has are dropped when it is read.
inline constexpr int kDrainStateVersion = 1;

// The file's text: services and backends in name order, so equal drains give equal files.
std::string renderDrainState(const DrainsByService& drains);
// The drains in `text`. InvalidArgument naming what is wrong: not JSON, another version, a
// field of the wrong kind.
absl::StatusOr<DrainsByService> parseDrainState(absl::string_view text);
// The drains in the file at `path`; none when there is no such file. Errors name the file.
absl::StatusOr<DrainsByService> loadDrainState(const std::string& path);

// Writes the drain state away from the management loop, which must not wait on a disk: save()
// hands over the newest drains and returns at once; a background thread writes them whole
// (util/whole_file.h). Saves that arrive while a write runs collapse into one write of the newest.
class DrainStateWriter {
 public:
  explicit DrainStateWriter(std::string path);
  // Waits for the write that runs, so the newest saved drains are on disk at a clean stop.
  ~DrainStateWriter();

  const std::string& path() const { return path_; }
  // Queues `drains` to be written. Never waits.
  void save(const DrainsByService& drains);
  // The outcome of the last write that finished; OK before any write.
  absl::Status lastWrite() const;

 private:
  void writeNewest();

  const std::string path_;
  mutable std::mutex mutex_;
  std::optional<std::string> pending_;  // text not yet written
  bool writing_ = false;
  absl::Status last_write_;
  // Last, so that it stops (and finishes its job) before the members it uses go.
  std::unique_ptr<BackgroundThread> thread_;
};

}  // namespace berth
