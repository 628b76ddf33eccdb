#include "berth/control/neighbor_cache.h"

#include <algorithm>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace berth {

NeighborSettings NeighborSettings::of(const NeighborConfig& config) {
  NeighborSettings settings;
  settings.lock_time = absl::Milliseconds(config.lock_time_ms);
  settings.refresh_interval = absl::Milliseconds(config.refresh_interval_ms);
  settings.request_timeout = absl::Milliseconds(config.request_timeout_ms);
  settings.refresh_retries = config.refresh_retries;
  return settings;
}

absl::string_view toString(NeighborState state) {
  switch (state) {
    case NeighborState::kUnresolved:
      return "unresolved";
    case NeighborState::kReachable:
      return "reachable";
    case NeighborState::kProbing:
      return "probing";
  }
  return "unknown";
}

absl::string_view toString(NeighborEvent event) {
  static constexpr absl::string_view kNames[] = {BERTH_NEIGHBOR_EVENTS(BERTH_ENUMERATOR_NAME)};
  return nameIn(kNames, event);
}

std::string describe(const NeighborNews& news) {
  const std::string address = news.hop.address.toString();
  const std::string mac = news.mac ? news.mac->toString() : "nothing";
  const std::string offered = news.offered ? news.offered->toString() : "nothing";
  switch (news.event) {
    case NeighborEvent::kChange:
      return news.offered ? absl::StrCat("next hop ", address, " moved from ", offered, " to ", mac)
                          : absl::StrCat("next hop ", address, " is at ", mac);
    case NeighborEvent::kLost:
      return absl::StrCat("next hop ", address, " stopped answering; unresolved (was at ", offered,
                          ")");
    case NeighborEvent::kRefusedLocked:
      return absl::StrCat("next hop ", address, ": refused ", offered,
                          " within the lock time; keeps ", mac);
    case NeighborEvent::kRefusedConflict:
      return absl::StrCat("next hop ", address, ": ", offered, " answered too; keeps ", mac,
                          ", which answered");
    default:
      return absl::StrCat("next hop ", address, ": ", toString(news.event));
  }
}

bool NeighborCache::DueOrder::operator()(const std::pair<absl::Time, NeighborKey>& a,
                                         const std::pair<absl::Time, NeighborKey>& b) const {
  return std::tie(a.first, a.second.first, a.second.second.family, a.second.second.bytes) <
         std::tie(b.first, b.second.first, b.second.second.family, b.second.second.bytes);
}

NeighborCache::NeighborCache(NeighborSettings settings, uint64_t jitter_seed)
    : settings_(settings), jitter_state_(jitter_seed | 1) {}

void NeighborCache::track(absl::Span<const NextHopToResolve> hops,
                          absl::Span<const PortConfig> ports, absl::Time now) {
  for (const NextHopToResolve& hop : hops) {
    const NeighborKey key = keyOf(hop);
    auto [it, inserted] = entries_.try_emplace(key);
    Entry& entry = it->second;
    if (inserted) {
      entry.hop = hop;
      entry.slot = std::make_shared<NeighborSlot>();
      table_.attach(hop.port, hop.address, entry.slot);
      schedule(entry, now);
    } else if (entry.hop.source != hop.source) {
      // Reached another way now: ask that way at once.
      entry.hop = hop;
      if (!asking(entry)) {
        unschedule(entry);
        schedule(entry, now);
      }
    }
    entry.learns_announcements = hop.port < ports.size() && ports[hop.port].learn_announcements;
    if (entry.learns_announcements) {
      listening_.insert(key);
    } else {
      listening_.erase(key);
    }
  }
}

void NeighborCache::keepOnly(absl::Span<const NextHopToResolve> hops) {
  absl::flat_hash_set<NeighborKey> kept;
  for (const NextHopToResolve& hop : hops) kept.insert(keyOf(hop));
  for (auto it = entries_.begin(); it != entries_.end();) {
    if (kept.contains(it->first)) {
      ++it;
      continue;
    }
    Entry& entry = it->second;
    // Snapshots still in use may hold the slot: close it so their workers record nothing more.
    entry.slot->closeRequest();
    if (!asking(entry)) unschedule(entry);
    asking_.erase(it->first);
    listening_.erase(it->first);
    table_.erase(it->first.first, it->first.second);
    entries_.erase(it++);
  }
}

bool NeighborCache::turn(absl::Time now, SendRequest send, std::vector<NeighborNews>& news) {
  bool changed = false;
  scratch_.assign(asking_.begin(), asking_.end());
  for (const NeighborKey& key : scratch_) {
    changed |= judgeAnswers(entries_.find(key)->second, now, news);
  }
  for (const NeighborKey& key : listening_) {
    changed |= judgeAnnouncement(entries_.find(key)->second, now, news);
  }
  for (size_t sent = 0; sent < kMaxRequestsPerTurn && !due_.empty(); ++sent) {
    const auto first = due_.begin();
    if (first->first > now) break;
    Entry& entry = entries_.find(first->second)->second;
    if (!send(entry.hop)) break;
    due_.erase(first);
    bump(NeighborEvent::kRequest);
    entry.slot->openRequest();
    entry.answer_by = now + settings_.request_timeout;
    asking_.insert(keyOf(entry.hop));
  }
  return changed;
}

bool NeighborCache::judgeAnswers(Entry& entry, absl::Time now, std::vector<NeighborNews>& news) {
  const NeighborSlot& slot = *entry.slot;
  // Workers compare with the snapshot's MAC, which is the cache's but for a publish under way.
  bool known_answered = entry.mac.has_value() && slot.knownAnswered();
  std::optional<MacAddress> other = slot.otherAnswer();
  if (other && other == entry.mac) {
    known_answered = true;
    other.reset();
  }
  if (!entry.mac && other) {
    setMac(entry, other, now);
    news.push_back({NeighborEvent::kChange, entry.hop, entry.mac, std::nullopt});
    settle(entry, now);
    return true;
  }
  if (known_answered) {
    bump(NeighborEvent::kConfirmation);
    if (other) refuse(entry, NeighborEvent::kRefusedConflict, *other, news);
    settle(entry, now);
    return false;
  }
  // Another MAC's answer waits for the request's timeout, for the MAC in use to answer too.
  if (now < entry.answer_by) return false;
  if (other) {
    // It replaces the MAC in use only after answering kAnswersToReplace requests in a row that
    // the MAC in use left unanswered (one after a flush, which the operator asked for); until
    // then berth asks again at once.
    entry.candidate_answers = entry.candidate == other ? entry.candidate_answers + 1 : 1;
    entry.candidate = other;
    if (entry.candidate_answers >= kAnswersToReplace || entry.lock_waived) {
      if (!locked(entry, now)) {
        const std::optional<MacAddress> replaced = entry.mac;
        setMac(entry, other, now);
        news.push_back({NeighborEvent::kChange, entry.hop, entry.mac, replaced});
        settle(entry, now);
        return true;
      }
      refuse(entry, NeighborEvent::kRefusedLocked, *other, news);
    }
  } else {
    entry.candidate.reset();
    entry.candidate_answers = 0;
  }
  // Unanswered by the MAC in use: ask again at once, since the timeout has passed.
  closeRequest(entry);
  ++entry.unanswered;
  bool changed = false;
  if (entry.mac) {
    entry.state = NeighborState::kProbing;
    if (entry.unanswered > settings_.refresh_retries) {
      const std::optional<MacAddress> lost = entry.mac;
      setMac(entry, std::nullopt, now);
      bump(NeighborEvent::kLost);
      news.push_back({NeighborEvent::kLost, entry.hop, std::nullopt, lost});
      changed = true;
    }
  }
  schedule(entry, now);
  return changed;
}

bool NeighborCache::judgeAnnouncement(Entry& entry, absl::Time now,
                                      std::vector<NeighborNews>& news) {
  const std::optional<MacAddress> announced = entry.slot->takeAnnouncement();
  if (!announced || announced == entry.mac) return false;
  if (locked(entry, now)) {
    refuse(entry, NeighborEvent::kRefusedLocked, *announced, news);
    return false;
  }
  const std::optional<MacAddress> replaced = entry.mac;
  setMac(entry, announced, now);
  entry.state = NeighborState::kReachable;
  entry.answered_at = now;
  entry.unanswered = 0;
  news.push_back({NeighborEvent::kChange, entry.hop, entry.mac, replaced});
  return true;
}

bool NeighborCache::locked(const Entry& entry, absl::Time now) const {
  return entry.mac.has_value() && !entry.lock_waived &&
         now - entry.changed_at < settings_.lock_time;
}

void NeighborCache::setMac(Entry& entry, std::optional<MacAddress> mac, absl::Time now) {
  entry.mac = mac;
  entry.changed_at = now;
  if (mac) {
    table_.learn(entry.hop.port, entry.hop.address, *mac);
    ++entry.changes;
    bump(NeighborEvent::kChange);
  } else {
    table_.forget(entry.hop.port, entry.hop.address);
    entry.state = NeighborState::kUnresolved;
  }
}

void NeighborCache::closeRequest(Entry& entry) {
  entry.slot->closeRequest();
  asking_.erase(keyOf(entry.hop));
}

void NeighborCache::settle(Entry& entry, absl::Time now) {
  closeRequest(entry);
  entry.state = NeighborState::kReachable;
  entry.answered_at = now;
  entry.unanswered = 0;
  entry.lock_waived = false;
  entry.candidate.reset();
  entry.candidate_answers = 0;
  schedule(entry, now + jitteredRefresh());
}

void NeighborCache::refuse(Entry& entry, NeighborEvent event, const MacAddress& offered,
                           std::vector<NeighborNews>& news) {
  ++entry.refused;
  bump(event);
  news.push_back({event, entry.hop, entry.mac, offered});
}

void NeighborCache::flush(absl::Time now) {
  for (auto& [key, entry] : entries_) {
    entry.lock_waived = true;
    if (asking(entry)) continue;
    unschedule(entry);
    schedule(entry, now);
  }
}

void NeighborCache::schedule(Entry& entry, absl::Time at) {
  entry.next_request = at;
  due_.insert({at, keyOf(entry.hop)});
}

void NeighborCache::unschedule(const Entry& entry) {
  due_.erase({entry.next_request, keyOf(entry.hop)});
}

absl::Duration NeighborCache::jitteredRefresh() {
  // xorshift64: spreads refreshes over the last quarter of the interval, never past it.
  jitter_state_ ^= jitter_state_ << 13;
  jitter_state_ ^= jitter_state_ >> 7;
  jitter_state_ ^= jitter_state_ << 17;
  const double unit = static_cast<double>(jitter_state_ >> 11) / static_cast<double>(1ULL << 53);
  return settings_.refresh_interval * (1.0 - 0.25 * unit);
}

std::vector<NeighborRow> NeighborCache::rows(absl::Time now) const {
  std::vector<NeighborRow> rows;
  rows.reserve(entries_.size());
  for (const auto& [key, entry] : entries_) {
    NeighborRow row;
    row.port = entry.hop.port;
    row.address = entry.hop.address;
    row.mac = entry.mac;
    row.state = entry.state;
    if (entry.mac && entry.answered_at != absl::InfinitePast()) row.age = now - entry.answered_at;
    row.unanswered = entry.unanswered;
    row.changes = entry.changes;
    row.refused = entry.refused + entry.slot->refused();
    rows.push_back(row);
  }
  std::sort(rows.begin(), rows.end(), [](const NeighborRow& a, const NeighborRow& b) {
    return std::tie(a.port, a.address.family, a.address.bytes) <
           std::tie(b.port, b.address.family, b.address.bytes);
  });
  return rows;
}

std::vector<std::pair<std::string, uint64_t>> NeighborCache::sums() const {
  std::vector<std::pair<std::string, uint64_t>> sums;
  for (size_t i = 0; i < kNeighborEventCount; ++i) {
    sums.emplace_back(absl::StrCat("neighbor_", toString(static_cast<NeighborEvent>(i))),
                      counts_[i]);
  }
  return sums;
}

}  // namespace berth
