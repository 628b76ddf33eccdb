#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "absl/time/time.h"
#include "berth/util/background_thread.h"

namespace berth {

// berthd's side of systemd's service protocol, sd_notify(3), for a Type=notify unit
// (docs/appliance.md):
//   - READY=1 once the workers forward, with a STATUS= line saying so;
//   - WATCHDOG=1 from the management loop every half of the unit's WatchdogSec, so that a loop
//     that stops turning stops the pings and systemd restarts the service;
//   - STOPPING=1 when a stop begins.
// Outside systemd (no NOTIFY_SOCKET) there is none: fromEnvironment() returns null.
//
// libsystemd sends each message on a blocking socket, and the management loop never waits: the
// loop posts each message to a thread of its own (at most a few queued; a message that finds
// the queue full is dropped, as a late ping would be). Only the loop posts pings, so they stop
// with it; they go on while a stop withdraws BGP routes, for the loop still turns.
class SystemdNotifier {
 public:
  // From NOTIFY_SOCKET and WATCHDOG_USEC/WATCHDOG_PID (sd_watchdog_enabled(3)); null when
  // systemd did not ask for notifications.
  static std::unique_ptr<SystemdNotifier> fromEnvironment();

  // Once: the workers forward. `status` is shown by systemctl status.
  void ready(const std::string& status);
  bool isReady() const { return ready_; }
  // Each turn of the management loop: a watchdog ping when half the interval has passed.
  void turn(absl::Time now);
  // A stop has begun.
  void stopping();

  // The watchdog's interval; zero when the unit has none.
  absl::Duration watchdogInterval() const { return watchdog_interval_; }

 private:
  explicit SystemdNotifier(absl::Duration watchdog_interval);
  void post(std::string message);

  absl::Duration watchdog_interval_;
  absl::Time last_ping_ = absl::InfinitePast();
  bool ready_ = false;
  bool stopping_ = false;
  BackgroundThread sender_;
};

}  // namespace berth
