#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/control/service_state.h"
#include "berth/util/latest_file_writer.h"

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

// Writes the drain state away from the management loop (util/latest_file_writer.h).
class DrainStateWriter {
 public:
  explicit DrainStateWriter(std::string path) : file_(std::move(path), 0644) {}

  const std::string& path() const { return file_.path(); }
  // The drains the last run kept, of the backends `services` still has, with a line to `log`
  // naming them. An unreadable file is logged and kept aside as `<path>.unreadable`, and none
  // are restored: a lost drain must not keep a whole balancer down, and the next drain writes a
  // new file.
  DrainsByService restore(const std::vector<ServiceConfig>& services,
                          const std::function<void(const std::string&)>& log) const;
  // Queues `drains` to be written. Never waits.
  void save(const DrainsByService& drains) { file_.save(renderDrainState(drains)); }
  // The outcome of the last write that finished; OK before any write.
  absl::Status lastWrite() const { return file_.lastWrite(); }

 private:
  LatestFileWriter file_;
};

}  // namespace berth
