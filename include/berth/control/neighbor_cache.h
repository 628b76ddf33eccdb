#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "berth/config/config.h"
#include "berth/dataplane/neighbor_discovery.h"
#include "berth/dataplane/snapshot.h"
#include "berth/util/named_enum.h"

namespace berth {

// The management thread's neighbour cache: when to ask each next hop for its MAC, and what the
// answers the workers record in its slot (NeighborSlot) teach. The rules, as docs/neighbors.md
// gives them:
//   - A MAC is learned or changed only by a reply to a request of berth's, within the request
//     timeout, from the MAC it claims, to the port's MAC (the workers check all but the first).
//   - When the MAC in use answers a request, it stays, whatever else answered too.
//   - Once learned or changed, a MAC holds for the lock time.
//   - A known next hop is asked again every refresh interval (less up to a quarter, so that
//     thousands of next hops do not all ask at once). An unanswered refresh keeps the MAC through
//     refresh_retries more requests, one per request timeout; then the next hop is unresolved
//     until it answers again.
//   - On a port that learns from announcements, a gratuitous ARP or unsolicited advertisement
//     changes the MAC too, once the lock time has passed.
// Pure: the caller gives the time and sends the requests, so tests drive it without an EAL.

struct NeighborSettings {
  absl::Duration lock_time = absl::Seconds(1);
  absl::Duration refresh_interval = absl::Seconds(30);
  absl::Duration request_timeout = absl::Seconds(1);
  uint32_t refresh_retries = 3;

  static NeighborSettings of(const NeighborConfig& config);
};

enum class NeighborState : uint8_t {
  kUnresolved,  // no MAC: asked every request timeout
  kReachable,   // the MAC answered the last request (a refresh may be out)
  kProbing,     // a refresh went unanswered: the MAC is kept while the retries last
};
absl::string_view toString(NeighborState state);

// What the cache counts, each with its counter's name (after "neighbor_" in `stats`).
#define BERTH_NEIGHBOR_EVENTS(X)                                                                 \
  X(kRequest, "requests")                 /* ARP requests and neighbour solicitations sent */    \
  X(kConfirmation, "confirmations")       /* the MAC in use answered */                          \
  X(kChange, "changes")                   /* a next hop's MAC learned or changed */              \
  X(kLost, "lost")                        /* a refresh and its retries unanswered: unresolved */ \
  X(kRefusedLocked, "refused_locked")     /* another MAC within the lock time */                 \
  X(kRefusedConflict, "refused_conflict") /* another MAC answered, but so did the one in use */

enum class NeighborEvent : uint8_t { BERTH_NEIGHBOR_EVENTS(BERTH_ENUMERATOR) kCount };
inline constexpr size_t kNeighborEventCount = static_cast<size_t>(NeighborEvent::kCount);
absl::string_view toString(NeighborEvent event);

// Something for the log: a next hop learned, changed, lost, or a change refused.
struct NeighborNews {
  NeighborEvent event;
  NextHopToResolve hop;
  std::optional<MacAddress> mac;      // the MAC in use now
  std::optional<MacAddress> offered;  // the MAC a change was refused for, or the one replaced
};
// "next hop 198.18.0.254 is at 02:..." and the like, without the port.
std::string describe(const NeighborNews& news);

// A next hop for `berthctl neighbors`.
struct NeighborRow {
  uint16_t port = 0;
  IpAddress address;
  std::optional<MacAddress> mac;
  NeighborState state = NeighborState::kUnresolved;
  std::optional<absl::Duration> age;  // since the MAC last answered
  uint32_t unanswered = 0;            // requests unanswered in a row
  uint64_t changes = 0;
  uint64_t refused = 0;  // claims of another MAC refused, by the workers or by the cache
};

// How many requests in a row another MAC must answer, while the MAC in use answers none of them,
// before it replaces the MAC in use. One is not enough: a flood on the segment can make berth miss
// the real answer to one request while a forged one arrives, and a forger cannot keep that up.
inline constexpr uint32_t kAnswersToReplace = 2;

class NeighborCache {
 public:
  // Requests sent in one turn at most, so that thousands of next hops (l2dsr backends) due at
  // once never hold the loop or fill the worker's control ring: 64 a millisecond.
  static constexpr size_t kMaxRequestsPerTurn = 64;

  explicit NeighborCache(NeighborSettings settings = {}, uint64_t jitter_seed = 1);

  void setSettings(const NeighborSettings& settings) { settings_ = settings; }
  const NeighborSettings& settings() const { return settings_; }

  // Starts resolving each of `hops` not tracked yet (asked for at once); `ports` says which
  // ports learn from announcements. Never stops resolving one: keepOnly() does, once a config
  // without it is in force.
  void track(absl::Span<const NextHopToResolve> hops, absl::Span<const PortConfig> ports,
             absl::Time now);
  void keepOnly(absl::Span<const NextHopToResolve> hops);

  // What a snapshot is built with: each tracked next hop's MAC, if known, and its slot.
  const NeighborTable& table() const { return table_; }

  // Sends a request; false when it could not go now (no buffer, a full ring): asked next turn.
  using SendRequest = absl::FunctionRef<bool(const NextHopToResolve&)>;
  // One turn of the management loop: reads the answers of the requests out and the
  // announcements, decides, then sends the requests due. Appends what the log should say to
  // `news`; returns true when a MAC was learned, changed or lost, so the snapshot must be
  // published again.
  bool turn(absl::Time now, SendRequest send, std::vector<NeighborNews>& news);

  // `berthctl neighbors flush`: asks every next hop again now. The MAC in use keeps serving
  // until the answer, which may change it within the lock time.
  void flush(absl::Time now);

  std::vector<NeighborRow> rows(absl::Time now) const;
  // ("neighbor_requests", N), ... in BERTH_NEIGHBOR_EVENTS' order.
  std::vector<std::pair<std::string, uint64_t>> sums() const;
  uint64_t count(NeighborEvent event) const { return counts_[static_cast<size_t>(event)]; }

 private:
  struct Entry {
    NextHopToResolve hop;
    std::shared_ptr<NeighborSlot> slot;
    std::optional<MacAddress> mac;
    NeighborState state = NeighborState::kUnresolved;
    bool learns_announcements = false;
    bool lock_waived = false;  // until the answer to a flush's request
    absl::Time next_request;   // while not asking
    absl::Time answer_by;      // while asking
    absl::Time answered_at = absl::InfinitePast();
    absl::Time changed_at = absl::InfinitePast();
    uint32_t unanswered = 0;
    // Another MAC that answered the last requests the MAC in use left unanswered, and how many
    // in a row: it replaces the MAC in use at kAnswersToReplace.
    std::optional<MacAddress> candidate;
    uint32_t candidate_answers = 0;
    uint64_t changes = 0;
    uint64_t refused = 0;  // by the cache; the workers' are in the slot
  };
  struct DueOrder {
    bool operator()(const std::pair<absl::Time, NeighborKey>& a,
                    const std::pair<absl::Time, NeighborKey>& b) const;
  };
  static NeighborKey keyOf(const NextHopToResolve& hop) { return {hop.port, hop.address}; }

  void schedule(Entry& entry, absl::Time at);
  void unschedule(const Entry& entry);
  bool locked(const Entry& entry, absl::Time now) const;
  // The answers to one request out, or its timeout. True when the MAC changed.
  bool judgeAnswers(Entry& entry, absl::Time now, std::vector<NeighborNews>& news);
  bool judgeAnnouncement(Entry& entry, absl::Time now, std::vector<NeighborNews>& news);
  void setMac(Entry& entry, std::optional<MacAddress> mac, absl::Time now);
  // Whether a request of the entry's waits for its answer; closeRequest() ends the wait.
  bool asking(const Entry& entry) const { return asking_.contains(keyOf(entry.hop)); }
  void closeRequest(Entry& entry);
  // A request answered (or its answer taken): the next is a refresh, an interval away.
  void settle(Entry& entry, absl::Time now);
  void refuse(Entry& entry, NeighborEvent event, const MacAddress& offered,
              std::vector<NeighborNews>& news);
  absl::Duration jitteredRefresh();
  void bump(NeighborEvent event) { ++counts_[static_cast<size_t>(event)]; }

  NeighborSettings settings_;
  uint64_t jitter_state_;
  absl::flat_hash_map<NeighborKey, Entry> entries_;
  NeighborTable table_;
  absl::btree_set<std::pair<absl::Time, NeighborKey>, DueOrder> due_;  // not asking, by time
  absl::flat_hash_set<NeighborKey> asking_;
  absl::flat_hash_set<NeighborKey> listening_;  // on ports that learn from announcements
  std::vector<NeighborKey> scratch_;
  uint64_t counts_[kNeighborEventCount] = {};
};

}  // namespace berth
