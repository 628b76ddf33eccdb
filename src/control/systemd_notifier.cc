#include "berth/control/systemd_notifier.h"

#include <systemd/sd-daemon.h>

#include <cstdlib>
#include <utility>

namespace berth {
namespace {

// Messages waiting for the sender thread: a ready, a stop and a ping or two.
constexpr size_t kMaxQueued = 4;

}  // namespace

std::unique_ptr<SystemdNotifier> SystemdNotifier::fromEnvironment() {
  const char* socket = std::getenv("NOTIFY_SOCKET");
  if (socket == nullptr || *socket == '\0') return nullptr;
  uint64_t watchdog_usec = 0;
  // > 0 only when the watchdog is on and meant for this process (WATCHDOG_PID).
  if (sd_watchdog_enabled(0, &watchdog_usec) <= 0) watchdog_usec = 0;
  return std::unique_ptr<SystemdNotifier>(
      new SystemdNotifier(absl::Microseconds(static_cast<int64_t>(watchdog_usec))));
}

SystemdNotifier::SystemdNotifier(absl::Duration watchdog_interval)
    : watchdog_interval_(watchdog_interval), sender_(kMaxQueued) {}

void SystemdNotifier::post(std::string message) {
  sender_.post([message = std::move(message)] { sd_notify(0, message.c_str()); });
}

void SystemdNotifier::ready(const std::string& status) {
  if (ready_) return;
  ready_ = true;
  post("READY=1\nSTATUS=" + status);
}

void SystemdNotifier::turn(absl::Time now) {
  // systemd's advice: ping at half the interval, so that one late turn is not a restart.
  if (watchdog_interval_ == absl::ZeroDuration() || now - last_ping_ < watchdog_interval_ / 2) {
    return;
  }
  last_ping_ = now;
  post("WATCHDOG=1");
}

void SystemdNotifier::stopping() {
  if (stopping_) return;
  stopping_ = true;
  post("STOPPING=1\nSTATUS=stopping");
}

}  // namespace berth
