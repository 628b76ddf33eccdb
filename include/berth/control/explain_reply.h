#pragma once

#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "berth/api/request.h"
#include "berth/dataplane/explain.h"
#include "berth/dataplane/snapshot.h"
#include "berth/net/flow_key.h"

namespace berth {

// `berthctl explain`'s two pure halves; berthd asks its workers for the flow's connection entry
// in between (dataplane/explain.h has the rules).

// The flow a request names: --src and --dst as ADDRESS:PORT of one family, --proto tcp or udp
// (tcp when absent). Errors name the flag.
absl::StatusOr<FlowKey> explainedFlow(const ControlRequest& request);

// The reply for `flow`: its service, hash, slot, the table's pick, the connection entry
// `tracked` (a worker's, if one holds the flow; `conntrack` false: there are no connection
// tables) and where its next packet goes and why, as JSON with the text berthctl prints.
// `listener` is the service's ("tcp 198.18.100.1:80"); `note` says which workers did not answer.
std::string explainReplyJson(const Snapshot& snapshot, const FlowKey& flow,
                             const FlowExplanation& explanation, bool conntrack,
                             const std::optional<TrackedConnection>& tracked,
                             absl::string_view note, absl::string_view listener);

// The reply for a backend's `flow` to Full-NAT local address `local_address`: the session it
// belongs to (`tracked`, a worker's, if one holds it) with both tuples, and where it goes: to
// the client from the VIP, or dropped as nat_reply_no_session (docs/fullnat.md).
std::string explainNatReplyJson(const Snapshot& snapshot, const FlowKey& flow,
                                uint16_t local_address,
                                const std::optional<TrackedConnection>& tracked,
                                absl::string_view note);

}  // namespace berth
