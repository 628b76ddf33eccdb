#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "berth/fleet/store.h"

namespace berth {

// A fleet version fetched from etcd, whole, for the instance to build and apply.
struct FleetVersionText {
  FleetHead head;
  std::string text;
  // What errors name: "fleet version N (FILE)", the pushed file's name as its lines are counted.
  std::string source;
};

// Where each fleet version stands for this instance (docs/scale-out.md, "A fleet through etcd"):
// the newest head seen, the version fetched and offered, the one the instance builds, the one it
// runs and the last it refused. Heads only move forward: a version fetched after a newer head
// arrived is dropped, so the newest wins and none is applied after a newer one. Pure: the fleet
// agent fetches, the instance builds.
class FleetVersions {
 public:
  explicit FleetVersions(std::optional<FleetHead> running) : running_(std::move(running)) {}

  // A head read or watched from etcd.
  void noteHead(const FleetHead& head) { newest_ = head; }
  // The head to fetch: the newest, unless the instance runs it, refused it, builds it, or has it
  // on offer.
  std::optional<FleetHead> toFetch() const;
  bool isNewest(const FleetHead& head) const { return newest_ == head; }
  // A version fetched whole: offered unless a newer head arrived meanwhile.
  void offer(FleetVersionText version);
  // The version on offer, once; the instance builds it until applied() or refused().
  std::optional<FleetVersionText> take();
  void applied(const FleetHead& head);
  void refused(const FleetHead& head);
  // The refused version may be fetched again (a reload asked for it).
  void forgetRefusal() { refused_.reset(); }
  // Whether the newest head seen is at least `version`, the instance runs an older one and has
  // not refused it: the version is on its way.
  bool onItsWay(uint64_t version) const;

  const std::optional<FleetHead>& running() const { return running_; }

 private:
  std::optional<FleetHead> newest_;
  std::optional<FleetVersionText> offered_;  // fetched, not yet taken
  std::optional<FleetHead> building_;        // taken, no verdict yet
  std::optional<FleetHead> running_;
  std::optional<FleetHead> refused_;
};

}  // namespace berth
