#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "berth/fleet/agreed_health.h"
#include "berth/fleet/store.h"

namespace berth {

// The fleet's instances as this one last read them (docs/scale-out.md, "Table generations"):
// every live instance's report, the instances that left less than kDepartedHold ago with their
// last verdicts, and the health they all agree on. Pure: the fleet agent reads the reports.
class InstanceRoster {
 public:
  // How long an instance that left (its report gone with its lease) still counts with its last
  // verdicts. Its death moves its flows to the others behind ECMP; were its verdicts dropped at
  // once, the quorum of the survivors could change the tables under those very flows.
  static constexpr absl::Duration kDepartedHold = absl::Seconds(30);
  using Verdicts = std::map<std::string, std::map<std::string, bool>>;

  InstanceRoster(std::string own_name, uint32_t quorum)
      : own_name_(std::move(own_name)), quorum_(quorum) {}

  // A fresh read of the live reports at `now`, agreed with `own` verdicts: the names of the
  // instances that left since the last read (this one aside).
  std::vector<std::string> update(std::vector<InstanceReport> live, absl::Time now,
                                  const Verdicts& own);
  // The agreement again, with this instance's verdicts as they are now rather than as its last
  // report put them, so that the elected instance never plans from its own stale word.
  void agree(const Verdicts& own);

  const std::vector<InstanceReport>& reports() const { return reports_; }
  const AgreedHealth& agreed() const { return agreed_; }

 private:
  std::string own_name_;
  uint32_t quorum_;
  std::vector<InstanceReport> reports_;
  // Instances whose reports left the view, with their last report and when they left.
  std::map<std::string, std::pair<InstanceReport, absl::Time>> departed_;
  AgreedHealth agreed_;
};

}  // namespace berth
