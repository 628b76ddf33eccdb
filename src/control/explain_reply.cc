#include "berth/control/explain_reply.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "berth/dataplane/proxy_stream.h"
#include "berth/net/packet_parser.h"
#include "berth/util/json_writer.h"

namespace berth {

absl::StatusOr<FlowKey> explainedFlow(const ControlRequest& request) {
  const std::string& proto =
      request.field("proto").empty() ? std::string("tcp") : request.field("proto");
  if (proto != "tcp" && proto != "udp") {
    return absl::InvalidArgumentError(
        absl::StrCat("--proto must be tcp or udp, not '", proto, "'"));
  }
  absl::StatusOr<Endpoint> source = Endpoint::parse(request.field("src"));
  if (!source.ok())
    return absl::InvalidArgumentError(absl::StrCat("--src: ", source.status().message()));
  absl::StatusOr<Endpoint> destination = Endpoint::parse(request.field("dst"));
  if (!destination.ok())
    return absl::InvalidArgumentError(absl::StrCat("--dst: ", destination.status().message()));
  if (source->address.family != destination->address.family) {
    return absl::InvalidArgumentError("--src and --dst must both be IPv4 or both IPv6");
  }
  return FlowKey::make(source->address, destination->address, source->port, destination->port,
                       proto == "tcp" ? kProtocolTcp : kProtocolUdp);
}

namespace {

// The "conntrack" member: the worker's entry for the flow, if one tracks it; its text returned.
// The "session" member: a Full-NAT session's two tuples and state; its text returned.
std::string writeSession(const Snapshot& snapshot, const TrackedConnection& tracked,
                         JsonWriter& json) {
  const NatSession& session = *tracked.session;
  const uint32_t backend = snapshot.backendIndexOf(session.backend_id);
  auto endpoint = [&json](const char* address_key, const char* port_key, IpFamily family,
                          const std::array<uint8_t, 16>& bytes, uint16_t port) {
    json.key(address_key).value(IpAddress{family, bytes}.toString());
    json.key(port_key).value(static_cast<uint64_t>(static_cast<uint16_t>(port >> 8 | port << 8)));
  };
  json.key("session").beginObject().key("worker").value(static_cast<uint64_t>(tracked.worker));
  endpoint("client", "client_port", session.client_family, session.client, session.client_port);
  endpoint("local_address", "local_port", session.backend_family,
           snapshot.natLocalAddress(session.local_address).bytes, session.local_port);
  endpoint("backend_address", "backend_port", session.backend_family, session.backend,
           session.backend_port);
  json.key("backend").value(backend == kNoBackendIndex ? "" : snapshot.backend(backend).name);
  json.key("state").value(toString(session.state));
  json.key("nat64").value(session.client_family != session.backend_family);
  json.key("proxy_header").value(toString(session.proxy_header));
  json.key("client_sequence_shift")
      .value(static_cast<uint64_t>(session.proxy_header == ProxyHeaderState::kNone
                                       ? 0
                                       : proxyHeaderLength(session.client_family)));
  json.key("idle_ms").value(static_cast<uint64_t>(tracked.idle_ms));
  json.key("expired").value(tracked.expired).endObject();
  return absl::StrFormat("Full-NAT session on worker %u: %s, idle %u ms%s", tracked.worker,
                         describeSession(snapshot, session), tracked.idle_ms,
                         tracked.expired ? " (expired)" : "");
}

std::string writeTracked(const Snapshot& snapshot, bool conntrack,
                         const std::optional<TrackedConnection>& tracked, JsonWriter& json) {
  if (tracked && tracked->session) {
    json.key("conntrack").null();
    return writeSession(snapshot, *tracked, json);
  }
  json.key("conntrack");
  if (!conntrack) {
    json.value("off");
    return "off";
  }
  if (!tracked) {
    json.null();
    return "no worker tracks this flow";
  }
  const Connection& c = tracked->connection;
  const uint32_t remembered = snapshot.backendIndexOf(c.backend);
  const std::string backend_name =
      remembered == kNoBackendIndex ? "a removed backend" : snapshot.backend(remembered).name;
  json.beginObject()
      .key("worker")
      .value(static_cast<uint64_t>(tracked->worker))
      .key("state")
      .value(toString(c.state))
      .key("backend")
      .value(backend_name)
      .key("idle_ms")
      .value(static_cast<uint64_t>(tracked->idle_ms))
      .key("expired")
      .value(tracked->expired)
      .key("from_peer")
      .value((c.sync & kSyncAdopted) != 0)
      .key("shared_with_peers")
      .value((c.sync & kSyncExported) != 0)
      .endObject();
  // Flow sync (docs/scale-out.md): where the backend came from, and whether peers know it.
  const char* sync = (c.sync & kSyncAdopted) != 0
                         ? ", its backend from a peer's record"
                         : ((c.sync & kSyncExported) != 0 ? ", off the table's pick: the peers "
                                                            "were told"
                                                          : "");
  return absl::StrFormat("worker %u: %s to %s, idle %u ms%s%s", tracked->worker, toString(c.state),
                         backend_name, tracked->idle_ms, tracked->expired ? " (expired)" : "",
                         sync);
}

}  // namespace

std::string explainReplyJson(const Snapshot& snapshot, const FlowKey& flow,
                             const FlowExplanation& explanation, bool conntrack,
                             const std::optional<TrackedConnection>& tracked,
                             absl::string_view note, absl::string_view listener) {
  auto describe = [&](uint32_t backend) -> std::string {
    if (backend == kNoBackendIndex) return "none";
    const SnapshotBackend& b = snapshot.backend(backend);
    return absl::StrCat(b.name, " (", b.address.toString(), ", ",
                        !b.healthy ? "unhealthy" : (b.drained ? "drained" : "healthy"), ")");
  };
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("flow").value(flow.toString());
  json.key("snapshot_generation").value(snapshot.generation());
  std::string text = absl::StrCat("flow:          ", flow.toString(), "\n");
  if (!explanation.service) {
    json.key("service").null().key("next_backend").null();
    json.key("reason").value(explanation.reason);
    absl::StrAppend(&text, "service:       none\nnext packet:   dropped: ", explanation.reason,
                    "\n");
    json.key("text").value(text).endObject();
    return json.str();
  }
  const SnapshotService& service = snapshot.service(*explanation.service);
  json.key("service").value(service.name);
  json.key("hash_fields").value(toString(service.hash_fields));
  json.key("flow_hash").value(absl::StrFormat("%08x", explanation.hash));
  json.key("slot").value(explanation.slot).key("table_size").value(service.table.size());
  json.key("table_backend");
  if (explanation.table_backend == kNoBackendIndex) {
    json.null();
  } else {
    json.value(snapshot.backend(explanation.table_backend).name);
  }
  const std::string conntrack_text = writeTracked(snapshot, conntrack, tracked, json);
  // A backend is reachable from a port only once its next hop's MAC is known: the next hop of
  // the port the first port's traffic leaves through.
  std::string reason = explanation.reason;
  bool dropped = explanation.next_backend == kNoBackendIndex;
  if (!dropped && snapshot.portCount() > 0 && explanation.service &&
      snapshot.target(snapshot.egressOf(0, snapshot.service(*explanation.service)),
                      explanation.next_backend) == nullptr) {
    absl::StrAppend(&reason,
                    "; but its next hop's MAC is not known yet, so the packet is dropped "
                    "as next_hop_unresolved");
    dropped = true;
  }
  json.key("next_backend");
  if (explanation.next_backend == kNoBackendIndex) {
    json.null();
  } else {
    json.value(snapshot.backend(explanation.next_backend).name);
  }
  json.key("dropped").value(dropped).key("tracked").value(explanation.tracked);
  json.key("bounded_load_fallback").value(explanation.fell_back);
  json.key("reason").value(reason);
  if (!note.empty()) json.key("note").value(note);
  absl::StrAppendFormat(
      &text,
      "service:       %s (%s), hashing %s\nflow hash:     %08x, slot %u of %u\n"
      "table's pick:  %s\nconntrack:     %s\nnext packet:   %s\nbecause:       %s\n",
      service.name, listener, toString(service.hash_fields), explanation.hash, explanation.slot,
      service.table.size(), describe(explanation.table_backend), conntrack_text,
      dropped ? "dropped" : describe(explanation.next_backend), reason);
  if (!note.empty()) absl::StrAppend(&text, "note:          ", note, "\n");
  json.key("text").value(text).endObject();
  return json.str();
}

std::string explainNatReplyJson(const Snapshot& snapshot, const FlowKey& flow,
                                uint16_t local_address,
                                const std::optional<TrackedConnection>& tracked,
                                absl::string_view note) {
  JsonWriter json;
  json.beginObject().key("ok").value(true).key("flow").value(flow.toString());
  json.key("snapshot_generation").value(snapshot.generation());
  json.key("local_address").value(snapshot.natLocalAddress(local_address).toString());
  std::string text = absl::StrCat("flow:          ", flow.toString(),
                                  "\nto:            ", "Full-NAT local address ",
                                  snapshot.natLocalAddress(local_address).toString(), "\n");
  std::string next;
  if (!tracked || !tracked->session) {
    json.key("session").null();
    next = "dropped as nat_reply_no_session: no worker holds a session this reply belongs to";
    absl::StrAppend(&text, "session:       none\n");
  } else {
    absl::StrAppend(&text, "session:       ", writeSession(snapshot, *tracked, json), "\n");
    const NatSession& session = *tracked->session;
    const uint32_t service = snapshot.serviceIndexOf(session.service);
    const uint32_t out = session.receiving_port;
    if (tracked->expired) {
      next = "dropped as nat_reply_no_session: its session is past its timeout";
    } else if (service == Snapshot::kNoServiceIndex) {
      next = "dropped: its service is gone, and its session ends";
    } else if (out >= snapshot.portCount() || !snapshot.port(out).client_hop_ready) {
      next = "dropped as next_hop_unresolved: the receiving port's gateway MAC is not known";
    } else {
      const SnapshotService& s = snapshot.service(service);
      next = absl::StrCat("to the client from the VIP ", s.vip.toString(), " (service ", s.name,
                          "), out of the port its packets came in on, to its gateway");
    }
  }
  json.key("next").value(next);
  absl::StrAppend(&text, "next packet:   ", next, "\n");
  if (!note.empty()) {
    json.key("note").value(note);
    absl::StrAppend(&text, "note:          ", note, "\n");
  }
  json.key("text").value(text).endObject();
  return json.str();
}

}  // namespace berth
