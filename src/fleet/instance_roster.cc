#include "berth/fleet/instance_roster.h"

#include <set>

namespace berth {

std::vector<std::string> InstanceRoster::update(std::vector<InstanceReport> live, absl::Time now,
                                                const Verdicts& own) {
  std::vector<InstanceReport> previous = std::exchange(reports_, std::move(live));
  std::set<std::string> present;
  for (const InstanceReport& report : reports_) {
    present.insert(report.name);
    departed_.erase(report.name);
  }
  std::vector<std::string> left;
  for (InstanceReport& report : previous) {
    if (present.count(report.name) != 0 || report.name == own_name_) continue;
    left.push_back(report.name);
    std::string name = report.name;
    departed_.insert_or_assign(std::move(name), std::make_pair(std::move(report), now));
  }
  std::erase_if(departed_,
                [now](const auto& entry) { return now - entry.second.second >= kDepartedHold; });
  agree(own);
  return left;
}

void InstanceRoster::agree(const Verdicts& own) {
  std::vector<InstanceVerdicts> verdicts;
  for (InstanceReport& report : reports_) {
    if (report.name == own_name_) report.health = own;
    verdicts.push_back(InstanceVerdicts{report.name, report.health});
  }
  for (const auto& [name, departed] : departed_) {
    verdicts.push_back(InstanceVerdicts{name, departed.first.health});
  }
  agreed_ = agreeOnHealth(verdicts, quorum_);
}

}  // namespace berth
